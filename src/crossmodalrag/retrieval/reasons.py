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

# "Why did we ...?", "And why ...?", "Warum ...?", "¿Por qué ...?", "Pourquoi ...?", "Почему ...?", "Tại sao ...?";
# in Chinese and Japanese the why-word follows the subject or ends the question (我们为什么…, …のはなぜですか).
ASKS_WHY = re.compile(
    r"^\W*(?:(?:and|but|so),? )?(?:why|what (?:was|is|were) the reasons?|warum|wieso|weshalb|por ?qu[eé]|pourquoi"
    r"|почему|зачем|отчего|t[ạa]i sao|v[ìi] sao)\b"
    r"|为什么|為什麼|为何|為何|なぜ|どうして",
    re.I,
)
# What gives a reason, in the text or its heading (the breadcrumb): "because", "## Reasons", "so that", and
# the same in the other languages asked about: "## Gründe" of a German note ranked below a Spanish one.
GIVES_REASON = re.compile(
    r"\b(?:because|reasons?|why|so that|due to|in order to|rationale|motivation|weil|gr[üu]nde?|begründung"
    r"|porque|debido a|raz[oó]n|razones|motivos?|parce que|raisons?|en raison de|причин\w*|потому что|так как"
    r"|из-за|lý do|bởi vì|vì)\b"
    r"|原因|理由|因为|因為|由于|由於",
    re.I,
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
