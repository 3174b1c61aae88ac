"""Source-level retrieval metrics over one ranked list (pure functions)."""

from __future__ import annotations

import math
from typing import Sequence


def unique_in_order(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def hit(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if any(uri in gold for uri in ranked[:k]) else 0.0


def recall(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: set[str], k: int) -> float:
    for position, uri in enumerate(ranked[:k], 1):
        if uri in gold:
            return 1.0 / position
    return 0.0


def ndcg(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Binary-relevance nDCG@k."""
    dcg = sum(1.0 / math.log2(i + 2) for i, uri in enumerate(ranked[:k]) if uri in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal if ideal else 0.0


def score_ranking(ranked: Sequence[str], gold: set[str], k: int) -> dict[str, float]:
    """All metrics for one query; `ranked` holds source uris best first (duplicates removed here)."""
    ranked = unique_in_order(ranked)
    return {
        "hit_rate": hit(ranked, gold, k),
        "recall": recall(ranked, gold, k),
        "mrr": reciprocal_rank(ranked, gold, k),
        "ndcg": ndcg(ranked, gold, k),
    }
