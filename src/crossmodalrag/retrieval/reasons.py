"""A why-question is answered by reasons, and a note often keeps them in a section of their own
(`## Reasons`, `## Why`) or says them with "because": such a section shares the note's topic but few
of the question's words, which sit in the section that tells what was done. "Why did we move Kestrel to
PostgreSQL?" found the decision note's first section first and its `## Reasons` 11th: it matched only
"Kestrel" of its breadcrumb, and as the note's second chunk it ranked at `repeat_source_factor` of its
score (ranking.spread_sources). Among the best hit's own sections, one that gives reasons is what the
question asks of that note: it ranks without the discount and REASON_FACTOR higher.

Only a document's sections: a chat turn or an agent memory is a statement of its own, not a section of
its neighbour's source (ranking.capped_as), and LoCoMo's why-questions are left as they were.
"""

from __future__ import annotations

import re
from dataclasses import replace

from crossmodalrag.types import Hit

# "Why did we ...?", "And why ...?", "Warum ...?", "¿Por qué ...?", "Pourquoi ...?"
ASKS_WHY = re.compile(
    r"^\W*(?:(?:and|but|so),? )?(?:why|what (?:was|is|were) the reasons?|warum|wieso|por ?qu[eé]|pourquoi)\b", re.I
)
# What gives a reason, in the text or its heading (the breadcrumb): "because", "## Reasons", "so that"
GIVES_REASON = re.compile(
    r"\b(?:because|reasons?|why|so that|due to|in order to|rationale|motivation|weil|porque|parce que)\b", re.I
)
REASON_FACTOR = 1.3  # as much as a date the question names counts (dates.DATE_FACTOR)
STATEMENT_SOURCES = ("conversation", "memory")  # a turn or a memory is no section of a document


def asks_why(question: str) -> bool:
    return ASKS_WHY.search(question) is not None


def favour_reasons(hits: list[Hit]) -> list[Hit]:
    """`hits` (ranked, each source's further chunks discounted) with the best hit's own sections that give
    reasons undiscounted and REASON_FACTOR higher, shown as the component `reason_factor`."""
    if not hits or hits[0].source_type in STATEMENT_SOURCES:
        return hits
    top = hits[0]
    lifted = [
        _lifted(hit) if hit.source_uri == top.source_uri and hit is not top and GIVES_REASON.search(hit.text) else hit
        for hit in hits
    ]
    return sorted(lifted, key=lambda h: (-h.score, h.chunk_id))


def _lifted(hit: Hit) -> Hit:
    undiscounted = hit.score / hit.components.get("repeat_factor", 1.0)
    components = {k: v for k, v in hit.components.items() if k != "repeat_factor"}
    return replace(hit, score=undiscounted * REASON_FACTOR, components={**components, "reason_factor": REASON_FACTOR})
