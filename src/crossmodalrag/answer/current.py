"""Questions about how things are now, over excerpts that speak of the same thing at different dates.

"What is my current rent?" over a note of 5 January 2024 ("Rent ... is 1,450 EUR") and one of
1 March 2025 ("... raised the rent ... to 1,620 EUR"): the dates were in the excerpts' headers and
the newer note came first, yet the 1.5B model answered 1,450 from the older one, whose sentence
reads like the answer. Told outright which excerpt is newer (answer/prompt.py `newest_note`), it
answered 1,620; the same words in the older excerpt's header did not move it. Whether the
statements disagree is left to the model: only the question's words and the excerpts' dates are read.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone

from crossmodalrag.retrieval.snippets import key_matches
from crossmodalrag.types import Evidence

# Words that ask for the present state. Bare present tense ("What is my rent?") is left out: it is
# also how a question about a lasting fact or a habit is asked, over evidence of many dates alike.
PRESENT = re.compile(
    r"\b(?:current(?:ly)?|now(?:adays)?|these days|at the moment|at present|presently|latest|still|any ?more)\b",
    re.IGNORECASE,
)


def asks_for_present(question: str) -> bool:
    return bool(PRESENT.search(question))


def same_subject_by_date(question: str, evidence: list[Evidence]) -> list[Evidence]:
    """For a question about now: the dated excerpts holding every word of the question that the first
    excerpt (the best retrieved) holds, newest first, when they are from at least two different days
    (else none). Not every word of the question: "How much rent do I pay now?" over "... paid on the
    1st" and "raised the rent to ..." is about rent, and neither note says "much"."""
    if not evidence or not asks_for_present(question):
        return []
    asked = PRESENT.sub(" ", question)
    subject = words_held(evidence[0], asked)
    if not subject:
        return []
    speaking = [item for item in evidence if item.hit.timestamp is not None and words_held(item, asked) >= subject]
    speaking.sort(key=lambda item: item.hit.timestamp, reverse=True)
    return speaking if len({day(item) for item in speaking}) > 1 else []


def words_held(item: Evidence, question: str) -> set[str]:
    """The question's words (their keys, retrieval/snippets.py) the excerpt holds."""
    return {key for *_, key in key_matches(item.hit.text, question)}


def day(item: Evidence) -> date:
    return datetime.fromtimestamp(item.hit.timestamp, tz=timezone.utc).date()
