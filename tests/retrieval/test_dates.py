"""A query naming a day or a month with its year prefers evidence dated then (retrieval/dates.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from crossmodalrag.agent.recall import with_recall
from crossmodalrag.agent.temporal import time_ranges
from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.cli.render import explain_line
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.dates import DATE_FACTOR, asked_window, named_spans
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


@pytest.mark.parametrize(
    "query, after, before, window",
    [
        ("What did I do in August 2024?", None, None, (day("2024-07-31"), day("2024-09-02"))),
        ("What happened on 2024-04-21?", None, None, (day("2024-04-20"), day("2024-04-23"))),
        ("What did I write on 2024-04-21?", None, None, (day("2024-04-20"), day("2024-04-23"))),
        ("August 2024", None, None, (day("2024-07-31"), day("2024-09-02"))),
        ("What was going on in September 2024?", day("2024-09-10"), None, (day("2024-09-10"), day("2024-10-02"))),
        ("What did I do?", day("2024-08-01"), day("2024-09-01"), (day("2024-08-01"), day("2024-09-01"))),
        ("What did I do?", None, None, None),  # no window
        ("What did I cook in August 2024?", None, None, None),  # a topic: the gate judges its words as ever
        ("What happened at work in August 2024?", None, None, None),
        ("What did I do in 2024?", None, None, None),  # a year is not a named span (see named_spans)
        ("What did I cook?", day("2024-08-01"), day("2024-09-01"), None),
        # Asked in another language, with the bounds given or a month it names with its year
        ("Was habe ich gemacht?", day("2024-03-01"), day("2024-04-01"), (day("2024-03-01"), day("2024-04-01"))),
        ("¿Qué hice?", day("2024-03-01"), day("2024-04-01"), (day("2024-03-01"), day("2024-04-01"))),
        ("我做了什么？", day("2024-03-01"), day("2024-04-01"), (day("2024-03-01"), day("2024-04-01"))),
        ("Was habe ich im März 2024 gemacht?", None, None, (day("2024-02-29"), day("2024-04-02"))),
        ("2024年3月我做了什么？", None, None, (day("2024-02-29"), day("2024-04-02"))),
        ("2024年3月5日に何をした？", None, None, (day("2024-03-04"), day("2024-03-07"))),
        # A day written the German, Spanish or Vietnamese way was read as its whole month
        ("Was habe ich am 10. Mai 2024 gemacht?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("Was habe ich am 10.05.2024 gemacht?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("¿Qué hice el 10 de mayo de 2024?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("Tôi đã làm gì vào ngày 10 tháng 5 năm 2024?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        # French and Russian: their asking words were read as a topic, and Russian days not at all
        ("Que s'est-il passé le 10 mai 2024 ?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("Qu'avons-nous fait le 10 mai 2024 ?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("Что случилось 10 мая 2024 года?", None, None, (day("2024-05-09"), day("2024-05-12"))),
        ("¿Qué hice con la bicicleta?", day("2024-03-01"), day("2024-04-01"), None),  # a topic
        ("猫在哪里？", day("2024-03-01"), day("2024-04-01"), None),
        ("What did Caroline say about Mars?", None, None, None),  # a month elsewhere, but no year: no date
        ("What happened a while ago 2022?", None, None, None),  # Spanish "ago" (agosto) is no month here
    ],
)
def test_a_question_asking_only_about_a_time_has_that_window(query, after, before, window):
    assert asked_window(query, after, before) == window


@pytest.mark.parametrize(
    "question, day_read, rest",
    [
        ("Was war am 3. März?", "2024-03-03", "Was war ?"),  # no year: the latest such day
        ("Was war am 3. Dezember?", "2023-12-03", "Was war ?"),
        ("Qu'ai-je fait le 1er juin 2023 ?", "2023-06-01", "Qu'ai-je fait ?"),
        ("¿Qué hice el 1º de mayo de 2023?", "2023-05-01", "¿Qué hice ?"),  # an ordinal day, as Spanish writes it
        ("¿Qué hice el 1.º de mayo de 2023?", "2023-05-01", "¿Qué hice ?"),
        ("ngày 4 tháng 2 họp gì?", "2024-02-04", "họp gì?"),
        ("Build 1.10.2024.3 failed", None, "Build 1.10.2024.3 failed"),  # a version, not a day
        ("Was war am 31.02.2024?", None, "Was war am 31.02.2024?"),  # no such day
    ],
)
def test_a_day_written_the_local_way_is_that_day(question, day_read, rest):
    ranges, left = time_ranges(question, datetime(2024, 4, 1, tzinfo=timezone.utc))
    assert [(r.start, r.end) for r in ranges] == ([(day(day_read), day(day_read) + DAY)] if day_read else [])
    assert left == rest


TIMELINE = {
    "incident.md": ("2024-04-22", "Incident", "Around 600 invoices were sent twice to customers."),
    "cat.md": ("2024-08-12", "Adopted a cat", "Adopted a grey cat from the shelter and named her Miso."),
    "upgrade.md": ("2024-09-18", "Postgres upgrade", "We moved from Postgres 14 to Postgres 16."),
    "trip.md": ("2024-10-05", "Trip to Valencia", "Went to Valencia with my sister for four days."),
}


@pytest.mark.parametrize(
    "query, titles",
    [
        ("What did I do in August 2024?", ["Adopted a cat"]),
        ("What happened in September 2024?", ["Postgres upgrade"]),  # not October's trip, days after it
        ("What happened on 2024-04-21?", ["Incident"]),  # written the day after
    ],
)
def test_what_is_dated_in_the_window_a_question_asks_about_is_its_answer(store, settings, tmp_path, query, titles):
    """Such a question shares no word with its answer: the gate refused them all (weak_retrieval)."""
    for name, (date, title, text) in TIMELINE.items():
        write_note(tmp_path / "vault", name, f"---\ndate: {date}\n---\n# {title}\n\n{text}\n")
    ingest_notes(store, [tmp_path / "vault"])
    answer = ask_without_llm(open_retriever(store, settings, lexical_only=True), query)
    assert not answer.abstained and [item.hit.title for item in answer.evidence] == titles


def test_an_after_before_window_answers_a_question_about_it_and_names_it_when_refusing(store, settings, tmp_path):
    for name, (date, title, text) in TIMELINE.items():
        write_note(tmp_path / "vault", name, f"---\ndate: {date}\n---\n# {title}\n\n{text}\n")
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, lexical_only=True)
    retriever.options = replace(retriever.options, after=day("2024-08-01"), before=day("2024-09-01"))
    assert [item.hit.title for item in ask_without_llm(retriever, "What did I do?").evidence] == ["Adopted a cat"]
    refused = ask_without_llm(retriever, "Which sister came along?")
    assert refused.abstained and refused.text.startswith("No answer: nothing from 2024-08-01 to 2024-09-01 matches")
    retriever.options = replace(retriever.options, after=day("2030-01-01"), before=None)
    empty = ask_without_llm(retriever, "What did I do?")
    assert empty.abstained and empty.text == "No answer: nothing from 2030-01-01 on matches this question."


def test_a_german_day_in_a_question_finds_that_days_note_first(store, settings, tmp_path):
    for number in (1, 9, 10, 11, 20):
        write_note(
            tmp_path / "v", f"de-{number}.md", f"Date: {number}. Mai 2024\n\n# Tag {number}\n\nGarten und Einkauf.\n"
        )
    ingest_notes(store, [tmp_path / "v"])
    answer = ask_without_llm(
        open_retriever(store, settings, lexical_only=True), "Was habe ich am 10. Mai 2024 gemacht?"
    )
    assert not answer.abstained and [item.hit.title for item in answer.evidence][0] == "Tag 10"
    assert {item.hit.title for item in answer.evidence} <= {"Tag 9", "Tag 10", "Tag 11"}


JOURNAL = """# Journal 2024

