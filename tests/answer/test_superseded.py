"""Questions about now: a sentence stating a figure that an older note states and the newest note
on the subject changes is judged against the newest note alone (answer/superseded.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.answer.parts import split_answer
from crossmodalrag.answer.superseded import newest_on_its_figures
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_notes
from tests.conftest import write_note
from tests.fakes import ScriptedLLM

QUESTION = "What is the current password rotation policy?"
OLD = (
    "---\ndate: 2026-04-02\n---\n# Password policy\n\nThe new company password policy:\n"
    "- Passwords must be at least 12 characters.\n- Passwords must be rotated every 90 days.\n"
)
NEW = (
    "---\ndate: 2026-09-15\n---\n# Password policy update\n\nThe password policy changed:\n"
    "- Forced rotation every 90 days is dropped: passwords change only after a suspected compromise.\n"
    "- Minimum length goes up from 12 to 14 characters.\n"
)


@pytest.fixture
def retriever(store, settings: Settings, tmp_path: Path):
    write_note(tmp_path / "vault", "old.md", OLD)
    write_note(tmp_path / "vault", "new.md", NEW)
    ingest_notes(store, [tmp_path / "vault"])
    return open_retriever(store, settings, lexical_only=True)


def ids(retriever, settings) -> tuple[str, str]:
    evidence = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("INSUFFICIENT_EVIDENCE")).evidence
    titles = {item.hit.title: item.id for item in evidence}
    return titles["Password policy update"], titles["Password policy"]


def test_the_newest_note_stating_a_figure_an_older_note_states_is_found(retriever, settings):
    evidence = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("INSUFFICIENT_EVIDENCE")).evidence
    newer, _ = ids(retriever, settings)
    found = newest_on_its_figures("Passwords are rotated every 90 days", QUESTION, evidence)
    assert found is not None and found.id == newer
    assert newest_on_its_figures("At least 14 characters", QUESTION, evidence) is None  # the newer note's alone
    assert newest_on_its_figures("Passwords are rotated every 90 days", "What was the policy?", evidence) is None


def test_a_current_answer_the_newer_cited_note_leans_against_is_withheld(retriever, settings):
    """The model answered the dropped rule citing the note that drops it; the judge leaned no (-0.15),
    within the claims' tolerance of -1.0: it passed."""
    newer, _ = ids(retriever, settings)
    llm = ScriptedLLM(f"Answer: every 90 days, with at least 14 characters [{newer}]", margins=[2.0, -0.15])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "unsupported"
    assert answer.text.startswith("No answer: the language model's short answer (\"every 90 days, with at least 14")
    (claim,) = answer.verification["claims"]
    assert claim["reason"] == "superseded" and claim["judged"] == [newer] and len(llm.judged) == 2  # no new check


def test_a_current_answer_carried_by_the_older_note_is_judged_against_the_newer_alone(retriever, settings):
    newer, older = ids(retriever, settings)
    llm = ScriptedLLM(f"Answer: every 90 days [{older}]", margins=[2.0, 1.0, -0.4])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.abstained and answer.verification["claims"][0]["reason"] == "superseded"
    assert answer.verification["claims"][0]["judged"] == [newer] and len(llm.judged) == 3
    # The newer note leaning yes, the sentence passes and cites it.
    llm = ScriptedLLM(f"Answer: rotation every 90 days is dropped [{older}]", margins=[2.0, 1.0, 0.6])
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert not answer.abstained and answer.text == f"Answer: rotation every 90 days is dropped [{newer}]"


def test_a_sentence_of_nothing_but_an_excerpt_label_is_no_claim(retriever, settings):
    """ "- E2 [E2]" after the answer was judged as a claim, passed against E2, and shown as supported."""
    newer, older = ids(retriever, settings)
    llm = ScriptedLLM(f"Answer: at least 14 characters. [{newer}] - {older} [{older}]")
    answer = ask_with_llm(retriever, "What is the minimum password length?", settings, llm=llm)
    assert answer.text == f"Answer: at least 14 characters. [{newer}][{older}]"
    assert len(answer.verification["claims"]) == 1
    text = "Answer: at least 14 characters and rotated every 90 days. [E1][E2] - E2 [E2]"
    assert split_answer(text) == [("Answer: at least 14 characters and rotated every 90 days. [E1][E2] [E2]", True)]
    assert split_answer("Answer: X [E1]\n- E2 [E2]\nE3 holds it. [E3]") == [
        ("Answer: X [E1] [E2]", True),
        ("E3 holds it. [E3]", False),
    ]
