"""Figures an answer states that its evidence neither states nor yields by one step of arithmetic."""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.answer.numbers import made_up_numbers
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.config import Settings
from crossmodalrag.types import Evidence, Hit
from tests.answer.test_verify import notes_retriever
from tests.fakes import ScriptedLLM

FILING = (
    "Effective May 26, 2023, PepsiCo terminated the $3,800,000,000 five year unsecured revolving credit agreement. "
    "On May 26, 2023, PepsiCo entered into a new $4,200,000,000 five year unsecured revolving credit agreement. "
    "PepsiCo may also increase the commitments to up to $4,950,000,000 in U.S. Dollars and/or Euros."
)
QUESTION = "By how much did Pepsico increase its five year revolving credit agreement on May 26, 2023?"


def excerpt(text: str, number: int = 1) -> Evidence:
    return Evidence(f"E{number}", Hit(number, "/8k.pdf", "pdf", "text", "Form 8-K", "p.2", f"crumb\n{text}", 1.7e9))


def test_a_figure_the_evidence_never_states_nor_yields_is_made_up() -> None:
    """ "1,050,000,000" was answered from excerpts holding 3,800,000,000 and 4,950,000,000, and passed."""
    assert made_up_numbers("1,050,000,000 [E1]", QUESTION, [excerpt(FILING)]) == ["1,050,000,000"]
    assert made_up_numbers("about 1.05 billion", QUESTION, [excerpt(FILING)]) == ["1.05 billion"]


def test_a_figure_stated_in_any_writing_or_one_step_of_arithmetic_away_is_not() -> None:
    evidence = [excerpt(FILING), excerpt("| Revenue (in millions) | 1,050 | 980 |", 2)]
    for claim in ("$400,000,000", "400 million", "$4.2 billion", "$4,200 million", "10.5%", "1,050,000,000"):
        assert made_up_numbers(claim, QUESTION, evidence) == [], claim
    assert made_up_numbers("Die Kosten betrugen 3,20 Euro.", "?", [excerpt("Espresso: 3.20 EUR")]) == []


def test_counts_days_and_years_are_never_made_up() -> None:
    """ "How many times …?" is answered by counting, and a date from "last year" by subtracting."""
    for claim in ("3 times", "on 22 August 2022", "in 2019", "2024-11-04"):
        assert made_up_numbers(claim, QUESTION, [excerpt(FILING)]) == [], claim


def test_a_short_answer_with_a_made_up_figure_is_withheld_however_the_judge_leans(
    store, settings: Settings, tmp_path: Path
) -> None:
    notes = {"credit.md": f"---\ndate: 2023-05-30\n---\n# Credit agreement\n\n{FILING}\n"}
    retriever = notes_retriever(store, settings, tmp_path / "vault", notes)
    made_up = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("Answer: 1,050,000,000 [E1]"))
    assert made_up.abstained and made_up.abstention_reason == "unsupported"
    assert made_up.verification["claims"][0]["reason"] == "made_up_number" and "1,050,000,000" in made_up.text
    answered = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("Answer: $400,000,000 [E1]"))
    assert not answered.abstained and answered.text == "Answer: $400,000,000 [E1]"
