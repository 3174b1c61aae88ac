"""The FTS5 index: what text is indexed, and how a user query becomes a safe MATCH expression.

Identifier spellings are folded together at index time: `F_1` is indexed as `f`, `1` and `f1`,
`parseConfig` as `parseconfig`, `parse` and `config`. A query's `f1`, `f_1` or `F_1` then finds it.
Query terms are reduced to word characters and each is double-quoted, so no user text is ever
parsed as FTS syntax (`"`, `*`, `AND`, `NEAR(`, `-`, `:` are plain characters to us).

Chinese, Japanese and Korean are indexed as character bigrams, Vietnamese words also as exact-form
and syllable pair tokens (see index/scripts.py), Spanish, German and Cyrillic words also as Snowball stem
tokens (index/stems.py), full-width Latin and half-width kana also in NFKC; FTS_VERSION names that
preparation, and a database indexed under another version is re-tokenized in place
(store/migrations.py).

Match modes: `any` (default) ORs the terms and lets BM25 rank; `all` requires every term (a CJK
word's every bigram); `phrase` requires the query's words in order, next to each other.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable

from crossmodalrag.chunking.markdown import inline_tags
from crossmodalrag.index.scripts import (
    CJK_RUN,
    MARKED_WORD,
    compatibility_forms,
    exact_token,
    exact_tokens,
    folded_form,
    folded_forms,
    is_cjk,
    lone_characters,
    segment_cjk,
    split_by_marks,
    syllable_pairs,
    vietnamese_pairs,
    whole_word_token,
    whole_word_tokens,
)
from crossmodalrag.index.stems import stem_token, stem_tokens
from crossmodalrag.retrieval.stopwords import BY_LANGUAGE, ENGLISH, guess_language

LOWER_UPPER = re.compile(r"[a-z0-9][A-Z]")
CAMEL_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
WORD = re.compile(r"\w+")
# A question has tens of content words; a pasted document can have tens of thousands, which cost
# seconds per query (40,000 words: 9.5 s) and overflow SQLite builds limited to 999 bound variables.
MAX_QUERY_TERMS = 256
# In a German query, words this long also match as prefixes: compounds and inflections. MLQA de
# nDCG@10 by minimum length: none 0.680, 5: 0.700, 6: 0.696, 7: 0.701, 8: 0.700 (docs/benchmarks.md).
# Not in English, where Porter already conflates forms and a prefix also matches identifier
# variants (`incremental*` in IncrementalDecoder), which cost a gold note its first place on the
# synthetic 10k vault.
PREFIX_MIN_LETTERS = 7
GERMAN_LETTERS = re.compile("[äöüßÄÖÜ]")
MATCH_MODES = ("any", "all", "phrase")
# 1: words only; 2: CJK bigrams, exact forms; 3: Vietnamese pairs, Spanish/German stems; 4: folded
# Greek, Cyrillic, Hebrew and Arabic words; 5: a CJK run's last character alone, Russian stems, NFKC
# forms of full-width and half-width words; 6: vocalised Arabic and Hebrew words folded whole, ß as ss,
# Thai and Lao as bigrams, Indic words with marks also whole; 7: text composed (NFC) before it is indexed
FTS_VERSION = 7


def _word_at(text: str, index: int) -> str:
    """The identifier (letters, digits, underscores) that contains position index."""
    start = end = index
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[start:end]


def _snake_words(text: str) -> set[str]:
    # A find() loop: a regex over every word of every chunk cost most of the ingest time.
    found, index = set(), text.find("_")
    while index != -1:
        word = _word_at(text, index)
        found.add(word)
        index = text.find("_", index + max(1, len(word)))
    return {w for w in found if len([part for part in w.split("_") if part]) > 1}


def identifier_variants(text: str) -> list[str]:
    """Extra spellings that make snake_case and camelCase findable by their plain forms."""
    extra = [word.replace("_", "") for word in sorted(_snake_words(text))] if "_" in text else []
    camel = {_word_at(text, m.start()) for m in LOWER_UPPER.finditer(text)}
    for word in sorted(camel):
        extra.extend(part for part in CAMEL_PARTS.findall(word) if part.lower() != word.lower())
    return extra


def index_body(text: str) -> str:
    """The text FTS5 indexes for a chunk: the chunk (CJK as bigrams) plus its identifier variants,
    and in Vietnamese the exact forms of its accented words and its syllable pairs, in Spanish and
    German its words' stem tokens, in Greek, Cyrillic, Hebrew and Arabic its words' folded forms,
    and the NFKC forms of full-width Latin and half-width kana (index/scripts.py). Composed (NFC) first,
    as queries are: in a note saved decomposed (macOS) `\\w` splits words at their marks, and a Vietnamese
    one lost its exact forms and pairs, so a question typed with accents covered none of it."""
    text = unicodedata.normalize("NFC", text)
    extra = (
        identifier_variants(text)
        + exact_tokens(text)
        + vietnamese_pairs(text)
        + stem_tokens(text)
        + folded_forms(text)
        + compatibility_forms(text)
        + whole_word_tokens(text)
    )
    body = segment_cjk(text, last_alone=True)
    return f"{body}\n{' '.join(extra)}" if extra else body


def index_title(title: str) -> str:
    """The text FTS5 indexes for a chunk's title: CJK as bigrams, marked words also folded,
    full-width and half-width words also in NFKC; composed (NFC), as the body is."""
    title = unicodedata.normalize("NFC", title)
    extra = folded_forms(title) + compatibility_forms(title) + whole_word_tokens(title)
    return segment_cjk(title, last_alone=True) + (f"\n{' '.join(extra)}" if extra else "")


def on_postgres(conn) -> bool:
    """Is this a PostgreSQL connection (store/postgres/), whose lexical index is a tsvector column?"""
    return getattr(conn, "backend", None) == "postgresql"


def insert_rows(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index (chunk_id, title, text) rows; deletion happens through the chunks trigger."""
    if on_postgres(conn):
        from crossmodalrag.store.postgres import lexical

        return lexical.insert_rows(conn, rows)
    conn.executemany(
        "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
        ((chunk_id, index_title(title), index_body(text)) for chunk_id, title, text in rows),
    )


