"""The words of a text that give a value: numbers, dates, times, weekdays, identifiers.

Sentence embeddings barely see them: "booked for 14:00 on 2026-12-08" and "... 10:00 on 2026-12-09"
score 0.987 with MiniLM, "gym on Monday" and "on Tuesday" 0.985. Two texts that close but with other
values are two facts, not one said twice: neither a stored memory (agent/memories.py) nor a piece of
evidence (retrieval/ranking.py) may stand in for the other.
"""

from __future__ import annotations

import re

# Stripped from the ends of words only: "weekly." is "weekly", but "-5", "C++", "C#" and "3.10" keep
# theirs (a sign, a name, a version are not punctuation).
EDGE_PUNCTUATION = ".,;:!?\"'()[]{}…“”‘’«»"
DAY_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday today tonight tomorrow yesterday".split()
)
MONTHS = frozenset(  # capitalised only: "may" is mostly a verb
    "January February March April May June July August September October November December".split()
)
NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty"
    " seventy eighty ninety hundred thousand million billion".split()
)
CAMEL_CASE = re.compile(r"[a-z][A-Z]")


def value_words(text: str) -> set[str]:
    """The words of the text that give a number, a date, a time or an identifier (anything with a digit:
    "14:00", "2026-12-08", "-5", "LH123", "v3.10"; a number in words; a weekday, a month, today or
    tomorrow; a name in code: "max_retries", "maxRetries"), lowercased, punctuation around them dropped."""
    found = set()
    for raw in text.split():
        word = raw.strip(EDGE_PUNCTUATION)
        base = word.split("'")[0].split("’")[0]  # "Monday's"
        if any(c.isdigit() for c in word) or "_" in word.strip("_") or CAMEL_CASE.search(word):
            found.add(word.lower().lstrip("#"))  # "#4521" is ticket 4521
        elif base.lower() in NUMBER_WORDS:
            found.add(base.lower())
        elif base.lower().removesuffix("s") in DAY_WORDS or base.removesuffix("s") in MONTHS:
            found.add(base.lower().removesuffix("s"))
    return found
