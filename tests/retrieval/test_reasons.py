"""A why-question finds the reasons its best note gives in a section of their own (retrieval/reasons.py)."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.reasons import REASON_FACTOR, asks_why
from tests.conftest import write_note

DECISION = """# Parser decision

We moved the parser from regular expressions to a PEG grammar. Ana proposed the move in the review.

## Reasons
- The old approach could not handle nesting.
- Error messages pointed at the wrong line.
"""
OTHERS = {
    "benchmarks.md": "# Parser benchmarks\n\nThe PEG grammar parser runs at 40 MB/s after the move.\n",
    "grammar.md": "# Grammar notes\n\nWe moved the PEG grammar of the parser to its own file.\n",
    "tests.md": "# Parser tests\n\nWe moved the parser tests next to the grammar.\n",
}


@pytest.mark.parametrize(
    "question, why",
    [
        ("Why did we move the parser?", True),
        ("And why was that?", True),
        ("What were the reasons for the move?", True),
        ("Warum haben wir den Parser umgestellt?", True),
        ("Who moved the parser?", False),
        ("Explain why the parser moved", False),  # not a question that opens with why: left as it ranks
    ],
)
def test_a_why_question_is_told_by_its_first_word(question, why):
    assert asks_why(question) is why


def test_a_why_question_finds_the_reasons_section_of_its_best_note(store, settings, tmp_path):
    """The `## Reasons` section shares only the note's title with the question, and as the note's second
    chunk ranked at 0.8 of its score: below three other notes that say the parser moved."""
    write_note(tmp_path / "vault", "decision.md", DECISION)
    for name, text in OTHERS.items():
        write_note(tmp_path / "vault", name, text)
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 3, lexical_only=True)
    hits = retriever.search("Why did we move the parser from regular expressions to a PEG grammar?").hits
    assert hits[0].title == "Parser decision"
    reasons = [h for h in hits if h.locator.endswith("#Reasons")]
    assert reasons and reasons[0].components["reason_factor"] == REASON_FACTOR
    assert "repeat_factor" not in reasons[0].components
    # Asked what was done, the note's further section keeps its discount and stays out
    plain = retriever.search("Who moved the parser from regular expressions to a PEG grammar?").hits
    assert not [h for h in plain if h.locator.endswith("#Reasons")]


def test_explain_says_why_a_reasons_section_was_lifted(store, settings, tmp_path):
    from crossmodalrag.cli.render import explain_line

    write_note(tmp_path / "vault", "decision.md", DECISION)
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 3, lexical_only=True)
    hits = retriever.search("Why did we move the parser from regular expressions to a PEG grammar?").hits
    reasons = next(h for h in hits if h.locator.endswith("#Reasons"))
    assert "as the best note's section giving reasons" in explain_line(reasons, retriever.options.weights(False))
