"""Temporal expressions in a question, as date ranges on the memory's own timeline.

"What did we decide last week?" asked of a memory whose newest session is from May 2023 means the
week before that session, not the week before today: ranges are resolved against an anchor (the
newest source date in memory, or the clock when it is empty). Recognised: yesterday, today, this or
last week/weekend/month/year (and in German, Spanish, French, Vietnamese, Russian, Chinese and Japanese:
"letzte Woche", "上周"), N days/weeks/months/years ago, recently, a month name (with or without
a year: the latest such month up to the anchor), a day (ISO, or written out: "3 June, 2023",
"October 13", "Aug 15th"; in German, Spanish, French, Vietnamese, Russian, Chinese, Japanese and Korean
as notes write it: "am 10. Mai 2024", "10.05.2024", "2024年5月10日"), `before|after|since` a date or
a month, and `between|from` one date `and|to` another (one range). `before|after|since <something
else>` is left to the caller as an event (see recall.py).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from crossmodalrag.written_dates import MONTHS as WRITTEN_MONTHS
from crossmodalrag.written_dates import parse_date

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
UNITS = {"day": 1, "week": 7, "month": 30, "year": 365}
MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))

RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|recently|lately|(this|last|past|previous) (week|weekend|month|year))\b", re.I
)
AGO = re.compile(r"\b(a|an|one|two|three|four|five|six|\d{1,3}) (day|week|month|year)s? ago\b", re.I)
# The same said in the other languages asked in ("letzte Woche", "上周", "la semana pasada", "tuần trước"),
# as the English words RELATIVE reads. French "hier" is left out: German "here".
LOCAL_RELATIVE_WORDS = {
    phrase: english
    for english, phrases in {
        "yesterday": "gestern|ayer|hôm qua|вчера|昨天|昨日",
        "today": "heute|hoy|aujourd'hui|hôm nay|сегодня|今天|今日",
        "last week": "letzte woche|letzten woche|vergangene woche|vergangenen woche|la semana pasada|semana pasada"
        "|la semaine dernière|semaine dernière|tuần trước|на прошлой неделе|прошлой неделе|上周|上星期|上个星期|先週",
        "this week": "diese woche|esta semana|cette semaine|tuần này|на этой неделе|本周|这周|这个星期|今週",
        "last weekend": "letztes wochenende|letzten wochenende|el fin de semana pasado|le week-end dernier"
        "|cuối tuần trước|上周末|先週末",
        "last month": "letzten monat|letzter monat|vergangenen monat|el mes pasado|mes pasado|le mois dernier"
        "|mois dernier|tháng trước|в прошлом месяце|上个月|上月|先月",
        "this month": "diesen monat|este mes|ce mois-ci|tháng này|в этом месяце|这个月|本月|今月",
        "last year": "letztes jahr|letzten jahr|vergangenes jahr|el año pasado|año pasado|l'année dernière"
        "|année dernière|năm ngoái|năm trước|в прошлом году|去年|昨年",
        "this year": "dieses jahr|este año|cette année|năm nay|в этом году|今年",
    }.items()
    for phrase in phrases.split("|")
}
_CJK = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")
_LOCAL_PHRASES = sorted(LOCAL_RELATIVE_WORDS, key=len, reverse=True)
# A CJK phrase sits inside a run of characters (我上周做了什么): no word boundary there
LOCAL_RELATIVE = re.compile(
    r"(?<!\w)(?:"
    + "|".join(re.escape(p) for p in _LOCAL_PHRASES if not _CJK.search(p))
    + r")(?!\w)|"
    + "|".join(re.escape(p) for p in _LOCAL_PHRASES if _CJK.search(p)),
    re.I,
)
MONTH = re.compile(rf"\b(?:in |during |on )?({MONTH_NAMES})\.?(?:,? (\d{{4}}))?\b", re.I)
ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# "3 June, 2023", "8th December 2023", "October 13, 2023", "Aug 15th", "December 1,2023"
ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
DAY_DATE = re.compile(
    rf"\b(?:{ORDINAL} (?:of )?({MONTH_NAMES})|({MONTH_NAMES})\.? {ORDINAL})\b(?:,? ?(\d{{4}})\b)?", re.I
)
DAY_TEXT = rf"(?:\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{MONTH_NAMES})|(?:{MONTH_NAMES})\.? \d{{1,2}}(?:st|nd|rd|th)?)"
# A day, a month or a year: what `before|after|since|until` and `between ... and` take
DATE_TEXT = rf"(?:{DAY_TEXT}(?:,? ?\d{{4}})?|(?:{MONTH_NAMES})\.?(?:,? \d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|\d{{4}})"
BOUND = re.compile(rf"\b(before|after|since|until) ({DATE_TEXT})\b", re.I)
# "between August 11 and August 15, 2023", "from May to July": one range, first day to last
BETWEEN = re.compile(rf"\b(?:between|from) ({DATE_TEXT}) (?:and|to|until|till|through) ({DATE_TEXT})\b", re.I)
EVENT_BOUND = re.compile(r"\b(before|after|since) (?:the |our |my |we |i )?([a-z][\w'-]*(?: [a-z][\w'-]*){0,3})", re.I)
# A question that asks for a time ("When did Caroline go to the support group?", "What year did ...")
ASKS_WHEN = re.compile(
    r"^\W*(?:(?:so|and|but|around|about|roughly|approximately),? )?"
    r"(?:when|what (?:year|month|date|day|time|week|weekend)|which (?:year|month|date|day|week|weekend)"
    r"|how long ago|in (?:what|which) (?:year|month))\b",
    re.I,
)
# Words that place what a text says in time. In a conversation the date is the session's and the text
# says "yesterday" or "last Friday"; a bare "may" is left out (the verb, far more often than the month).
MONTHS_BUT_MAY = "|".join(name.lower() for name in calendar.month_name if name and name != "May")
WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
STATES_TIME = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago|weekends?|the other day|{WEEKDAYS}"
    rf"|(?:this|last|past|previous|next|coming) (?:week|weekend|month|year|night|morning|afternoon|evening"
    rf"|spring|summer|fall|autumn|winter|time|few)|(?:a )?(?:few|couple of) (?:days|weeks|months|years)"
    rf"|{MONTHS_BUT_MAY}|(?:in|during|of|since) may"
    rf"|(?:19|20)\d\d)\b",
    re.I,
)
# A month of another language with its year ("im März 2024", "en marzo de 2024", "tháng 3 năm 2024",
# "2024年3月", a day too: "2024年3月5日"): a year is required, so an English word that is a month
# elsewhere ("Mars") is no date.
# Spanish "ago" (agosto) is left out: "two years ago 2022" is English.
LOCAL_MONTH_NAMES = "|".join(sorted(set(WRITTEN_MONTHS) - set(MONTHS) - {"ago"}, key=len, reverse=True))
LOCAL_MONTH = re.compile(
    rf"\b(?P<name>{LOCAL_MONTH_NAMES})\.? (?:de |del )?(?P<year>\d{{4}})\b"
    r"|\btháng (?P<vi_month>\d{1,2}),? năm (?P<vi_year>\d{4})\b"
    r"|(?P<cjk_year>\d{4})\s*[年년]\s*(?P<cjk_month>\d{1,2})\s*[月월](?:\s*(?P<cjk_day>\d{1,2})\s*[日일号號])?",
    re.I,
)
# A day written the German, Spanish, French or Vietnamese way ("am 10. Mai 2024", "10.05.2024", "el 10
# de mayo de 2024", "le 1er juin 2024", "ngày 10 tháng 5 năm 2024"): read by the parser of notes'
# `Date:` lines (written_dates.py), day first as there. LOCAL_MONTH alone read "10. Mai 2024" as May
# and left "10." as a topic word. Without a year only after "am", "el", "le" or "ngày" (a date then).
LOCAL_NAMED_DAY = rf"\d{{1,2}}(?:\.|er|\.?[º°])?\s+(?:de\s+)?(?:{LOCAL_MONTH_NAMES})\.?"
LOCAL_DAY = re.compile(
    r"(?:\b(?:am|el|le)\s+)?(?<![\d.])(?P<dotted>\d{1,2}\.\d{1,2}\.\d{4})(?![\d.]*\d)"
    rf"|(?:\b(?:am|el|le)\s+)?\b(?P<named>{LOCAL_NAMED_DAY},?\s+(?:del?\s+)?\d{{4}})(?!\w)"
    rf"|\b(?:am|el|le)\s+(?P<named_yearless>{LOCAL_NAMED_DAY})(?!\w)"
    r"|\b(?P<vi>ngày\s+\d{1,2}\s+tháng\s+\d{1,2}(?P<vi_year>,?\s+năm\s+\d{4})?)(?!\w)",
    re.I,
)
WORD_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
DAY = timedelta(days=1)


@dataclass(frozen=True)
class TimeRange:
    start: float | None  # unix seconds, inclusive; None = open
    end: float | None  # exclusive; None = open
    text: str  # the words it came from

    def to_dict(self) -> dict:
        show = lambda t: None if t is None else datetime.fromtimestamp(t, timezone.utc).date().isoformat()  # noqa: E731
        return {"from": show(self.start), "until": show(self.end), "text": self.text}


def asks_when(question: str) -> bool:
    return ASKS_WHEN.search(question) is not None


def states_time(text: str) -> bool:
    return STATES_TIME.search(text) is not None


def time_ranges(question: str, anchor: datetime) -> tuple[list[TimeRange], str]:
    """The question's date ranges and the question without the words that made them."""
    found: list[TimeRange] = []
    rest = question
    patterns = (
        (BETWEEN, _between),
        (BOUND, _bound),
        (AGO, _ago),
        (RELATIVE, _relative),
        (LOCAL_RELATIVE, _local_relative),
        (ISO_DAY, _iso_day),
    )
    for pattern, resolve in (
        *patterns,
        (LOCAL_DAY, _local_day),
        (DAY_DATE, _day_date),
        (MONTH, _month),
        (LOCAL_MONTH, _local_month),
    ):
        for match in pattern.finditer(rest):
            span = resolve(match, anchor)
            if span is not None:
                found.append(
                    TimeRange(
                        span[0].timestamp() if span[0] else None,
                        span[1].timestamp() if span[1] else None,
                        match.group(0),
                    )
                )
        rest = pattern.sub(" ", rest) if any(r.text in rest for r in found) else rest
    return found, " ".join(rest.split())


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _relative(match: re.Match, anchor: datetime):
    return _relative_span(match.group(0).lower(), anchor)


