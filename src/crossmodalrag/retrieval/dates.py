"""A query that names a day or a month with its year ("on 1 May, 2022", "in July 2023") prefers
evidence dated then: a person asks about what they wrote or said around that date.

Only dates with their year (a relative "last week" needs the memory's own timeline: agent/recall.py
resolves it for the episodic strategy) and spans of a month at most ("in 2019" more often names what a
document is about than when it was written). What happened on a day is often told in the days after
it ("I watched it last night"): the span reaches TOLD_AFTER past its end. LoCoMo dev, the 75 answerable
questions naming such a date, `mem ask`'s retriever: turn recall@5 0.556 -> 0.596 (bench/dated_questions.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from crossmodalrag.agent.temporal import time_ranges

DAY = 86400.0
DATE_FACTOR = 1.3  # a hit dated inside a named span scores this much more
MAX_SPAN = 31 * DAY
TOLD_BEFORE, TOLD_AFTER = DAY, 7 * DAY
_YEAR = re.compile(r"\b\d{4}\b")


def named_spans(query: str) -> list[tuple[float, float]]:
    """The spans of the days or months `query` names with their year, widened as the module says."""
    ranges, _ = time_ranges(query, datetime.now(timezone.utc))
    return [
        (r.start - TOLD_BEFORE, r.end + TOLD_AFTER)
        for r in ranges
        if r.start is not None and r.end is not None and r.end - r.start <= MAX_SPAN and _YEAR.search(r.text)
    ]


def within(timestamp: float | None, spans: list[tuple[float, float]]) -> bool:
    return timestamp is not None and any(start <= timestamp < end for start, end in spans)
