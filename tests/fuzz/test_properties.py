"""Property-based fuzzing of the parsers that read user files and user text (few examples here; the
long run is `python bench/fuzz.py`)."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import properties as p

# Modest in the suite: every target together stays within a few seconds per hundred examples.
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LINE = st.builds(
    lambda hashes, rest: "#" * hashes + rest,
    st.integers(0, 8),
    st.text(alphabet=" \t#ab\r", max_size=30) | st.text(max_size=10).filter(lambda t: "\n" not in t),
)
NOTE_BYTES = st.one_of(
    st.binary(max_size=200),
    st.lists(st.one_of(p.MARKDOWN, st.just("SECRET"), p.YAML.map(lambda y: f"---\n{y}\n---\n")), max_size=4).map(
        lambda parts: "".join(parts).encode("utf-8", "surrogatepass")
    ),
)


@pytest.fixture(scope="module")
def fts_table() -> sqlite3.Connection:
    return p.fts_table()


@FEW
@given(p.MARKDOWN)
def test_markdown_chunks_stay_in_bounds_and_cover_the_body(text: str) -> None:
    p.check_markdown_chunks(text)


@FEW
@given(LINE)
def test_headings_are_named_as_before_the_rewrite(line: str) -> None:
    p.check_heading_name(line)


@FEW
@given(p.MARKDOWN, p.MARKDOWN, p.MARKDOWN)
def test_private_spans_never_survive(prefix: str, middle: str, suffix: str) -> None:
    p.check_private_spans(prefix, middle, suffix)


@FEW
@given(NOTE_BYTES)
def test_any_note_file_parses_or_fails_cleanly(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        p.check_read_note(Path(folder), content)


@FEW
@given(p.YAML)
def test_any_frontmatter_gives_a_small_storable_dict(raw: str) -> None:
    p.check_frontmatter(raw)


@FEW
@given(st.one_of(st.text(max_size=40), st.datetimes(), st.dates(), st.integers(), st.floats(), st.none(), p.SURROGATES))
def test_any_date_value_parses_or_is_none(value) -> None:
    p.check_parse_date(value)


@settings(FEW, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(p.QUERY)
def test_any_query_is_a_valid_match_expression(fts_table, query: str) -> None:
    p.check_query(fts_table, query)


@FEW
@given(p.EVAL_FILE)
def test_any_eval_file_loads_or_fails_as_cmrag_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        p.check_eval_file(Path(folder), content)