def _local_relative(match: re.Match, anchor: datetime):
    """A LOCAL_RELATIVE phrase, read as the English words it says (`letzte Woche`: last week)."""
    return _relative_span(LOCAL_RELATIVE_WORDS[" ".join(match.group(0).lower().split())], anchor)


def _relative_span(word: str, anchor: datetime):
    """The days of a RELATIVE phrase ("yesterday", "last week") on the timeline whose now is `anchor`."""
    today = _day(anchor)
    if word in ("today", "tonight"):
        return today, today + DAY
    if word == "yesterday":
        return today - DAY, today
    if word in ("recently", "lately"):
        return today - 30 * DAY, today + DAY
    which, unit = word.split()
    back = which != "this"
    if unit == "week":
        start = today - timedelta(days=today.weekday()) - (7 * DAY if back else timedelta())
        return start, start + 7 * DAY
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        saturday -= 7 * DAY if back and saturday + 2 * DAY > today else timedelta()
        return saturday, saturday + 2 * DAY
    if unit == "month":
        first = today.replace(day=1)
        if back:
            first = (first - DAY).replace(day=1)
        return first, _next_month(first)
    first = today.replace(month=1, day=1)
    if back:
        first = first.replace(year=first.year - 1)
    return first, first.replace(year=first.year + 1)


