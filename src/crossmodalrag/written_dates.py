"""The day a note says it was written: one parser for frontmatter `date:`/`created:` values and a
leading `Date:` line (chunking/markdown.py), so the two accept the same ways of writing a day.

Besides ISO 8601, the unambiguous forms vaults use: `2023/06/01`, `2023-6-1`, `20230601`, `01.06.2023`
(day first, as wherever dots are used), `13/06/2023` or `06/13/2023` (a day past 12 tells which is
which; `06/01/2023` is not read: June or January?), `June 1, 2023`, `1 Jun 2023`, a link to a daily
note, `[[2023-06-01]]`, and the same in other languages: `2023年6月1日` (and Korean `2023년 6월 1일`),
`1. Juni 2023`, `1 de junio de 2023`, `1er juin 2023`, `ngày 1 tháng 6 năm 2023`, `1 июня 2023`.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from datetime import date, datetime, time, timezone
from typing import Any


def _month_numbers() -> dict[str, int]:
    months = {
        name.lower(): n for names in (calendar.month_name, calendar.month_abbr) for n, name in enumerate(names) if name
    }
    # German, Spanish and French names and their usual abbreviations; none means another month elsewhere.
    other = [
        "januar jänner jan enero ene janvier janv",
        "februar feber feb febrero février févr fév",
        "märz mär mrz marzo mar mars",
        "april apr abril abr avril avr",
        "mai mayo may",
        "juni jun junio juin",
        "juli jul julio juillet juil",
        "august aug agosto ago août",
        "september sep sept septiembre setiembre septembre",
        "oktober okt octubre oct octobre",
        "november nov noviembre novembre",
        "dezember dez diciembre dic décembre déc",
    ]
    # Russian, as a day is written (3 марта: the genitive) and as a month is named (март)
    russian = "января февраля марта апреля мая июня июля августа сентября октября ноября декабря".split()
    russian_named = "январь февраль март апрель май июнь июль август сентябрь октябрь ноябрь декабрь".split()
    other = [f"{names} {day} {named}" for names, day, named in zip(other, russian, russian_named, strict=True)]
    for number, names in enumerate(other, start=1):
        months.update(dict.fromkeys(names.split(), number))
    return months


MONTHS = _month_numbers()
_YEAR_FIRST = re.compile(r"(\d{4})([-/.])(\d{1,2})\2(\d{1,2})|(\d{4})(\d{2})(\d{2})")
_DOTTED = re.compile(r"(\d{1,2})\.(\d{1,2})\.(\d{4})")
_SLASHED = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})")
_CJK = re.compile(r"(\d{4})\s*[年년]\s*(\d{1,2})\s*[月월]\s*(\d{1,2})\s*[日일号號]?")
_VIETNAMESE = re.compile(r"(?:ngày\s+)?(\d{1,2})\s+tháng\s+(\d{1,2}),?\s+năm\s+(\d{4})", re.I)
# `5 March 2024`, `5th Mar. 2024`, `5. März 2024`, `5 de marzo de 2024`, `1er mars 2024`, `March 5, 2024`.
_NAMED = re.compile(
    r"(?:(?P<d1>\d{1,2})(?:st|nd|rd|th|er|\.)?\s+(?:de\s+)?(?P<m1>[^\W\d_]{3,10})\.?,?"
    r"|(?P<m2>[^\W\d_]{3,10})\.?\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?,?)\s+(?:del?\s+)?(?P<y>\d{4})",
    re.I,
)


def parse_date(value: Any) -> float | None:
    """A frontmatter or `Date:` value as unix seconds (UTC midnight for bare dates), else None
    (the forms the module lists)."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=timezone.utc).timestamp()
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # YAML reads `date: 20230601` as a number
    if isinstance(value, str):
        text = value.strip().strip("\"'").removeprefix("[[").removesuffix("]]").strip().replace("Z", "+00:00")
        for candidate in (text, text[:10]):
            try:
                return parse_date(datetime.fromisoformat(candidate))
            except ValueError:
                continue
        day = _written_day(unicodedata.normalize("NFKC", text))  # decomposed `März`, full-width digits
        return None if day is None else parse_date(day)
    return None


def _written_day(text: str) -> date | None:
    """The day of one of parse_date's other forms, or None."""
    try:
        if match := _YEAR_FIRST.fullmatch(text):
            year, month, day = (match[1], match[3], match[4]) if match[1] else (match[5], match[6], match[7])
            return date(int(year), int(month), int(day))
        if match := _CJK.fullmatch(text):
            return date(int(match[1]), int(match[2]), int(match[3]))
        if match := _DOTTED.fullmatch(text) or _VIETNAMESE.fullmatch(text):
            return date(int(match[3]), int(match[2]), int(match[1]))
        if (match := _SLASHED.fullmatch(text)) and max(first := int(match[1]), second := int(match[2])) > 12:
            return date(int(match[3]), min(first, second), max(first, second))  # 13/06/2023 or 06/13/2023
        if (match := _NAMED.fullmatch(text)) and (month := MONTHS.get((match["m1"] or match["m2"]).lower())):
            return date(int(match["y"]), month, int(match["d1"] or match["d2"]))
    except ValueError:  # 2023-02-30
        return None
    return None
