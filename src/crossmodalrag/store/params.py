"""Lists bound into an SQL `IN (...)`: in slices that SQLite's bound-variable limit admits."""

from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

T = TypeVar("T")
MAX_BOUND = 500  # SQLite builds limited to 999 bound variables refuse more (PostgreSQL takes them too)


def in_batches(items: Sequence[T], size: int = MAX_BOUND) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
