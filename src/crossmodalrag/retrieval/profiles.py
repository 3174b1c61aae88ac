"""Ranking profiles: how much each normalized component counts when vectors exist.

Weights are over components that each span [0, 1] across the candidate pool (see fusion.py), so
`balanced` really means 55% of the ranking spread comes from meaning, 30% from words, 15% from
age. Usage stays 0 until a usage history exists.
"""

from __future__ import annotations

PROFILES: dict[str, dict[str, float]] = {
    "balanced": {"vector": 0.55, "lexical": 0.30, "recency": 0.15, "usage": 0.0},
    "relevant": {"vector": 0.70, "lexical": 0.25, "recency": 0.05, "usage": 0.0},
    "recent": {"vector": 0.35, "lexical": 0.20, "recency": 0.45, "usage": 0.0},
    "usage": {"vector": 0.55, "lexical": 0.25, "recency": 0.05, "usage": 0.15},
}


def hybrid_weights(profile: str, title_boost: float) -> dict[str, float]:
    """Final per-component weights (summing to 1): the profile's blend, then the title boost."""
    blend = PROFILES[profile]
    return {**{name: weight * (1.0 - title_boost) for name, weight in blend.items()}, "title": title_boost}


def lexical_weights(recency: float, title_boost: float) -> dict[str, float]:
    """Weights when no vectors are available: BM25 carries what recency and title leave."""
    return {"lexical": max(0.0, 1.0 - recency - title_boost), "recency": recency, "title": title_boost}