def delete_rows(conn: sqlite3.Connection, chunk_ids: list[int]) -> None:
    """Drop the index rows of chunks that stay, before insert_rows indexes their new text."""
    if on_postgres(conn):
        from crossmodalrag.store.postgres import lexical

        return lexical.delete_rows(conn, chunk_ids)
    conn.executemany("DELETE FROM chunks_fts WHERE rowid = ?", [(chunk_id,) for chunk_id in chunk_ids])


def rebuild(conn: sqlite3.Connection, progress: "Callable[[int, int], None] | None" = None, batch: int = 2000) -> int:
    """Re-tokenize every stored chunk into chunks_fts, inside the caller's transaction; returns the
    number of chunks indexed. `progress(done, total)` is called after each batch."""
    total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    conn.execute("DELETE FROM chunks_fts")
    done, after = 0, 0
    while True:
        rows = conn.execute(
            "SELECT c.id, s.title, c.text FROM chunks c JOIN sources s ON s.id = c.source_id "
            "WHERE c.id > ? ORDER BY c.id LIMIT ?",
            (after, batch),
        ).fetchall()
        if not rows:
            break
        insert_rows(conn, [(row[0], row[1], row[2]) for row in rows])
        done, after = done + len(rows), rows[-1][0]
        if progress:
            progress(done, total)
    return done


def index_problem(path) -> str | None:
    """What is wrong with the text index of the database at `path`, or None: chunks it lacks (a
    chunk missing there is never found by words) or index pages that do not match their content
    (FTS5's own integrity check). Read-only, though FTS5 runs its check as an INSERT: a file that
    cannot be written gets `unindexed_problem` alone."""
    conn = sqlite3.connect(path, timeout=2.0)
    try:
        if problem := unindexed_problem(conn):
            return problem
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        return None
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            return None  # another mem process is writing: not checked now
        return f"the text index is damaged ({error})"
    except sqlite3.DatabaseError as error:
        return f"the text index is damaged ({error})"
    finally:
        conn.rollback()
        conn.close()


