"""The FTS5 index: what text is indexed, and how a user query becomes a safe MATCH expression.

Identifier spellings are folded together at index time: `F_1` is indexed as `f`, `1` and `f1`,
`parseConfig` as `parseconfig`, `parse` and `config`. A query's `f1`, `f_1` or `F_1` then finds it.
Query terms are reduced to word characters and each is double-quoted, so no user text is ever
parsed as FTS syntax (`"`, `*`, `AND`, `NEAR(`, `-`, `:` are plain characters to us).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Iterable

from crossmodalrag.retrieval.stopwords import STOPWORDS

LOWER_UPPER = re.compile(r"[a-z0-9][A-Z]")
CAMEL_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
WORD = re.compile(r"\w+")
# A question has tens of content words; a pasted document can have tens of thousands, which cost
# seconds per query (40,000 words: 9.5 s) and overflow SQLite builds limited to 999 bound variables.
MAX_QUERY_TERMS = 256


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
    """The text FTS5 indexes for a chunk: the chunk plus its identifier variants."""
    extra = identifier_variants(text)
    return f"{text}\n{' '.join(extra)}" if extra else text


def insert_rows(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, str]]) -> None:
    """Index (chunk_id, title, text) rows; deletion happens through the chunks trigger."""
    conn.executemany(
        "INSERT INTO chunks_fts (rowid, title, body) VALUES (?, ?, ?)",
        ((chunk_id, title, index_body(text)) for chunk_id, title, text in rows),
    )


@dataclass(frozen=True)
class QueryTerm:
    """One searchable word of a query: its surface form and the quoted FTS phrase for it."""

    word: str

    @property
    def phrase(self) -> str:
        return f'"{self.word}"'


def query_terms(query: str) -> list[QueryTerm]:
    """The distinct content words of a query, in order, at most MAX_QUERY_TERMS of them; stopwords
    and lone letters dropped."""
    words: list[str] = []
    for token in WORD.findall(query):
        # Lowercasing can add a non-word character: "İ" becomes "i" plus a combining dot.
        lowered = "".join(WORD.findall(token.lower()))
        candidates = [lowered.replace("_", "")] if "_" in lowered else [lowered]
        if LOWER_UPPER.search(token):
            candidates += [part.lower() for part in CAMEL_PARTS.findall(token)]
        for word in candidates:
            if word in STOPWORDS or (len(word) < 2 and not word.isdigit()) or word in words:
                continue
            words.append(word)
        if len(words) >= MAX_QUERY_TERMS:
            break
    return [QueryTerm(word) for word in words[:MAX_QUERY_TERMS]]


def match_expression(terms: list[QueryTerm], column: str | None = None) -> str:
    """An OR of quoted terms, optionally restricted to one column."""
    joined = " OR ".join(term.phrase for term in terms)
    return f"{column} : ({joined})" if column else joined


def analyze(conn: sqlite3.Connection, texts: list[str], only: set[str] | None = None) -> list[set[str]]:
    """The index tokens (stemmed, folded) of each text, produced by the index's own tokenizer;
    with `only`, just those of these tokens that each text contains.

    Runs in the connection's in-memory temp schema, so it takes no lock on the database, and in
    one savepoint, so FTS5 flushes once rather than once per text.
    """
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
    finally:
        conn.execute("RELEASE analyze")
    for term, doc in rows:
        tokens[doc].add(term)
    return tokens


def document_frequencies(conn: sqlite3.Connection, tokens: list[str]) -> tuple[int, dict[str, int]]:
    """(number of indexed chunks, chunks containing each token)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.index_terms USING fts5vocab(main, chunks_fts, row)")
    marks = ",".join("?" * len(tokens))
    frequencies = dict(conn.execute(f"SELECT term, doc FROM temp.index_terms WHERE term IN ({marks})", tokens))
    total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return total, frequencies
