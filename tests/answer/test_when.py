"""A date answer copied from an excerpt's header, moved to the day the excerpt speaks of."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from crossmodalrag.answer.parts import short_answer
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.answer.when import dated_answer
from crossmodalrag.types import Evidence, Hit
from tests.answer.test_verify import chat_retriever
from tests.fakes import ScriptedLLM


def turn(text: str, day: str = "2023-05-08", ident: str = "E1") -> Evidence:
    moment = datetime.fromisoformat(day).replace(hour=13, tzinfo=timezone.utc).timestamp()
    hit = Hit(1, "/chat.json", "conversation", "text", "session 1", "D1:3", f"session 1 · D1:3\n{text}", moment)
    return Evidence(ident, hit)


@pytest.mark.parametrize(
    "said, day, expected",
    [
        ("Caroline: I went to a LGBTQ support group yesterday.", "2023-05-08", "7 May 2023"),
        ("Caroline: I painted a self-portrait last week.", "2023-08-23", "the week before 23 August 2023"),
        ("Melanie: Last Friday we went to a pottery workshop!", "2023-07-15", "the Friday before 15 July 2023"),
        ("Joanna: I first watched it around 3 years ago.", "2022-01-21", "2019"),
        ("Maria: I started there about a year ago.", "2023-08-03", "2022"),
        ("Nate: Last month I won my first tournament.", "2022-01-10", "December 2021"),
        ("Jon: We opened two weeks ago.", "2023-06-20", "2 weeks before 20 June 2023"),
        ("Jon: The official opening night is tomorrow!", "2023-07-20", "21 July 2023"),
        ("Tim: I'm off to Ireland next month.", "2023-12-07", "January 2024"),
        ("Tim: We meet next week.", "2023-12-07", "the week after 7 December 2023"),
        ("Jon: We opened the studio today.", "2023-06-20", "20 June 2023"),  # the day itself
        ("Jon: Today I signed; yesterday I danced.", "2023-06-20", "20 June 2023"),  # two times: unchanged
        ("Jon: The studio is doing well.", "2023-06-20", "20 June 2023"),  # no time said: unchanged
    ],
)
def test_a_header_date_becomes_the_day_the_excerpt_speaks_of(said, day, expected):
    written = datetime.fromisoformat(day)
    assert dated_answer(f"{written.day} {written:%B %Y}", [turn(said, day)]) == expected


def test_only_a_date_the_answer_copied_from_a_cited_excerpt_moves():
    evidence = [turn("Caroline: I went yesterday.", "2023-05-08"), turn("Mel: Nice!", "2023-06-01", "E2")]
    assert dated_answer("On 9 May 2023", evidence) == "On 9 May 2023"
    assert dated_answer("18 May 2023", evidence) == "18 May 2023"
    assert short_answer("Answer: 8 May 2023 [E1]", "When did Caroline go?", evidence) == "7 May 2023"
    assert short_answer("Answer: 8 May 2023 [E2]", "When did Caroline go?", evidence) == "8 May 2023"


def test_the_answer_shown_and_its_short_answer_name_the_day_the_cited_turn_speaks_of(store, settings, tmp_path):
    """The text a user reads said the message's own date while the JSON short answer said the right one."""
    lines = [("Joanna", "I shared my book with my writers group last week!"), ("Nate", "Wow, how did it go?")]
    retriever = chat_retriever(store, settings, tmp_path, lines, day="1:00 pm on 22 August, 202{}")
    llm = ScriptedLLM("Answer: 22 August 2021 [E1]\nShe shared it on 22 August 2021 [E1].", margins=[3.0, 3.0, 3.0])
    answer = ask_with_llm(retriever, "When did Joanna share her book with her writers group?", settings, llm=llm)
    assert not answer.abstained and answer.to_dict()["short_answer"] == "the week before 22 August 2021"
    assert answer.text.startswith("Answer: the week before 22 August 2021 [E1]")
    assert answer.text.endswith("She shared it on 22 August 2021 [E1].")  # only the short answer's date moves
    assert answer.notices == [
        "date moved: the message it cites was written on 22 August 2021 and speaks of the week before 22 August 2021"
    ]