def _ago(match: re.Match, anchor: datetime):
    count = WORD_NUMBERS.get(match.group(1).lower()) or int(match.group(1))
    days = UNITS[match.group(2).lower()]
    center = _day(anchor) - timedelta(days=count * days)
    half = timedelta(days=max(1, days // 2 + days * count // 4))  # the further back, the vaguer
    return center - half, center + half + DAY


def _month(match: re.Match, anchor: datetime, expected: bool = False):
    """`expected`: the words stand where a date must (after "between", "since", ...)."""
    month = MONTHS.get(match.group(1).lower().rstrip("."))
    if month is None or (
        match.group(1).lower() == "may"
        and not expected
        and not match.group(0).lower().startswith(("in", "during"))
        and not match.group(2)
    ):
        return None  # "may" alone is the verb far more often than the month
    year = int(match.group(2)) if match.group(2) else anchor.year - (1 if month > anchor.month else 0)
    first = datetime(year, month, 1, tzinfo=timezone.utc)
    return first, _next_month(first)


def _local_month(match: re.Match, anchor: datetime, expected: bool = False):
    """A month of another language with its year, or a CJK day (LOCAL_MONTH)."""
    if match["name"]:
        month, year = WRITTEN_MONTHS[match["name"].lower()], int(match["year"])
    else:
        month, year = int(match["vi_month"] or match["cjk_month"]), int(match["vi_year"] or match["cjk_year"])
    try:
        first = datetime(year, month, int(match["cjk_day"] or 1), tzinfo=timezone.utc)
    except ValueError:  # a 13th month, a 31st of February
        return None
    return (first, first + DAY) if match["cjk_day"] else (first, _next_month(first))


def _cardinal(written: str) -> str:
    """The day without its ordinal sign ("1º de mayo", "1.º", "1°"), as the notes' parser reads it."""
    return re.sub(r"(?<=\d)\.?[º°]", "", written)


def _local_day(match: re.Match, anchor: datetime, expected: bool = False):
    """A day of LOCAL_DAY; one without its year is the latest such day up to the anchor."""
    if match["dotted"] or match["named"] or match["vi_year"]:
        stamp = parse_date(_cardinal(match["dotted"] or match["named"] or match["vi"]))
    else:
        year_word = " năm " if match["vi"] else " "
        written = _cardinal(match["named_yearless"] or match["vi"])
        stamp = parse_date(f"{written}{year_word}{anchor.year}")
        if stamp is not None and stamp > anchor.timestamp():
            stamp = parse_date(f"{written}{year_word}{anchor.year - 1}")
    if stamp is None:  # a 31st of February
        return None
    start = datetime.fromtimestamp(stamp, timezone.utc)
    return start, start + DAY


def _iso_day(match: re.Match, anchor: datetime, expected: bool = False):
    try:
        day = datetime(int(match.group(1)), int(match.group(2)), int(match.group(3)), tzinfo=timezone.utc)
    except ValueError:
        return None
    return day, day + DAY


def _day_date(match: re.Match, anchor: datetime, expected: bool = False):
    day, month = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
    if month.lower() == "may" and not (
        expected or match.group(5) or re.search(r"(st|nd|rd|th|of)\b", match.group(0), re.I)
    ):
        return None  # "may 4 people come?", "10 may come": the verb and a number (4th/of May/a year are dates)
    month_number = MONTHS[month.lower()]
    year = int(match.group(5)) if match.group(5) else anchor.year - (1 if month_number > anchor.month else 0)
    try:
        start = datetime(year, month_number, int(day), tzinfo=timezone.utc)
    except ValueError:
        return None  # "31 June"
    return start, start + DAY


def _bound(match: re.Match, anchor: datetime):
    what, span = match.group(1).lower(), _date_span(match.group(2), anchor)
    if span is None:
        return None
    return (None, span[0]) if what in ("before", "until") else (span[0] if what == "since" else span[1], None)


def _between(match: re.Match, anchor: datetime):
    last = _date_span(match.group(2), anchor)
    # The first date is the latest such date up to the last one: "between August 11 and August 15 2023"
    # is 11-15 August 2023, "from December to February" starts in the December before that February.
    first = _date_span(match.group(1), last[1]) if last else None
    return (first[0], last[1]) if first and first[0] < last[1] else None


def _date_span(target: str, anchor: datetime):
    """The days a DATE_TEXT covers (a year, a month, a day), or None for one that does not exist. It
    stands where a date must, so "between May and July" is the month, never the verb."""
    if target.isascii() and target.isdigit():
        return datetime(int(target), 1, 1, tzinfo=timezone.utc), datetime(int(target) + 1, 1, 1, tzinfo=timezone.utc)
    found, resolve = next((found, resolve) for pattern, resolve in DATES if (found := pattern.match(target)))
    return resolve(found, anchor, expected=True)


DATES = ((ISO_DAY, _iso_day), (DAY_DATE, _day_date), (MONTH, _month))  # what a DATE_TEXT can be


def _next_month(first: datetime) -> datetime:
    return first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)
