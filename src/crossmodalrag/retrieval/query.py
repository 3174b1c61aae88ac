"""Understanding a query without an LLM: comparative questions split into their two sides."""

from __future__ import annotations

import re

X, Y, END = r"(?P<x>.+?)", r"(?P<y>.+?)", r"\s*[?.!]*$"
COMPARISONS = [
    re.compile(rf"\bdifferences?\s+between\s+{X}\s+and\s+{Y}{END}", re.I),
    re.compile(rf"\bcompare\s+{X}\s+(?:with|to|and|against)\s+{Y}{END}", re.I),
    re.compile(rf"^(?:.*?\b(?:is|are|was|were|should i use|use)\s+)?{X}\s+(?:vs\.?|versus)\s+{Y}{END}", re.I),
    re.compile(rf"\bhow\s+(?:does|do|did)\s+{X}\s+(?:differ\s+from|compare\s+(?:to|with))\s+{Y}{END}", re.I),
]
LEADING_FILLER = re.compile(r"^(?:the|a|an|what(?:'s| is| are)?(?: the)?)\s+", re.I)


def split_comparison(query: str) -> tuple[str, str] | None:
    """(X, Y) for "difference between X and Y", "compare X with Y", "X vs Y", "how does X differ
    from Y"; None for any other query."""
    text = query.strip()
    for pattern in COMPARISONS:
        match = pattern.search(text)
        if match:
            sides = tuple(LEADING_FILLER.sub("", match.group(name).strip(" ,;:")) for name in ("x", "y"))
            if all(len(side) >= 2 for side in sides) and sides[0].lower() != sides[1].lower():
                return sides  # type: ignore[return-value]
    return None
