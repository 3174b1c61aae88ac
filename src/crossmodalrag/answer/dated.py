"""The dates a question states, and whether an excerpt is from then: an answer to "What did Tim
watch on 8th December, 2023?" rests only on what was said that week (answer/verify.py)."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from crossmodalrag.agent.temporal import time_ranges as agent_dates
from crossmodalrag.types import Evidence

_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")  # not \b: in "2024年3月" the year runs on into a word character
# A question's date names the day it was said, give or take the week it speaks of ("the week before").
DATE_SLACK = 7 * 86400.0


def question_dates(question: str) -> list[tuple[float, float]]:
    """The spans of the dates a question states with their year ("on 8th December, 2023", "before
    August 3, 2023", "in November 2022"), each widened by DATE_SLACK; relative ones ("last week")
    and dates without a year are left out (their year is a guess)."""
    ranges, _ = agent_dates(question, datetime.now(timezone.utc))
    return [
        (-math.inf if r.start is None else r.start - DATE_SLACK, math.inf if r.end is None else r.end + DATE_SLACK)
        for r in ranges
        if _YEAR.search(r.text)
    ]


def within(item: Evidence, dated: list[tuple[float, float]]) -> bool:
    """Whether an excerpt is dated inside one of the question's spans (undated ones, or any when the
    question names no date, always are)."""
    moment = item.hit.timestamp
    return not dated or moment is None or any(start <= moment < end for start, end in dated)