## 2024-08-03
Ran 10 km in 58 minutes along the river.

## August 5, 2024
Dentist appointment. The crown will cost 780 euros.

## 2024-08-07
Dinner with my sister Elin at Trattoria Rosa.

## 2024-08-09
Fixed the rear brake on my bike.

## 2024-09-20
Repainted the kitchen.
"""


@pytest.mark.parametrize(
    "query, after, before",
    [
        ("What did I do?", day("2024-08-01"), day("2024-08-31")),
        ("What did I do in August 2024?", None, None),
    ],
)
def test_every_day_a_journal_kept_in_one_note_dates_in_the_window_is_found(
    store, settings, tmp_path, query, after, before
):
    """A note's sections dated differently count apart for the per-source cap when the question is about
    a time: capped as one source (3), the fourth day of August was left out."""
    write_note(tmp_path / "vault", "journal.md", JOURNAL)
    write_note(tmp_path / "vault", "recipes.md", "# Recipes\n\nLentil soup with cumin.\n")
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 10, lexical_only=True)
    retriever.options = replace(retriever.options, after=after, before=before)
    answer = ask_without_llm(retriever, query)
    days = sorted(item.hit.locator.split("#")[-1] for item in answer.evidence)
    assert days == ["2024-08-03", "2024-08-07", "2024-08-09", "August 5, 2024"]


def test_a_question_not_about_a_time_still_caps_a_journal_kept_in_one_note(store, settings, tmp_path):
    write_note(tmp_path / "vault", "journal.md", JOURNAL)
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 10, lexical_only=True)
    hits = retriever.search("What did I do with the river, the crown, my sister, the brake and the kitchen?").hits
    assert len(hits) == settings.max_chunks_per_source


WEDNESDAY = datetime(2024, 8, 14, 9, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "query, window",
    [
        ("What did I do last week?", (day("2024-08-04"), day("2024-08-13"))),  # Monday 5 to Sunday 11 August
        ("What did I do this month?", (day("2024-07-31"), day("2024-09-02"))),
        ("What happened yesterday?", (day("2024-08-12"), day("2024-08-15"))),  # the 13th, a day either side
        ("What did I do in May?", (day("2024-04-30"), day("2024-06-02"))),
        ("What did we decide last week?", None),  # a topic: judged by its words as ever
        # The same in the other languages asked in: these were refused as matching nothing
        ("Was habe ich letzte Woche gemacht?", (day("2024-08-04"), day("2024-08-13"))),
        ("上周我做了什么？", (day("2024-08-04"), day("2024-08-13"))),
        ("¿Qué hice la semana pasada?", (day("2024-08-04"), day("2024-08-13"))),
        ("Qu'est-ce que j'ai fait la semaine dernière ?", (day("2024-08-04"), day("2024-08-13"))),
        ("Tôi đã làm gì tuần trước?", (day("2024-08-04"), day("2024-08-13"))),
        ("Что мы делали на прошлой неделе?", (day("2024-08-04"), day("2024-08-13"))),
        ("先週何をしましたか？", (day("2024-08-04"), day("2024-08-13"))),
        ("¿Qué pasó ayer?", (day("2024-08-12"), day("2024-08-15"))),
        ("Was habe ich diesen Monat gemacht?", (day("2024-07-31"), day("2024-09-02"))),
        ("Was ist hier passiert?", None),  # "hier" is German "here", not French "yesterday"
    ],
)
def test_a_time_without_its_year_is_read_on_the_memorys_timeline(query, window):
    assert asked_window(query, None, None) is None  # without the memory's 'now', only dates with their year
    assert asked_window(query, None, None, now=lambda: WEDNESDAY) == window


def test_what_did_i_do_last_week_lists_that_week_of_a_journal(store, settings, tmp_path):
    """Refused as matching nothing (weak_retrieval), with --strategy episodic too: the question has no word
    but its time, and "last week" counts from the newest date in memory (14 August), not the clock."""
    days = ("2024-08-02", "2024-08-06", "2024-08-08", "2024-08-14")
    entries = "".join(f"## {d}\nEntry {i}: something I did.\n\n" for i, d in enumerate(days))
    write_note(tmp_path / "vault", "journal.md", f"---\ndate: 2024-08-01\n---\n# Journal\n\n{entries}")
    write_note(tmp_path / "vault", "recipes.md", "---\ndate: 2024-06-01\n---\n# Recipes\n\nLentil soup.\n")
    ingest_notes(store, [tmp_path / "vault"])
    for strategy in ("direct", "episodic"):
        retriever = with_recall(open_retriever(store, settings, 10, lexical_only=True), strategy, None, None)
        answer = ask_without_llm(retriever, "What did I do last week?")
        assert not answer.abstained, answer.text
        assert sorted(item.hit.locator.split("#")[-1] for item in answer.evidence) == ["2024-08-06", "2024-08-08"]
