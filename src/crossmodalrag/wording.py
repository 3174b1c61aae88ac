"""Small helpers for the sentences mem prints."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """The count with its noun agreeing: "1 problem", "2 problems", "1 source … 3 sources"."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
