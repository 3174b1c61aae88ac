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


def drop_duplicates(ranked: Sequence[T], is_duplicate: Callable[[T, T], bool], limit: int | None = None) -> list[T]:
    """Keep items in rank order, dropping any that duplicates a better-ranked kept one; stop at limit."""
    kept: list[T] = []
    for item in ranked:
        if limit is not None and len(kept) >= limit:
            break
        if not any(is_duplicate(item, other) for other in kept):
            kept.append(item)
    return kept


def drop_near_duplicates(
    ranked: Sequence[T], text_of: Callable[[T], str], threshold: float, limit: int | None = None
) -> list[T]:
    """Drop an item whose word set is at least `threshold` Jaccard-similar to a better-ranked one.

    A threshold of 1.0 drops only exact word-set copies; 0 disables the check.
    """
    if threshold <= 0:
        return list(ranked[:limit])
    words = WordSets(text_of)
    return drop_duplicates(ranked, lambda a, b: words.similar(a, b, threshold), limit)


class WordSets:
    """Word sets computed once per item, for repeated pairwise comparisons."""

    def __init__(self, text_of: Callable[[T], str]) -> None:
        self.text_of = text_of
        self.cache: dict[int, frozenset[str]] = {}

    def of(self, item: T) -> frozenset[str]:
        key = id(item)
        if key not in self.cache:
            self.cache[key] = word_set(self.text_of(item))
        return self.cache[key]

    def similar(self, a: T, b: T, threshold: float) -> bool:
        first, second = self.of(a), self.of(b)
        # Jaccard can never exceed min/max of the set sizes: skip the intersection when that is too low.
        small, large = sorted((len(first), len(second)))
        if large and small / large < threshold:
            return False
        return jaccard(first, second) >= threshold
