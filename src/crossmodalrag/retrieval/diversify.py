"""Pure post-processing over a ranked list: per-source caps and near-duplicate removal."""

from __future__ import annotations

import re
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
WORDS = re.compile(r"\w+")


def word_set(text: str) -> frozenset[str]:
    return frozenset(WORDS.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def cap_per_source(ranked: Sequence[T], source_of: Callable[[T], str], limit: int) -> list[T]:
    """Keep at most `limit` items per source, in rank order (0 = no cap)."""
    if limit <= 0:
        return list(ranked)
    counts: dict[str, int] = {}
    kept = []
    for item in ranked:
        source = source_of(item)
        if counts.get(source, 0) < limit:
            counts[source] = counts.get(source, 0) + 1
            kept.append(item)
    return kept


def drop_near_duplicates(
    ranked: Sequence[T], text_of: Callable[[T], str], threshold: float, limit: int | None = None
) -> list[T]:
    """Drop an item whose word set is at least `threshold` Jaccard-similar to a better-ranked one.

    Stops once `limit` items are kept. A threshold of 1.0 drops only exact word-set copies; 0
    disables the check.
    """
    if threshold <= 0:
        return list(ranked[:limit])
    kept: list[T] = []
    kept_words: list[frozenset[str]] = []
    for item in ranked:
        if limit is not None and len(kept) >= limit:
            break
        words = word_set(text_of(item))
        if any(_similar(words, other, threshold) for other in kept_words):
            continue
        kept.append(item)
        kept_words.append(words)
    return kept


def _similar(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    # Jaccard can never exceed min/max of the set sizes: skip the intersection when that is too low.
    small, large = sorted((len(a), len(b)))
    if large and small / large < threshold:
        return False
    return jaccard(a, b) >= threshold
