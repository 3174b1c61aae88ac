"""The period a question names ("in March 2023", "last week", "on 3 June"): where its evidence lies.

episodic and fusion search the question within each of its date ranges, but that list is one of the
lists fused by reciprocal rank, and session diversity then lifted one turn of each other session into
the top 5: "what did we discuss about the logo in March 2023?" listed turns from May and July, fused
far below the March logo turns, among five. Diversity now spreads inside the named period when it
holds hits about the question (recall.py: `diversify_by_session`); a hit from outside comes in only
by its fused rank, so one the fusion ranks high (a date in the question that is a session or two
off, as in LoCoMo's "in March 2023" for a convention told on 18 April) keeps its place."""

from __future__ import annotations

from datetime import datetime

from crossmodalrag.agent.temporal import TimeRange, asks_when, time_ranges
from crossmodalrag.retrieval.dates import TOLD_AFTER, TOLD_BEFORE

# A wish for the newest, not a period: "recently" stays one fused variant among the others.
VAGUE = frozenset({"recently", "lately"})


def named_periods(question: str, anchor: datetime) -> list[TimeRange]:
    """The closed date ranges the question names as where its answer lies (`anchor`: the memory's
    'now'). None when the question
    - asks when: its dates then place what it refers to, not the answer ("When did John meet his
      teammates after his trip in August 2023?": the meeting was in September);
    - names a bound, `before|after|since|until` a date: its other time words then count from that bound
      ("last weekend before April 10", "the week before 9 June"), which time_ranges cannot know.
    `before the migration` (an event) is no range here; recall's variants read it."""
    if asks_when(question):
        return []
    ranges, _ = time_ranges(question, anchor)
    if any(span.start is None or span.end is None for span in ranges):
        return []
    return [span for span in ranges if span.text.lower() not in VAGUE]


def period_spans(periods: list[TimeRange]) -> list[tuple[float, float]]:
    """The periods as `retrieval.dates.within` reads them, widened as a search widens a date the query
    names (retrieval/dates.py): what happened in a period is often told in the days after it."""
    return [(span.start - TOLD_BEFORE, span.end + TOLD_AFTER) for span in periods]
