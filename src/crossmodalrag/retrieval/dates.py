"""A query that names a day or a month with its year ("on 1 May, 2022", "in July 2023") prefers
evidence dated then: a person asks about what they wrote or said around that date.

Only dates with their year (a relative "last week" needs the memory's own timeline: agent/recall.py
resolves it for the episodic strategy, and `asked_window` for a question that asks only about a time)
and spans of a month at most ("in 2019" more often names what a document is about than when it was
written). What happened on a day is often told in the days after
it ("I watched it last night"): the span reaches TOLD_AFTER past its end. LoCoMo dev, the 75 answerable
questions naming such a date, `mem ask`'s retriever: turn recall@5 0.556 -> 0.596 (bench/dated_questions.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable

from crossmodalrag.agent.temporal import time_ranges
from crossmodalrag.index.scripts import CJK_FUNCTION_CHARS
from crossmodalrag.retrieval.stopwords import ENGLISH, stopwords_for

DAY = 86400.0
DATE_FACTOR = 1.3  # a hit dated inside a named span scores this much more
MAX_SPAN = 31 * DAY
TOLD_BEFORE, TOLD_AFTER = DAY, 7 * DAY
_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")  # not \b: in "2024年3月" the year runs on into a word character
_WORDS = re.compile(r"\w+")
# Besides function words, what a question asks with when it names no topic, only a time: "What
# happened in September 2024?", "What was going on on 2024-04-21?", "Anything in August 2024?".
# "What did I write on 2024-08-12?" asks what is dated then, not about writing.
ASKING_WORDS = frozenset(
    "happen happens happened happening go going went anything something everything".split()
    + "write wrote written note noted".split()
    # The same asked in other languages: "Was habe ich gemacht?", "¿Qué hice?", "Tôi đã làm gì?", "뭐 했어?"
    + "habe hatte gemacht getan passiert geschehen geschrieben notiert los gab".split()
    + "hice hizo hicimos hecho hacer pasó ocurrió escribí escrito".split()
    + "làm gì xảy ra viết đã tôi".split()
    # "Que s'est-il passé le 5 mars ?", "Qu'avons-nous fait ?", "Что случилось 3 марта 2026 года?"
    + "passé passée arrivé arrivée fait faite écrit noté s qu j".split()
    + "что мы я делали делал делала сделали сделал случилось произошло было были писал написал года году".split()
    + "뭐 무엇 무엇을 했어 했어요 했나요 했습니까 했지 있었어 있었나요 일".split()
)
# What a CJK question asks with besides its function characters (做了什么, 何をした): with them and
# kana (particles, verb endings) taken away, nothing of a topic is left.
CJK_ASKING = frozenset("做干发生写事情何甚麼么") | CJK_FUNCTION_CHARS
HIRAGANA = re.compile("[\u3040-\u309f]")


def read_times(query: str) -> tuple[list, str]:
    """The query's time expressions as ranges, and the query without them (agent/temporal.py): read
    once per search, for both `named_spans` and `asked_window`."""
    return time_ranges(query, datetime.now(timezone.utc))


def named_spans(query: str, times: tuple[list, str] | None = None) -> list[tuple[float, float]]:
    """The spans of the days or months `query` names with their year, widened as the module says.
    `times`: `read_times(query)`, when the caller has it already."""
    ranges, _ = times or read_times(query)
    return _widened(ranges, TOLD_AFTER)


def _widened(ranges, told_after: float) -> list[tuple[float, float]]:
    return [
        (r.start - TOLD_BEFORE, r.end + told_after)
        for r in ranges
        if r.start is not None and r.end is not None and r.end - r.start <= MAX_SPAN and _YEAR.search(r.text)
    ]


def asked_window(
    query: str,
    after: float | None,
    before: float | None,
    times: tuple[list, str] | None = None,
    now: Callable[[], datetime] | None = None,
) -> tuple[float | None, float | None] | None:
    """The window a question asks about and nothing else ("What did I do in August 2024?", or "What
    did I do?" with --after/--before): the days or months it names and a day either side (a note on
    a day is often written the next; a week after, as `named_spans` reaches, put October's trip into
    September's answer), within the given bounds; None when it names a topic, or no window at all.
    What is dated inside such a window is the answer, whatever words it shares with the question.
    `now`: 'now' on the memory's own timeline (filters.timeline_now). With it, a time without its
    year ("What did I do last week?", "this month", "in May") is read against it, as the episodic
    strategy reads it (agent/temporal.py): such a question has no other words for the gate to judge,
    and was refused as matching nothing."""
    ranges, rest = times or read_times(query)
    if not _asks_only_when(rest):
        return None
    spans = _widened(ranges, DAY)
    if not spans and now is not None and any(not _YEAR.search(r.text) for r in ranges):
        spans = _widened_relative(time_ranges(query, now())[0])
    if spans:
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        return (start if after is None else max(start, after), end if before is None else min(end, before))
    return None if after is None and before is None else (after, before)


def _widened_relative(ranges) -> list[tuple[float, float]]:
    """The bounded ranges written without a year ("last week", "in May"), a day either side."""
    return [
        (r.start - TOLD_BEFORE, r.end + DAY)
        for r in ranges
        if r.start is not None and r.end is not None and not _YEAR.search(r.text)
    ]


def _asks_only_when(rest: str) -> bool:
    """Whether a question without its time expressions names no topic: only function words (of its
    language, or English), asking words, and CJK asking characters and kana."""
    words = _WORDS.findall(rest.lower())
    function = stopwords_for(words) | ENGLISH
    return all(
        word in function or word in ASKING_WORDS or not (set(HIRAGANA.sub("", word)) - CJK_ASKING) for word in words
    )


def within(timestamp: float | None, spans: list[tuple[float, float]]) -> bool:
    return timestamp is not None and any(start <= timestamp < end for start, end in spans)
