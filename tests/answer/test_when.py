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
        # another time named besides the one relative phrase: "yesterday" may be about something else
        (
            "Jonas: I started Portuguese yesterday because we're moving to Lisbon in September.",
            "2025-04-20",
            "20 April 2025",
        ),
        ("Jon: Yesterday I signed the lease; we open on 6 July.", "2023-06-20", "20 June 2023"),
        # a weekday or a vague word names no time of the calendar to compare (LoCoMo's own turns)
        ("Tim: On Friday I got great news! Next month I'm off to Ireland.", "2023-12-07", "January 2024"),
        ("Jon: Been hectic lately. Started hitting the gym last week.", "2023-06-20", "the week before 20 June 2023"),
    ],
)
def test_a_header_date_becomes_the_day_the_excerpt_speaks_of(said, day, expected):
    written = datetime.fromisoformat(day)
    assert dated_answer(f"{written.day} {written:%B %Y}", [turn(said, day)]) == expected


@pytest.mark.parametrize(
    "question, said, day, expected",
    [
        # no relative phrase, one other month: the time it names, not the day it was written
        (
            "When is Elin moving to Gothenburg?",
            "Mara: Dinner with Elin. She is moving to Gothenburg in February.",
            "2026-12-04",
            "February",
        ),
        # ... when the sentence naming it is about the question: the dinner was on the day written
        (
            "When did I have dinner with Elin?",
            "Mara: Dinner with Elin. She is moving to Gothenburg in February.",
            "2026-12-04",
            "4 December 2026",
        ),
        ("When was the budget approved?", "Mara: The 2027 budget was approved.", "2026-12-04", "4 December 2026"),
        ("When did I buy a camera?", "Mara: Bought a camera in March.", "2026-03-14", "14 March 2026"),  # its own
        (
            "When did the deadline move?",
            "Mara: The deadline moved from November to January.",
            "2026-08-20",
            "20 August 2026",
        ),  # two months: which one is a guess
    ],
)
def test_a_header_date_becomes_the_one_month_its_excerpt_names_about_the_question(question, said, day, expected):
    written = datetime.fromisoformat(day)
    assert dated_answer(f"{written.day} {written:%B %Y}", [turn(said, day)], question) == expected


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


def test_a_header_date_answer_keeps_the_models_doubt_when_the_message_names_another_time(store, settings, tmp_path):
    """mem ask "When is Jonas moving to Lisbon?" with qwen2.5-coder-1.5b: "Answer: 20 April 2025 [E1]"
    from "I started learning Portuguese yesterday because we're moving to Lisbon in September." was
    moved to 19 April 2025 (its "yesterday" is about the lessons), and the model's own "No excerpt
    directly states when ..." was left out as a hedge contradicting a passed answer."""
    lines = [("Joanna", "I started learning Portuguese yesterday because we're moving to Lisbon in September.")]
    lines.append(("Nate", "Wow, Lisbon! Exciting."))
    retriever = chat_retriever(store, settings, tmp_path, lines, day="1:00 pm on 20 April, 202{}")
    hedge = "No excerpt directly states when Joanna is moving to Lisbon."
    llm = ScriptedLLM(f"Answer: 20 April 2021 [E1]\n{hedge}", margins=[3.0, 3.0])
    answer = ask_with_llm(retriever, "When is Joanna moving to Lisbon?", settings, llm=llm)
    assert answer.short_answer == "20 April 2021" and answer.notices == []
    assert answer.text == f"Answer: 20 April 2021 [E1]\n{hedge}"


def test_a_header_date_answer_names_the_time_its_note_gives_instead(store, settings, tmp_path):
    """mem ask "When is my sister moving to Gothenburg?" answered "4 December 2026", the journal
    heading's date, while its own support said "in February": the doubt was flagged (its hedge kept)
    and the date still shown as the answer, in --json's short_answer too."""
    from crossmodalrag.answer.evidence import open_retriever
    from crossmodalrag.ingest import ingest_notes
    from tests.conftest import write_note

    write_note(
        tmp_path / "vault",
        "journal.md",
        "---\ndate: 2026-12-04\n---\n# Dinner\n\nDinner with my sister Elin. "
        "She is moving to Gothenburg in February.\n",
    )
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, lexical_only=True)
    support = "Elin is moving to Gothenburg in February [E1]."
    text = f"Answer: 4 December 2026 [E1]\n{support} No excerpt directly states when Elin is moving to Gothenburg."
    answer = ask_with_llm(retriever, "When is my sister moving to Gothenburg?", settings, llm=ScriptedLLM(text))
    assert answer.short_answer == "February" and answer.text == f"Answer: February [E1]\n{support}"
    assert answer.notices == ["date moved: the message it cites was written on 4 December 2026 and speaks of February"]
    # --json's claims record the model's sentence, and beside it the sentence as shown.
    short_claim = answer.to_dict()["verification"]["claims"][0]
    assert (
        short_claim["sentence"].startswith("Answer: 4 December 2026")
        and short_claim["shown_as"] == "Answer: February [E1]"
    )
