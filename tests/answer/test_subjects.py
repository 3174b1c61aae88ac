"""Whom a question names, and whether cited evidence mentions them."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.subjects import mentions_any, named_subjects
from crossmodalrag.types import Evidence, Hit


def excerpt(text: str, title: str = "chat") -> Evidence:
    hit = Hit(1, "note:x", "note", "text", title, "", text, None)
    return Evidence(id="E1", hit=hit)


@pytest.mark.parametrize(
    "question, names",
    [
        ("What did Caroline realize after her charity race?", ["caroline"]),
        ("What are Melanie's plans for the summer?", ["melanie"]),
        ("Did Caroline and Melanie meet in May?", ["caroline", "melanie"]),
        ("Caroline went where?", []),  # the first word of a sentence is not taken for a name
        ("Why did I rewrite the tokenizer? Because BM25 was slow?", []),  # acronyms are not names
        ("What did I do on Friday?", []),
        ("Wann hat Caroline die Gruppe besucht?", []),  # German capitalises every noun
    ],
)
def test_named_subjects(question, names):
    assert named_subjects(question) == names


def test_mentions_any_reads_title_and_text_as_word_starts_without_accents():
    assert mentions_any([excerpt("Melanie: I ran a charity race")], ["melanie"])
    assert mentions_any([excerpt("I said it", title="Zoë 1:1")], ["zoe"])
    assert mentions_any([excerpt("That is Caroline's idea")], ["caroline"])
    assert not mentions_any([excerpt("Melanie: I ran a charity race")], ["caroline"])


def test_a_name_only_spoken_to_is_the_listener_not_the_subject():
    assert not mentions_any([excerpt("Melanie: Thanks, Caroline! I realized self-care matters.")], ["caroline"])
    assert not mentions_any([excerpt("Caroline: Hey Melanie, this necklace is from my grandma.")], ["melanie"])
    assert mentions_any([excerpt("Caroline: Melanie's kids loved the museum.")], ["melanie"])
