"""Fuzz targets: input strategies and the property each input must satisfy.

Shared by the in-suite runs (tests/fuzz/test_properties.py, few examples) and the long run
(bench/fuzz.py, many). A check returns nothing and raises AssertionError (or whatever the code
under test let escape) when the property fails.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from crossmodalrag.chunking.markdown import (
    HEADING,
    MAX_HEADING_CHARS,
    chunk_markdown,
    heading_name,
    leading_date,
    sections,
    split_frontmatter,
)
from crossmodalrag.chunking.text import MAX_CHUNK_CHARS
from crossmodalrag.connectors import frontmatter, notes
from crossmodalrag.errors import CMRAGError, ConnectorError
from crossmodalrag.evals.queries import load_queries_file
from crossmodalrag.index import fts
from crossmodalrag.privacy import TAG, strip_private
from crossmodalrag.types import Document

SECRET = "Zq9PrivateMarkerWx"


def _bomb(levels: int = 9) -> str:
    """A "billion laughs" document: each level lists the previous one nine times."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


SURROGATES = st.sampled_from(["\ud800", "\udfff", "\udcff"])
# Pieces that make markdown, YAML and FTS parsers take their rarer paths.
MARKDOWN_PIECES = st.sampled_from(
    ["#", "# ", "## ", "###### ", "####### ", " ", "\t", "\n", "\r\n", "\r", "```", "~~~", "````", "`", "---\n",
     "...\n", "Date: 2024-01-02\n", "[[", "]]", "[[a|b]]", "#tag", "<private>", "</private>", "<PRIVATE>", "> ",
     "- ", "1. ", "|", "\\", "\x00", "\u2028", "\ufeff", "é", "中文", "word", "snake_case", "camelCase", ".", "!"]
)  # fmt: skip
MARKDOWN = st.lists(st.one_of(MARKDOWN_PIECES, st.text(max_size=8)), max_size=60).map("".join)
YAML_PIECES = st.sampled_from(
    ["key", "title", "tags", "date", "created", "on", "yes", "null", "~", ":", ": ", " ", "\n", "  ", "- ", "[", "]",
     "{", "}", ",", "'", '"', "&a ", "*a", "!!python/object:os.system", "!!binary ", "!!set ", "!!str ", "? ",
     "2024-02-30", "2024-01-01", "9999-12-31T23:59:59-12:00", "0001-01-01", "1e999", "-12", "0x1F", "|", ">", "#",
     "\\ud800", "%YAML 1.1\n", "---", "<private>", "</private>"]
)  # fmt: skip
SIMPLE_YAML = st.lists(
    st.tuples(
        st.sampled_from(["title", "tags", "date", "on", "off", "yes", "No", "null", "True", "n", "y", "key_1", "k-2"]),
        st.sampled_from(["word", "two words", "[a, b]", "[]", "2024-01-31", "2024-02-30", "yes", "a #b", "x:y", "~"]),
    ),
    max_size=5,
).map(lambda pairs: "\n".join(f"{key}: {value}" for key, value in pairs))
YAML = st.one_of(
    st.lists(st.one_of(YAML_PIECES, st.text(max_size=6)), max_size=40).map("".join),
    SIMPLE_YAML,
    st.sampled_from(["a: " + "[" * 50_000, "- " * 50_000 + "x", "a: &a [*a]", _bomb()]),
)
FTS_PIECES = st.sampled_from(
    ['"', "*", "AND", "OR", "NOT", "NEAR(", "NEAR/2", ")", "(", "-", ":", "^", "{", "}", "+", " ", "_", "title:",
     "body", "'", "\x00", "\\", "é", "ß", "ﬁ", "İ", "中文", "x" * 300]
)  # fmt: skip
QUERY = st.lists(st.one_of(FTS_PIECES, st.text(max_size=10), SURROGATES), max_size=40).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
QUERY_ITEMS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "query_text": st.one_of(st.text(max_size=20), SURROGATES, JSON_VALUES),
            "expected_source_uris": st.one_of(st.lists(st.one_of(st.text(max_size=10), SURROGATES)), JSON_VALUES),
        },
    ),
    max_size=4,
)
EVAL_FILE = st.one_of(
    st.binary(max_size=200),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    QUERY_ITEMS.map(lambda v: json.dumps(v).encode()),  # lone surrogates become "\ud800" escapes
    st.sampled_from(
        [b"[" * 100_000, b"\xef\xbb\xbf[]", b"[1" + b"0" * 5000 + b"]", b'[{"query_text": "\\ud800"}]', b"\xff\xfe[]"]
    ),
)
# The heading rule as one regex, before it was rewritten (it backtracks cubically on long lines).
OLD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")  # the old rule, indented as CommonMark allows


def check_markdown_chunks(text: str) -> None:
    """Chunks stay inside the text, in order, under the size limit, and cover every body character."""
    doc = Document(uri="/v/n.md", source_type="note", title="T", text=text, format="markdown", locator="n.md")
    chunks = chunk_markdown(doc)
    previous_end = 0
    for chunk in chunks:
        assert previous_end <= chunk.char_start < chunk.char_end <= len(text)
        body = text[chunk.char_start : chunk.char_end]
        assert chunk.text.endswith("\n" + body) and body.strip() == body
        assert len(body) <= MAX_CHUNK_CHARS
        assert len(chunk.text.split("\n", 1)[0]) <= 7 * (MAX_HEADING_CHARS + 3)  # title + six levels
        previous_end = chunk.char_end
    covered = [False] * len(text)
    for chunk in chunks:
        covered[chunk.char_start : chunk.char_end] = [True] * (chunk.char_end - chunk.char_start)
    _, body_start = leading_date(text, split_frontmatter(text)[1])
    for section in sections(text, body_start):
        for index in range(section.start, section.end):
            assert covered[index] or text[index].isspace(), f"character {index} of a section is in no chunk"


