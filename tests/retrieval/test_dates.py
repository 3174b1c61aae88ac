"""A query naming a day or a month with its year prefers evidence dated then (retrieval/dates.py)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.cli.render import explain_line
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.dates import DATE_FACTOR, named_spans
from tests.conftest import write_note

DAY = 86400.0


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    "query, spans",
    [
        ("What movie did Joanna watch on 1 May, 2022?", [(day("2022-04-30"), day("2022-05-09"))]),
        ("What did Maria start in December 2023?", [(day("2023-11-30"), day("2024-01-08"))]),
        ("What did the 2019 paper find?", []),  # a year is more often what a text is about than its date
        ("What did we decide last week?", []),  # relative: the episodic strategy resolves it on the memory's timeline
        ("Anything before March 2023?", []),  # open on one side
        ("Why did I change the parser?", []),
    ],
)
def test_named_spans_are_dated_days_and_months_with_the_week_after(query, spans):
    assert named_spans(query) == spans


def test_a_hit_dated_when_the_question_says_ranks_first_and_explains_why(store, settings, tmp_path):
    """Two notes alike in words: the one written the day after the date the question names (where
    "last night" tells of it) passes the better-matching, newer one."""
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "---\ndate: 2022-05-02\n---\n# Evening\n\nLast night I watched a movie, then slept.\n")
    write_note(vault, "b.md", "---\ndate: 2022-09-10\n---\n# Weekend\n\nI watched a movie.\n")
    ingest_notes(store, [vault])
    retriever = open_retriever(store, settings, 2, lexical_only=True)
    assert [h.title for h in retriever.search("Which movie did I watch?").hits] == ["Weekend", "Evening"]
    hits = retriever.search("Which movie did I watch on 1 May, 2022?").hits
    assert [h.title for h in hits] == ["Evening", "Weekend"]
    assert hits[0].components["date_factor"] == DATE_FACTOR and "date_factor" not in hits[1].components
    assert f"×{DATE_FACTOR:.2f} for the date the question names" in explain_line(
        hits[0], retriever.options.weights(False)
    )
