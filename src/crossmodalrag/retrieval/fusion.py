"""Pure score fusion over a candidate pool: normalization, weighted blend, reciprocal rank fusion."""

from __future__ import annotations

from typing import Mapping

RRF_K = 60


def scale_to_best(values: Mapping[int, float]) -> dict[int, float]:
    """value / best value (0 stays 0): for BM25, where 0 means 'no match' and is meaningful."""
    best = max(values.values(), default=0.0)
    return {key: (value / best if best > 0 else 0.0) for key, value in values.items()}


def min_max(values: Mapping[int, float]) -> dict[int, float]:
    """Spread to [0, 1] across the pool: cosine values bunch in a narrow band (0.2–0.6), and
    without spreading them a 0.55 vector weight would move rankings less than a 0.30 BM25 one."""
    if not values:
        return {}
    low, high = min(values.values()), max(values.values())
    if high - low < 1e-9:
        return {key: 1.0 for key in values}
    return {key: (value - low) / (high - low) for key, value in values.items()}


def blend(components: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Weighted sum over the components the weights name (a missing component counts 0)."""
    return sum(weight * components.get(name, 0.0) for name, weight in weights.items())


def reciprocal_rank_fusion(rankings: list[list[int]], k: int = RRF_K) -> dict[int, float]:
    """RRF score per key: sum over rankings of 1 / (k + rank), rank starting at 1."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores
