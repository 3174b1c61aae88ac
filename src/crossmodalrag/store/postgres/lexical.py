"""Lexical retrieval on PostgreSQL: BM25 computed from stored term statistics, as FTS5 computes it.

Each chunk's `chunk_terms.terms` tsvector holds the tokens of SQLite's own FTS5 tokenizer (porter,
unicode61, diacritics removed), produced in an in-memory SQLite database: the stdlib always has
FTS5, so the two backends index and query the very same tokens, and index/fts.py's query rules
(identifier variants, CJK bigrams, exact forms, stopwords) apply unchanged; a memory indexed under
an older FTS_VERSION is re-tokenized by a schema migration (schema_changes.py RETOKENIZE, `reindex`), as
SQLite's chunks_fts is. The tsvector is literal
(`'token':3`), never parsed by a text-search configuration, and query tokens are quoted lexemes, so
no user text becomes tsquery syntax.

The GIN index finds the matching chunks in modes all and phrase and under filters (in mode any the
postings already say which chunks hold a query word); BM25 (k1 1.2, b 0.75, FTS5's idf floor)
is computed from `chunk_postings` (lexeme, chunk, occurrences in the body): title tokens count in
a chunk's length and in a word's document frequency but not in its term frequency, as with FTS5's
title column weight 0. In mode any without filters (an ask's default) the server computes the
scores (SERVER_BM25: one statement, one row per matching chunk, the same doubles as `_score`).
Phrase mode scores the phrase as FTS5 does, as one term: its document frequency the chunks holding
it (`<->`, title or body), its term frequency its occurrences in the body, counted from the
tsvector's positions of the matching chunks (PHRASE_HOLDERS). A tsvector keeps at most 256
positions of a lexeme, far more than a chunk (~1,200 characters) holds of a real word.
The document count and length sum come from `chunk_stats`, kept by the writers (schema 6).
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import defaultdict
from typing import Iterable, NamedTuple

from crossmodalrag.index import fts

K1, B = 1.2, 0.75
MAX_LEXEME_BYTES = 2000  # PostgreSQL refuses lexemes of 2 KB and more
MAX_POSITION = 16383  # tsvector positions saturate here
_LOCAL = threading.local()


def analyzer() -> sqlite3.Connection:
    """This thread's in-memory SQLite database with the FTS5 tokenizer of chunks_fts."""
    conn = getattr(_LOCAL, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        conn.execute(
            "CREATE VIRTUAL TABLE doc USING fts5(title, body, content = '', "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        conn.execute("CREATE VIRTUAL TABLE doc_tokens USING fts5vocab(doc, instance)")
        _LOCAL.conn = conn
    return conn


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


class Indexed(NamedTuple):
    """One chunk as the lexical index stores it."""

    terms: str  # the tsvector literal: body positions (weight D), then title positions (weight A)
    length: int  # tokens in title and body: FTS5's document length
    postings: dict[str, int]  # every lexeme of title or body -> its occurrences in the body


def index_rows(rows: list[tuple[str, str]]) -> list[Indexed]:
    """Each (title, body) as FTS5 would index it."""
    conn = analyzer()
    conn.execute("SAVEPOINT tokens")
    try:
        conn.execute("INSERT INTO doc (doc) VALUES ('delete-all')")
        conn.executemany(
            "INSERT INTO doc (rowid, title, body) VALUES (?, ?, ?)", [(i, *row) for i, row in enumerate(rows)]
        )
        instances = conn.execute('SELECT term, doc, col, "offset" FROM doc_tokens').fetchall()
    finally:
        conn.execute("RELEASE tokens")
    positions: list[dict[str, list[str]]] = [defaultdict(list) for _ in rows]
    postings: list[dict[str, int]] = [defaultdict(int) for _ in rows]
    counts = [[0, 0] for _ in rows]  # (title tokens, body tokens)
    for _, doc, column, _ in instances:
        counts[doc][column == "body"] += 1
    for term, doc, column, offset in instances:
        if len(term.encode()) >= MAX_LEXEME_BYTES:
            continue
        body = column == "body"
        postings[doc][term] += body
        # Body first (positions 1..), then the title past it, so no phrase spans the two.
        at = offset + 1 if body else counts[doc][1] + 2 + offset
        positions[doc][term].append(f"{min(at, MAX_POSITION)}" + ("" if body else "A"))
    return [
        Indexed(" ".join(f"{_quote(t)}:{','.join(p)}" for t, p in found.items()), sum(count), dict(posted))
        for found, count, posted in zip(positions, counts, postings, strict=True)
    ]


def insert_rows(conn, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index (chunk_id, title, text) rows, prepared as index/fts.py prepares them for FTS5: one
    statement per table (COPY is refused on tables under row-level security). Each column goes over
    as one string the server splits (psycopg's per-element quoting of Python lists cost more CPU
    than the rest of writing a note): lexemes, tsvectors and numbers hold no newline. The rows get
    the writer's owner (the columns' default)."""
    _write(conn, list(rows), owned_as_chunk=False)


def delete_rows(conn, chunk_ids: list[int]) -> None:
    """Drop the lexical rows of chunks that stay (a moved file's, relabelled); chunk_stats follows
    by its trigger."""
    for table in ("chunk_postings", "chunk_terms"):
        conn.execute(f"DELETE FROM {table} WHERE chunk_id = ANY(?)", (list(chunk_ids),))


REINDEX_BATCH = 2000  # chunks read and written per round trip when the whole index is rebuilt


def reindex(conn) -> int:
    """Index every stored chunk anew with today's preparation, into emptied chunk_terms and
    chunk_postings, inside the caller's transaction (schema_changes.retokenize, which lets this role see
    every owner's rows); returns the number of chunks indexed. Each row keeps its chunk's owner."""
    done, after = 0, 0
    while rows := conn.execute(
        "SELECT c.id, s.title, c.text FROM chunks c JOIN sources s ON s.id = c.source_id "
        "WHERE c.id > ? ORDER BY c.id LIMIT ?",
        (after, REINDEX_BATCH),
    ).fetchall():
        _write(conn, [tuple(row) for row in rows], owned_as_chunk=True)
        done, after = done + len(rows), rows[-1][0]
    return done


def _write(conn, rows: list[tuple[int, str, str]], owned_as_chunk: bool) -> None:
    """Write the lexical index rows of (chunk_id, title, text); `owned_as_chunk`: each row's owner
    is its chunk's (a rebuild by a role that writes every owner's rows), not the writer's."""
    if not rows:
        return
    owner, chunks = ("", "") if not owned_as_chunk else (", owner", ", c.owner")
    join = "" if not owned_as_chunk else " JOIN chunks c ON c.id = n.chunk_id"
    indexed = index_rows([(fts.index_title(title), fts.index_body(text)) for _, title, text in rows])
    ids = [chunk_id for chunk_id, _, _ in rows]
    conn.execute(  # regexp_split_to_array: one element per line even for a lone empty tsvector
        f"INSERT INTO chunk_terms (chunk_id, terms, length{owner}) SELECT n.*{chunks} FROM unnest("
        f"{_NUMBERS}::bigint[], regexp_split_to_array(?, E'\\n')::tsvector[], {_NUMBERS}::int[])"
        f" AS n(chunk_id, terms, length){join}",
        (_joined(ids), "\n".join(i.terms for i in indexed), _joined(i.length for i in indexed)),
    )
    held = [(chunk_id, i) for chunk_id, i in zip(ids, indexed, strict=True) if i.postings]
    conn.execute(  # string_to_array: no element for '' (here: no postings at all)
        f"INSERT INTO chunk_postings (lexeme, chunk_id, body_tf, length{owner}) SELECT n.*{chunks} FROM unnest("
        f"string_to_array(?, E'\\n'), {_NUMBERS}::bigint[], {_NUMBERS}::int[], {_NUMBERS}::int[])"
        f" AS n(lexeme, chunk_id, body_tf, length){join}",
        (
            "\n".join("\n".join(i.postings) for _, i in held),
            ",".join(",".join([str(chunk_id)] * len(i.postings)) for chunk_id, i in held),
            ",".join(_joined(i.postings.values()) for _, i in held),
            ",".join(",".join([str(i.length)] * len(i.postings)) for _, i in held),
        ),
    )


_NUMBERS = "string_to_array(?, ',')"


def _joined(numbers: Iterable[int]) -> str:
    return ",".join(map(str, numbers))


def corpus_statistics(conn) -> tuple[int, int]:
    """(chunks indexed, their total length) that this client may see: the sum of the writers' deltas
    (schema 6), not a scan of chunk_terms."""
    total, length = conn.execute(
        "SELECT COALESCE(SUM(chunks), 0), COALESCE(SUM(length), 0) FROM chunk_stats"
    ).fetchone()
    return int(total), int(length)


def has_prefix(conn, prefix: str) -> bool:
    """Whether a lexeme visible to this client starts with `prefix` (a B-tree range: lexemes sort bytewise)."""
    found = conn.execute(
        "SELECT 1 FROM chunk_postings WHERE lexeme >= ? AND lexeme < ? LIMIT 1", (prefix, prefix + "\U0010ffff")
    )
    return found.fetchone() is not None


def document_frequencies(conn, tokens: list[str]) -> tuple[int, dict[str, int]]:
    """(chunks indexed, chunks containing each token), under the client's row-level security; one
    round trip (the row without a lexeme is the chunk count)."""
    rows = conn.execute(
        "SELECT NULL, COALESCE(SUM(chunks), 0)::bigint FROM chunk_stats UNION ALL "
        "SELECT lexeme, COUNT(*) FROM chunk_postings WHERE lexeme = ANY(?) GROUP BY lexeme",
        (list(tokens),),
    ).fetchall()
    total = next(count for lexeme, count in rows if lexeme is None)
    return total, {lexeme: count for lexeme, count in rows if lexeme is not None}


def _phrases(terms: list[fts.QueryTerm], analyzed: list[list[str]], match: str, query: str) -> list[list[tuple]]:
    """Groups of alternatives; each alternative a phrase: a list of (token, prefix). A chunk matches
    `any` group's alternative, or (mode all) one alternative of every group."""
    if match == "phrase":  # one group: the phrase as typed and in NFKC, as fts.phrase_expression has it
        forms = [tokens for words in fts.phrase_forms(query) if (tokens := _tokens_in_order(" ".join(words)))]
        return [[[(token, False) for token in tokens] for tokens in forms]] if forms else []
    # A term's alternatives (exact form, stem) are phrases of their own, as in fts.match_expression.
    alternatives = iter(fts.analyze(analyzer(), [a for term in terms for a in term.alternatives]))
    groups = []
    for term, tokens in zip(terms, analyzed, strict=True):
        group = [[(token, term.prefix) for token in tokens]] if tokens else []
        for _ in term.alternatives:
            found = next(alternatives)
            if found:
                group.append([(token, False) for token in sorted(found)])
        if group:
            groups.append(group)
    if match == "any":  # Vietnamese syllable pairs add to the score where the words stand together
        pairs = fts.analyze(analyzer(), fts.query_pairs(query))
        groups += [[[(token, False) for token in sorted(found)]] for found in pairs if found]
    return groups


def _tokens_in_order(text: str) -> list[str]:
    """The index tokens of `text` in the order they stand, as FTS5 tokenizes a quoted phrase: a word
    the tokenizer splits (at a New Tai Lue vowel sign, say) gives each part in its place, where
    fts.analyze gives a set per word."""
    conn = analyzer()
    conn.execute("SAVEPOINT phrase")
    try:
        conn.execute("INSERT INTO doc (doc) VALUES ('delete-all')")
        conn.execute("INSERT INTO doc (rowid, title, body) VALUES (0, '', ?)", (text,))
        instances = conn.execute('SELECT term, "offset" FROM doc_tokens').fetchall()
    finally:
        conn.execute("RELEASE phrase")
    return [term for term, _ in sorted(instances, key=lambda instance: instance[1])]


def _tsquery(phrase: list[tuple[str, bool]], joiner: str = " & ") -> str:
    return "(" + joiner.join(_quote(token) + (":*" if prefix else "") for token, prefix in phrase) + ")"


def bm25_scores(
    conn, query: str, terms: list[fts.QueryTerm], analyzed: list[list[str]], match: str, where: tuple | None
) -> dict[int, float]:
    """BM25 of every matching chunk (passing the filter `where` = (SQL over c, s; params)), like
    candidates._bm25_scores on SQLite. The postings give the counts and lengths, and in mode `any` without
    a filter the matches too; otherwise the GIN index picks the matches."""
    groups = _phrases(terms, analyzed, match, query)
    if not groups:
        return {}
    if match == "phrase":  # a phrase's forms (as typed, NFKC) each scored, summed as FTS5 sums an OR
        scores: dict[int, float] = {}
        for form in groups[0]:
            found = _phrase_scores(conn, [t for t, _ in form], where) if len(form) > 1 else None
            for chunk_id, score in (found if found is not None else _scores(conn, [[form]], match, where)).items():
                scores[chunk_id] = scores.get(chunk_id, 0.0) + score
        return scores
    return _scores(conn, groups, match, where)


def _scores(conn, groups: list[list[list[tuple]]], match: str, where: tuple | None) -> dict[int, float]:
    """BM25 of the chunks matching the groups of phrases (one word's occurrences are in its postings)."""
    joiner = " <-> " if match == "phrase" else " & "
    alternatives = [" | ".join(_tsquery(p, joiner) for p in group) for group in groups]
    matching = (" & " if match == "all" else " | ").join(f"({a})" for a in alternatives)
    phrases = [p for group in groups for p in group]
    tokens = {token: prefix for phrase in phrases for token, prefix in phrase}
    if match == "any" and where is None:  # the postings say which chunks match: any phrase's every token
        return _scored_by_server(conn, phrases, tokens)
    # Every word, a phrase's order or a filter: the GIN index decides which chunks match.
    counts = _postings(conn, tokens)[0]
    join, clause, params = "", "", []
    if where is not None:
        join = " JOIN chunks c ON c.id = t.chunk_id JOIN sources s ON s.id = c.source_id"
        clause, params = f" AND {where[0]}", list(where[1])
    lengths = dict(
        conn.execute(
            f"SELECT t.chunk_id, t.length FROM chunk_terms t{join} WHERE t.terms @@ ?::tsquery{clause}",
            (matching, *params),
        )
    )
    total, length_sum = corpus_statistics(conn)
    return _score(lengths, phrases, counts, total, length_sum / total if total else 1.0)


# Every chunk holding the phrase (its tokens at consecutive positions, in the body or in the title:
# index_rows leaves a gap between them), its length, whether it passes the filter, and for those that
# pass the phrase's occurrences in the body (weight D): the places it starts, where each token stands
# at the start plus its place in the phrase. FTS5's statistics of a phrase: every holder counts in
# its document frequency, filtered or not; title occurrences count in no term frequency (weight 0).
# The tsvector is cut down to the phrase's body positions before it is unnested (body weight D, the
# phrase's tokens marked A): unnesting every lexeme of every holder took "of the" from 110 to 165 ms
# at 20k chunks, the cut-down vector 100 ms (the words-apart scoring it replaces: 110 ms).
PHRASE_HOLDERS = """
WITH phrase AS MATERIALIZED (SELECT * FROM unnest(?::text[]) WITH ORDINALITY AS p(token, place)),
holders AS (
  SELECT t.chunk_id, t.length, t.terms, {passes} AS passes FROM chunk_terms t{join} WHERE t.terms @@ ?::tsquery
)
SELECT h.chunk_id, h.length, h.passes, CASE WHEN h.passes THEN (
  SELECT COUNT(*) FROM (
    SELECT w.at - p.place AS start
    FROM unnest(ts_filter(setweight(ts_filter(h.terms, '{{d}}'), 'a', ?::text[]), '{{a}}')) AS u
    JOIN phrase p ON p.token = u.lexeme, unnest(u.positions) AS w(at)
    GROUP BY 1 HAVING COUNT(*) = (SELECT COUNT(*) FROM phrase)
  ) AS starts
) ELSE 0 END
FROM holders h
"""


def _phrase_scores(conn, tokens: list[str], where: tuple | None) -> dict[int, float]:
    """BM25 of the chunks holding the phrase `tokens` (two or more) that pass `where`, the phrase
    scored as one term, as FTS5 scores it (PHRASE_HOLDERS); one statement, one row per holder."""
    passes, join, params = "TRUE", "", []
    if where is not None:  # LEFT JOIN: a holder that fails the filter still counts in the idf
        join = " LEFT JOIN chunks c ON c.id = t.chunk_id LEFT JOIN sources s ON s.id = c.source_id"
        passes, params = f"COALESCE(({where[0]}), FALSE)", list(where[1])
    rows = conn.execute(
        PHRASE_HOLDERS.format(passes=passes, join=join),
        (tokens, *params, _tsquery([(token, False) for token in tokens], " <-> "), tokens),
    ).fetchall()
    lengths = {chunk_id: length for chunk_id, length, passed, _ in rows if passed}
    occurrences = {chunk_id: count for chunk_id, _, _, count in rows}
    total, length_sum = corpus_statistics(conn)
    phrase = " ".join(tokens)
    return _score(lengths, [[(phrase, False)]], {phrase: occurrences}, total, length_sum / total if total else 1.0)


# Each chunk's BM25 from `held` (phrase, chunk_id, tf, length), `idf` (phrase, idf) and `average`
# (length): _score's arithmetic, shared by SERVER_BM25 and topk.py.
BM25_OF_HELD = f"""
SELECT h.chunk_id, SUM(CASE WHEN h.tf > 0 THEN
  i.idf * h.tf * ({K1}::float8 + 1) / (h.tf + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * h.length / a.length))
  ELSE 0::float8 END ORDER BY h.phrase) AS score
FROM held h JOIN idf i USING (phrase) CROSS JOIN average a GROUP BY h.chunk_id
"""

# _score's arithmetic in SQL, operation for operation in the same order and in float8 (log is C's
# log() in both), so every score is the same double: the phrases' shares are summed in phrase order.
# A phrase's holders are the chunks with all its tokens (title or body); a prefix token sums every
# lexeme starting with it; the counts and the postings come from one snapshot.
SERVER_BM25 = f"""
WITH tokens AS MATERIALIZED (SELECT * FROM unnest(?::text[], ?::text[]) AS t(token, upper)),
members AS MATERIALIZED (
  SELECT phrase, token, COUNT(*) OVER (PARTITION BY phrase) AS size
  FROM (SELECT DISTINCT * FROM unnest(?::int[], ?::text[]) AS m(phrase, token)) AS distinct_members
),
found AS (
  SELECT t.token, p.chunk_id, p.body_tf, p.length FROM tokens t JOIN chunk_postings p ON p.lexeme = t.token
  WHERE t.upper IS NULL
  UNION ALL
  SELECT t.token, p.chunk_id, p.body_tf, p.length FROM tokens t JOIN chunk_postings p
  ON p.lexeme >= t.token AND p.lexeme < t.upper AND starts_with(p.lexeme, t.token)
),
per_token AS (SELECT token, chunk_id, SUM(body_tf) AS tf, MAX(length) AS length FROM found GROUP BY 1, 2),
held AS MATERIALIZED (
  SELECT m.phrase, k.chunk_id, MIN(k.tf) AS tf, MAX(k.length) AS length FROM members m
  JOIN per_token k ON k.token = m.token GROUP BY 1, 2 HAVING COUNT(*) = MAX(m.size)
),
stats AS MATERIALIZED (
  SELECT COALESCE(SUM(chunks), 0)::float8 AS total, COALESCE(SUM(length), 0)::float8 AS sum FROM chunk_stats
),
idf AS MATERIALIZED (
  SELECT phrase, GREATEST(ln((GREATEST(total, COUNT(*)) - COUNT(*) + 0.5::float8) / (COUNT(*) + 0.5::float8)),
                          1e-6::float8) AS idf
  FROM held, stats GROUP BY phrase, total
),
average AS MATERIALIZED (SELECT CASE WHEN total > 0 THEN sum / total ELSE 1.0::float8 END AS length FROM stats)
{BM25_OF_HELD}
"""


def _scored_by_server(
    conn, phrases: list[list[tuple[str, bool]]], tokens: dict[str, bool], limit: int | None = None
) -> dict[int, float]:
    """BM25 of every chunk holding some phrase, computed by the server: one round trip, one row per
    matching chunk (the client no longer reads every posting of every query word); with `limit`, only
    the best `limit` rows (score desc, chunk id) come back."""
    members = [(number, token) for number, phrase in enumerate(phrases) for token, _ in phrase]
    ranked = f"SELECT * FROM ({SERVER_BM25}) AS every_match ORDER BY score DESC, chunk_id LIMIT {int(limit or 0)}"
    rows = conn.execute(
        SERVER_BM25 if limit is None else ranked,
        (
            list(tokens),
            [token + "\U0010ffff" if prefix else None for token, prefix in tokens.items()],
            [number for number, _ in members],
            [token for _, token in members],
        ),
    )
    return dict(rows.fetchall())


def _postings(conn, tokens: dict[str, bool]) -> tuple[dict[str, dict[int, int]], dict[int, int]]:
    """(token -> {chunk id: occurrences in the body} for every visible chunk that has the token (in
    title or body: a title-only chunk has 0; a prefix token collects every lexeme starting with it),
    chunk id -> its length) from the postings."""
    exact = [token for token, prefix in tokens.items() if not prefix]
    ranges = [(token, token + "\U0010ffff") for token, prefix in tokens.items() if prefix]
    clause = " OR ".join(["lexeme = ANY(?)"] + ["(lexeme >= ? AND lexeme < ?)"] * len(ranges))
    rows = conn.execute(
        f"SELECT lexeme, chunk_id, body_tf, length FROM chunk_postings WHERE {clause}",
        (exact, *[bound for pair in ranges for bound in pair]),
    )
    counts: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    lengths: dict[int, int] = {}
    for lexeme, chunk_id, tf, length in rows:
        lengths[chunk_id] = length
        if lexeme in tokens:
            counts[lexeme][chunk_id] += tf
        for token, _ in ranges:
            if lexeme.startswith(token) and lexeme != token:
                counts[token][chunk_id] += tf
    return counts, lengths


def _score(lengths: dict[int, int], phrases: list, counts: dict, total: int, average: float) -> dict[int, float]:
    """FTS5's BM25 of the matching chunks: idf from the chunks holding each phrase (anywhere), term
    frequency from the body; a phrase of several words counts its rarest word."""
    scores = dict.fromkeys(lengths, 0.0)
    for phrase in phrases:
        holders = [counts.get(token, {}) for token, _ in phrase]
        if len(holders) == 1:
            frequencies = holders[0]
        else:
            shared = set.intersection(*(set(h) for h in holders))
            frequencies = {c: min(h[c] for h in holders) for c in shared}
        found = len(frequencies)
        # Each statement reads its own snapshot: a writer committing between the count and the
        # postings can leave `found` above `total` for a moment.
        idf = max(math.log((max(total, found) - found + 0.5) / (found + 0.5)), 1e-6)
        for chunk_id, tf in frequencies.items():
            if tf and chunk_id in scores:
                scores[chunk_id] += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths[chunk_id] / average))
    return scores