def check_heading_name(line: str) -> None:
    """The rewritten heading rule names a heading exactly as the old regex did (up to the clip)."""
    old = OLD_HEADING.match(line)
    new = HEADING.match(line)
    assert bool(old) == bool(new)
    if old and len(old.group(2)) <= MAX_HEADING_CHARS:
        assert heading_name(new.group(2)) == old.group(2)


def check_private_spans(prefix: str, middle: str, suffix: str) -> None:
    """A secret inside a span never survives; stripping leaves no tags and is idempotent."""
    if any(tag.group(1) for tag in TAG.finditer(middle)):
        return  # a closing tag in the middle would end the span before the secret: not a secret then
    text = f"{prefix}<private>{middle}{SECRET}{middle}</private>{suffix}"
    stripped = strip_private(text)
    assert SECRET not in stripped
    assert TAG.search(stripped) is None
    assert strip_private(stripped) == stripped
    assert stripped.count("\n") <= text.count("\n")  # lines are kept, never invented


def check_read_note(folder: Path, content: bytes) -> None:
    """A note file either parses (with a secret in a span gone from everything) or fails as ConnectorError."""
    path = folder / "fuzzed.md"
    path.write_bytes(content.replace(b"SECRET", f"<private>{SECRET}</private>".encode()))
    try:
        doc = notes.read_note(folder, path)
    except ConnectorError as error:
        assert "\n" not in str(error)
        return
    stored = json.dumps(doc.metadata, ensure_ascii=False) + doc.title + doc.text
    stored.encode("utf-8")  # SQLite must be able to store every string
    assert SECRET not in stored
    assert doc.timestamp is None or notes.FIRST_MOMENT <= doc.timestamp <= notes.LAST_MOMENT
    for chunk in chunk_markdown(doc):
        assert SECRET not in chunk.text + chunk.locator + json.dumps(chunk.metadata)


def check_frontmatter(raw: str) -> None:
    """Any frontmatter gives a small, storable dict, and the note fields built from it never raise."""
    meta = frontmatter.parse_frontmatter(raw)
    assert isinstance(meta, dict)
    json.dumps(notes._jsonable(meta), ensure_ascii=False).encode("utf-8")
    notes._tags(meta, raw)
    stamp = notes._timestamp(meta, None, 0.0)
    assert stamp is None or notes.FIRST_MOMENT <= stamp <= notes.LAST_MOMENT
    fast = frontmatter._simple(raw)
    if fast is not None:
        import yaml

        try:
            expected = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError):
            expected = None
        assert fast == (expected if isinstance(expected, dict) else {}), "the fast path disagrees with YAML"


def check_parse_date(value: Any) -> None:
    stamp = notes.parse_date(value)
    assert stamp is None or isinstance(stamp, float)


def fts_table() -> sqlite3.Connection:
    """An in-memory FTS5 table with the index's tokenizer and a few rows."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE chunks_fts USING fts5(title, body, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO chunks_fts (title, body) VALUES (?, ?)",
        [
            ("Parser", "the parser NEAR the cache AND more"),
            ("F_1", fts.index_body("parseConfig and F_1 with snake_case")),
        ],
    )
    return conn


def check_query(conn: sqlite3.Connection, query: str) -> None:
    """Any text gives quoted word terms, and their MATCH expression (whole table or title) runs."""
    terms = fts.query_terms(query)
    assert len(terms) <= fts.MAX_QUERY_TERMS
    for term in terms:
        # Letters, digits and the marks that combine with them: a vowel sign is part of a Hindi or Tibetan word.
        assert term.word and all(ch.isalnum() or ch == "_" or unicodedata.category(ch)[0] == "M" for ch in term.word)
        assert term.phrase in (f'"{term.word}"', f'"{term.word}" *')
        assert term.exact is None or (term.exact.isascii() and term.exact.isalpha())
    if terms:
        expression = fts.match_expression(terms, pairs=fts.query_pairs(query))
        conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (expression,)).fetchall()
        for mode in ("all", "phrase"):
            expression = fts.match_expression(terms, mode=mode) if mode == "all" else fts.phrase_expression(query)
            conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (expression,)).fetchall()
        conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (fts.match_expression(terms, "title"),)
        ).fetchall()
        fts.analyze(conn, [t.word for t in terms])


def check_eval_file(folder: Path, content: bytes) -> None:
    """Any file either loads into storable queries or fails as CMRAGError, never anything else."""
    path = folder / "queries.json"
    path.write_bytes(content)
    try:
        queries = load_queries_file(path)
    except CMRAGError as error:
        assert error.hint
        return
    for query in queries:
        assert query.query_text.strip()
        for text in (query.query_text, *query.expected_source_uris):
            text.encode("utf-8")