def unindexed_problem(conn: sqlite3.Connection) -> str | None:
    """How many chunks the text index lacks, if any: a check that reads only (a read-only file allows it).
    Raises sqlite3.DatabaseError if the index cannot be read."""
    missing = conn.execute(
        "SELECT COUNT(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunks_fts f WHERE f.rowid = c.id)"
    ).fetchone()[0]
    return f"{missing:,} chunks are missing from the text index (words never find them)" if missing else None


def recreate(conn: sqlite3.Connection, progress: "Callable[[int, int], None] | None" = None) -> int:
    """Drop chunks_fts and build it again from the stored chunks (inside the caller's transaction):
    what a damaged index needs, where `rebuild`'s DELETE would read the damaged pages."""
    (definition,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'").fetchone()
    conn.execute("DROP TABLE chunks_fts")
    conn.execute(definition)
    return rebuild(conn, progress)


@dataclass(frozen=True)
class QueryTerm:
    """One searchable word of a query (a CJK bigram counts as a word): its surface form, whether it
    also matches as a prefix, the exact-form token of an accented word, the word's stem token and
    its folded form (index/scripts.py)."""

    word: str
    prefix: bool = False
    exact: str | None = None
    stem: str | None = None
    folded: str | None = None

    @property
    def alternatives(self) -> tuple[str, ...]:
        """Index tokens that also match the term (each counts again for a chunk that has it)."""
        return tuple(token for token in (self.exact, self.stem, self.folded) if token)

    @property
    def phrase(self) -> str:
        return f'"{self.word}"' + (" *" if self.prefix else "")

    @property
    def is_cjk(self) -> bool:
        return is_cjk(self.word)


def _candidates(token: str) -> list[str]:
    """The lowercase searchable spellings of one query token (identifier parts too)."""
    # Lowercasing can add a combining mark no note's token has: "İ" becomes "i" plus a dot above.
    lowered = "".join(MARKED_WORD.findall(token.lower().replace("i\u0307", "i")))
    if split_by_marks(lowered):
        # FTS5 splits a vocalised Arabic or Hebrew word at each mark: the index holds it whole folded.
        lowered = folded_form(lowered) or lowered
    # A word with ß is read with ss, which every note holds for it (index/scripts.py folded_forms):
    # asking for both counted a ß word twice, which cost MLQA de 0.003 nDCG@10.
    lowered = lowered.replace("ß", "ss")
    candidates = [lowered.replace("_", "")] if "_" in lowered else [lowered]
    if LOWER_UPPER.search(token):
        candidates += [part.lower() for part in CAMEL_PARTS.findall(token)]
    return candidates


def composed_query(query: str) -> str:
    """The query composed (NFC): text pasted from a macOS file name is decomposed (`a` and a
    combining diaeresis), where `\\w` splits "Geschäftsreise" into "Gescha" and "ftsreise", which no
    note holds (a note's text is composed before it is indexed: index_body)."""
    return unicodedata.normalize("NFC", query)


def compatible_query(query: str) -> str:
    """The query in NFKC, which also composes it: full-width Latin and half-width kana then find
    their usual spelling, which every note is also indexed in (index/scripts.py)."""
    return unicodedata.normalize("NFKC", query)


def query_terms(query: str) -> list[QueryTerm]:
    """The distinct content words of a query, in order, at most MAX_QUERY_TERMS of them; the
    function words of the query's language and lone Latin letters dropped, CJK as bigrams, long
    German words also as prefixes."""
    query = compatible_query(query)
    # One-character Han words (猫 of 猫在哪里) join the run's bigrams, matched as prefixes (below).
    # Words with their marks: WORD alone would cut दिल्ली or a vocalised الطَّالِبُ into letters.
    tokens = MARKED_WORD.findall(segment_cjk(query)) + lone_characters(query)
    # A `#tag`'s words are the tag's, whatever they mean in a language: `#über` was a German function
    # word, dropped, and made the query look German.
    tagged = {word for tag in inline_tags(query) for word in MARKED_WORD.findall(tag.lower())}
    language = guess_language([t.lower() for t in tokens if t.lower() not in tagged])
    stopwords = BY_LANGUAGE[language] - tagged
    compounding = language == "de" or bool(GERMAN_LETTERS.search(query))
    terms: dict[str, QueryTerm] = {}
    for token in tokens:
        for word in _candidates(token):
            cjk = is_cjk(word)
            if word in terms or (not cjk and (word in stopwords or (len(word) < 2 and not word.isdigit()))):
                continue
            # A lone CJK character (a one-character run) is found inside the bigrams that start with it.
            prefix = len(word) == 1 if cjk else compounding and word.isalpha() and len(word) >= PREFIX_MIN_LETTERS
            # Exact forms exist only in Vietnamese notes, stems only in Spanish, German and Cyrillic ones.
            # An Indic word is whole in the index only as its whole-word token (index/scripts.py).
            exact = None if cjk else exact_token(word) or whole_word_token(word)
            stem = None if cjk else stem_token(word, language)
            terms[word] = QueryTerm(word, prefix, exact, stem, None if cjk else folded_form(word))
        if len(terms) >= MAX_QUERY_TERMS:
            break
    return list(terms.values())[:MAX_QUERY_TERMS]


def search_terms(conn: sqlite3.Connection, query: str) -> list[QueryTerm]:
    """The query's terms as a search over this memory matches them (`query_terms`, then
    `unmatched_word_as_prefix`)."""
    return unmatched_word_as_prefix(conn, query_terms(query))


def unmatched_word_as_prefix(conn: sqlite3.Connection, terms: list[QueryTerm]) -> list[QueryTerm]:
    """The terms, where a query of one long word that no chunk holds as it is (nor its stem or folded
    form) also matches that word as a prefix: a bare German noun (`Heizung`) has no function words
    to say German, and the note may hold it only inside a compound (Heizungsanlage). A word that
    some chunk holds keeps matching exactly, so an English identifier query finds what it did."""
    if len(terms) != 1 or terms[0].prefix or not _may_be_prefix(terms[0].word):
        return terms
    term = terms[0]
    tokens = sorted(set().union(*analyze(conn, [term.word, *term.alternatives])))
    if not tokens or any(document_frequencies(conn, tokens)[1].values()):
        return terms
    return [QueryTerm(term.word, True, term.exact, term.stem, term.folded)]


def _may_be_prefix(word: str) -> bool:
    return word.isalpha() and len(word) >= PREFIX_MIN_LETTERS and not is_cjk(word)


def query_pairs(query: str) -> list[str]:
    """The syllable pair tokens (index/scripts.py) of a query that looks Vietnamese or has no
    function words to tell (`quy trinh ban giao` typed without accents), distinct."""
    query = compatible_query(query)
    words = WORD.findall(query.lower())
    language = guess_language(words)
    if language != "vi" and not (language == "en" and ENGLISH.isdisjoint(words)):
        return []
    return list(dict.fromkeys(syllable_pairs(query)))[:MAX_QUERY_TERMS]


def match_expression(
    terms: list[QueryTerm], column: str | None = None, mode: str = "any", pairs: list[str] | None = None
) -> str:
    """The MATCH expression for `any` or `all` of the terms, optionally restricted to one column.
    A term's alternatives (exact form, stem) rank the exact spelling first; in mode `any`, syllable
    `pairs` add to the score of a chunk where the query's words stand together."""
    alternatives = [" OR ".join([term.phrase, *(f'"{token}"' for token in term.alternatives)]) for term in terms]
    if mode == "all":
        joined = " AND ".join(f"({alt})" if " OR " in alt else alt for alt in alternatives)
    else:
        joined = " OR ".join(alternatives + [f'"{pair}"' for pair in pairs or ()])
    return f"{column} : ({joined})" if column else joined


def phrase_expression(query: str) -> str | None:
    """The query's words (CJK as bigrams) as one FTS5 phrase: they must occur in order, adjacent.
    Only word characters reach the expression. None when the query has no words."""
    # As typed and in NFKC: a note's full-width words stand in its text in order, their NFKC forms only
    # beside it, so `ＰｏｓｔｇｒｅＳＱＬ に` is a phrase there only as typed.
    return " OR ".join('"' + " ".join(words) + '"' for words in phrase_forms(query)) or None


def phrase_forms(query: str) -> list[list[str]]:
    """The words of each distinct form of a phrase query (as typed, and in NFKC), those with any."""
    forms = {tuple(words): None for form in (composed_query, compatible_query) if (words := _phrase(form(query)))}
    return [list(words) for words in forms]


def _phrase(query: str) -> list[str]:
    # Indexed, a CJK run's last character follows its bigrams as a token of its own (segment_cjk's
    # last_alone): a run the phrase goes on after is read the same way, or `データベースを ＰｏｓｔｇｒｅＳＱＬ`
    # never stands adjacent in the index. Not the phrase's final run: in a note it may go on (解析器重写).
    words = [w.lower() for w in WORD.findall(segment_cjk(query, last_alone=True).replace("_", " "))]
    runs = list(CJK_RUN.finditer(query))
    if words and runs and len(runs[-1].group(0)) > 1 and not WORD.search(query, runs[-1].end()):
        # the final run's lone last character (none when the run is of characters this Python's
        # Unicode tables do not know as letters yet: CJK Extension I, U+2EBE0-)
        words.pop()
    return words


def analyze(
    conn: sqlite3.Connection, texts: list[str], only: set[str] | None = None, prefixes: set[str] | None = None
) -> list[set[str]]:
    """The index tokens (stemmed, folded) of each text, produced by the index's own tokenizer;
    with `only`, just those of these tokens that each text contains, and those that start with one
    of `prefixes` (reading back only what is asked is what keeps the abstention gate cheap).

    Runs in the connection's in-memory temp schema, so it takes no lock on the database, and in
    one savepoint, so FTS5 flushes once rather than once per text. On PostgreSQL the same tokenizer
    runs in an in-memory SQLite database.
    """
    if on_postgres(conn):
        from crossmodalrag.store.postgres.lexical import analyzer

        conn = analyzer()
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.analyzer USING fts5(body, content = '', tokenize = "
        "'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.analyzer_tokens USING fts5vocab(temp, analyzer, instance)")
    tokens: list[set[str]] = [set() for _ in texts]
    if only is not None and not only:
        return tokens
    conn.execute("SAVEPOINT analyze")
    try:
        conn.execute("INSERT INTO temp.analyzer (analyzer) VALUES ('delete-all')")
        conn.executemany("INSERT INTO temp.analyzer (rowid, body) VALUES (?, ?)", enumerate(texts))
        if only is None:
            rows = conn.execute("SELECT term, doc FROM temp.analyzer_tokens").fetchall()
        else:
            wanted = sorted(only)
            rows = conn.execute(
                f"SELECT term, doc FROM temp.analyzer_tokens WHERE term IN ({','.join('?' * len(wanted))})", wanted
            ).fetchall()
            for prefix in sorted(prefixes or ()):
                rows += conn.execute(
                    "SELECT term, doc FROM temp.analyzer_tokens WHERE term >= ? AND term < ?",
                    (prefix, prefix + "\U0010ffff"),
                ).fetchall()
    finally:
        conn.execute("RELEASE analyze")
    for term, doc in rows:
        tokens[doc].add(term)
    return tokens


def has_prefix(conn: sqlite3.Connection, prefix: str) -> bool:
    """Whether some indexed token starts with `prefix` (an index token, folded)."""
    if on_postgres(conn):
        from crossmodalrag.store.postgres import lexical

        return lexical.has_prefix(conn, prefix)
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.index_terms USING fts5vocab(main, chunks_fts, row)")
    found = conn.execute(
        "SELECT 1 FROM temp.index_terms WHERE term >= ? AND term < ? LIMIT 1", (prefix, prefix + "\U0010ffff")
    )
    return found.fetchone() is not None


def document_frequencies(conn: sqlite3.Connection, tokens: list[str]) -> tuple[int, dict[str, int]]:
    """(number of indexed chunks, chunks containing each token)."""
    if on_postgres(conn):
        from crossmodalrag.store.postgres import lexical

        return lexical.document_frequencies(conn, tokens)
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.index_terms USING fts5vocab(main, chunks_fts, row)")
    marks = ",".join("?" * len(tokens))
    frequencies = dict(conn.execute(f"SELECT term, doc FROM temp.index_terms WHERE term IN ({marks})", tokens))
    total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return total, frequencies
