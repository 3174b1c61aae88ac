"""Which hedges an answer whose short answer passed leaves out (answer/hedges.py)."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.hedges import about_the_question, denies_what_is_there, names_the_answer, question_words


@pytest.mark.parametrize(
    "question, hedge",
    [
        # mem ask with qwen2.5-coder-1.5b: "uses" names "use" only by its stem
        ("Which database does Helios use?", "No excerpt directly states that Helios uses SQLite."),
        # two of the question's five words, and nothing missing but what it names
        ("How much did Jon Millar charge for the boiler?", "No excerpt directly states the charge for the boiler."),
        (
            '"Helios" AND pricing OR NEAR(cost, 5) -- what\'s the *team* plan price?',
            "No excerpt states the team plan price.",
        ),
        (
            "When did Caroline go to the support group?",
            "No excerpt directly states when Caroline went to the support group.",
        ),
    ],
)
def test_a_hedge_about_the_questions_own_subject_is_about_the_question(question, hedge):
    assert about_the_question(hedge, question)


@pytest.mark.parametrize(
    "question, hedge",
    [
        ("Why did I rewrite the tokenizer?", "The evidence does not say when I rewrote the tokenizer."),
        ("What happened in July 2025?", "The evidence does not cover the move-in date of the old flat in Eimsbüttel."),
        ("How much did Jon Millar charge for the boiler?", "No excerpt says whether the tap was fixed too."),
    ],
)
def test_a_hedge_about_another_part_is_not(question, hedge):
    assert not about_the_question(hedge, question)


def test_fts_operators_typed_into_a_question_are_none_of_its_words():
    assert question_words('"Helios" AND pricing OR NEAR(cost, 5) -- the team plan?') == {
        "helios",
        "pricing",
        "cost",
        "team",
        "plan",
    }
    assert "3" in question_words("Did the Helios outage last 3 hours?")


def test_a_hedge_naming_the_short_answer_denies_it():
    assert names_the_answer("No excerpt directly states that Helios uses PostgreSQL 16.", "PostgreSQL 16")
    assert not names_the_answer("No excerpt directly states that Helios uses SQLite.", "PostgreSQL 16")
    assert not names_the_answer("No excerpt says when Kestrel moved.", "No"), "a bare no names nothing"


MIGRATION = ["Alice Chen and Bob Ramirez migrated the Helios billing database to PostgreSQL 16 on 14 February 2025."]


@pytest.mark.parametrize(
    "hedge, false",
    [
        # mem ask with qwen2.5-coder-1.5b, after "Answer: Alice Chen ... on 14 February 2025 [E1]"
        ("No excerpt mentions Bob Ramirez or the timing of the migration.", True),
        ("The evidence mentions neither Bob Ramirez nor the cost.", True),
        ("No excerpt mentions the timing of the migration.", False),  # "timing" is not there
        ("The evidence does not say when Bob Ramirez left.", False),  # a kind of thing: no word shows it
        ("No excerpt states whether Bob Ramirez was paid.", False),
        ("No excerpt mentions Carol.", False),
    ],
)
def test_a_hedge_saying_the_excerpts_lack_what_they_name_is_false(hedge, false):
    assert denies_what_is_there(hedge, MIGRATION) is false
