"""A date in the short answer moved from the day an excerpt was written to the day it speaks of.

Each excerpt in the prompt is headed by its date, and asked "When did Caroline go to the support
group?" a small model answers with the date of her message, "8 May 2023", while the message says
she went "yesterday". The short answer then names the wrong day. When the date it gives is the
header date of an excerpt the answer cites and that excerpt says when, relative to its own day, in
one way only, the date is replaced by the day meant ("7 May 2023") or, when that is no single day,
by the span said relative to the message's day ("the week before 23 August 2023", "the Friday
before 15 July 2023", "2022" for "last year"; plans too: "tomorrow", "next month"). A message that
also names another time ("I started learning Portuguese yesterday because we're moving to Lisbon in
September") says when in two ways: its one relative phrase may be about something else than the
question, so its date stays.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from crossmodalrag.agent.temporal import MONTHS_BUT_MAY
from crossmodalrag.answer.citations import CITATION
from crossmodalrag.retrieval.stopwords import stopwords_for
from crossmodalrag.types import Evidence, human_date

_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}
# "today" and "this week" count too: the message's own day is then one of two times it speaks of.
RELATIVE = re.compile(
    r"\b(?:(yesterday|tomorrow)|(last|next) (week|weekend|month|year|" + "|".join(_WEEKDAYS) + r")"
    r"|(an?|one|two|three|four|five|six|ten|\d{1,2}) (day|week|month|year)s? ago"
    r"|(today|tonight|this (?:morning|afternoon|evening|week|weekend)))\b",
    re.IGNORECASE,
)

QUESTION_SHARE = 0.5  # of a question's content words, in the sentence naming the month its answer moves to
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
# A month (a bare "may" is the verb far more often) or a year ("Lisbon in September", "since 2019").
CALENDAR_TIME = re.compile(
    rf"\b(?:{MONTHS_BUT_MAY}|(?:in|during|of|since|by|until|on|early|late) may|(?:19|20)\d\d)\b", re.I
)


def dated_answer(short: str, cited: list[Evidence], question: str = "") -> str:
    """`short` with the header date of one of `cited` replaced by the day its excerpt speaks of;
    unchanged when no cited excerpt's date is in it, or its excerpt says no time (or two)."""
    moved = moved_date(short, cited, question)
    return short if moved is None else with_day(short, *moved)


def moved_date(text: str, cited: list[Evidence], question: str = "") -> tuple[str, str] | None:
    """(the header date of one of `cited` that `text` names, the day its excerpt speaks of), or None.
    With the `question`, a `text` of nothing but that date moves to the one month its excerpt names
    in a sentence about the question (`the_other_time`)."""
    for item in cited:
        if item.hit.timestamp is None:
            continue
        written = datetime.fromtimestamp(item.hit.timestamp, tz=timezone.utc)
        day = human_date(item.hit.timestamp)
        body = item.hit.text.split("\n", 1)[-1]
        said = {match.group(0).lower(): match for match in RELATIVE.finditer(body)}
        if _copied(day).search(text) and len(said) == 1 and not names_another_time(body):
            return day, _meant(next(iter(said.values())), written, day)
        other = None if said or not only_the_day(text, day) else the_other_time(body, written, question)
        if other:  # "4 December 2026" to when Elin moves, from "She is moving to Gothenburg in February."
            return day, other
    return None


def the_other_time(body: str, written: datetime, question: str) -> str | None:
    """The one month a message names (`CALENDAR_TIME`), when it names no year ("the 2027 budget"
    names what it is about more often than when), the month is not the one it was written in, and
    the sentence naming it holds at least half the question's content words: "Dinner with my sister
    Elin. She is moving to Gothenburg in February." says when she moves, not when the dinner was."""
    named = {re.sub(r"^\w+ (?=may$)", "", match.group(0).lower()) for match in CALENDAR_TIME.finditer(body)}
    if len(named) != 1 or any(time.isdigit() for time in named):
        return None
    (month,) = named
    if month == f"{written:%B}".lower():
        return None  # "in March" in a note of 14 March: its own month
    asked = _keys(question)
    about = [sentence for sentence in _SENTENCE.split(body) if CALENDAR_TIME.search(sentence)]
    held = max((len(asked & _keys(sentence)) for sentence in about), default=0)
    return month.capitalize() if asked and held >= QUESTION_SHARE * len(asked) else None


def _keys(text: str) -> set[str]:
    """Content words (not function words, calendar words or "when"), by their first five letters."""
    words = [word for word in re.findall(r"[^\W\d_]{3,}", text.lower()) if not CALENDAR_TIME.fullmatch(word)]
    return {word[:5] for word in set(words) - stopwords_for(words)}


def only_the_day(text: str, day: str) -> bool:
    """Whether `text` (a short answer, label and citations allowed) says nothing but `day`."""
    bare = CITATION.sub(" ", re.sub(r"^\W*(?:the\s+)?answer\W*:", "", text, flags=re.IGNORECASE))
    return re.fullmatch(rf"\W*(?:on\s+)?{re.escape(day)}\W*", bare, re.IGNORECASE) is not None


def names_another_time(body: str) -> bool:
    """Whether a message names a month or a year ("in September", "on 6 April", "since 2019"): a time
    of the calendar, which its one RELATIVE phrase may not be about. Vague words ("lately") and a
    weekday ("On Friday, I got great news! Next month I'm off to Ireland.") place nothing to compare:
    of LoCoMo's 209 turns with one RELATIVE phrase, 12 also hold one of them, none a month or year."""
    return CALENDAR_TIME.search(body) is not None


def header_date_guess(text: str, cited: list[Evidence]) -> bool:
    """Whether `text` is nothing but the header date of one of `cited` whose message names another
    time (`names_another_time`, so the date is never moved): the day the message was written, where
    the message itself says when ("... moving to Lisbon in September")."""
    for item in cited:
        if item.hit.timestamp is None:
            continue
        if only_the_day(text, human_date(item.hit.timestamp)) and names_another_time(item.hit.text.split("\n", 1)[-1]):
            return True
    return False


def with_day(text: str, day: str, meant: str, count: int = 0) -> str:
    """`text` with `day` replaced by `meant` (the first `count` times; 0: every time)."""
    return _copied(day).sub(meant, text, count=count)


def _copied(day: str) -> re.Pattern:
    return re.compile(rf"(?<!\d){re.escape(day)}\b")  # "8 May 2023", not inside "18 May 2023"


def _meant(match: re.Match, written: datetime, day: str) -> str:
    """What a relative phrase of a message written on `written` (`day`, as the answer says it) means."""
    next_day, side, unit, count, counted, now = (group.lower() if group else group for group in match.groups())
    if now:
        return day
    if next_day:
        return human_date((written + timedelta(days=1 if next_day == "tomorrow" else -1)).timestamp())
    if side:
        if unit in ("month", "year"):
            return _shift(written, unit, 1 if side == "next" else -1)
        return f"the {unit.capitalize() if unit in _WEEKDAYS else unit} {'after' if side == 'next' else 'before'} {day}"
    number = _NUMBERS.get(count) or int(count)
    if counted == "day":
        return human_date((written - timedelta(days=number)).timestamp())
    if counted == "week":
        return f"the week before {day}" if number == 1 else f"{number} weeks before {day}"
    return _shift(written, counted, -number)


def _shift(written: datetime, unit: str, number: int) -> str:
    """The month ("April 2023") or year ("2022") `number` of them after `written` (before: < 0)."""
    if unit == "year":
        return str(written.year + number)
    months = written.year * 12 + written.month - 1 + number
    return f"{datetime(months // 12, months % 12 + 1, 1):%B %Y}"
