"""Argument types shared by the command modules: counts and paths that argparse checks before any work starts."""

from __future__ import annotations

import argparse
from pathlib import Path


def positive(text: str) -> int:
    return _count(text, 1)


def non_negative(text: str) -> int:
    return _count(text, 0)


# No count means more than this; past 2**63 SQLite cannot even bind the number (an OverflowError).
MAX_COUNT = 1_000_000_000


def _count(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:  # "-3" and "0" for a positive count get the one bound that holds
        raise argparse.ArgumentTypeError(f"must be at least {least}" if least else "must not be negative")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_COUNT:,}")
    return value


def minutes(text: str) -> float:
    """A positive, finite number of minutes (nan would never stop a run, 0 or less never start one)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError("must be a number of minutes above 0")
    return value


def at_most(limit: int):
    """A count from 1 to `limit` (a bigger one is refused, not quietly cut)."""

    def count(text: str) -> int:
        value = positive(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit}")
        return value

    return count


def port_number(text: str) -> int:
    """A TCP port to listen on: the socket call's own OverflowError would reach the user as a crash."""
    value = positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError("must be a port from 1 to 65535")
    return value


def given_path(text: str) -> Path:
    """A path the user typed: an empty one ("$VAULT" unset) would be Path("") = the current folder, and
    an ingest or `forget --path` would then act on everything under it."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty (hint: an unset shell variable?)")
    return Path(text)


def iso_date(text: str) -> str:
    """A `--after`/`--before` date, as typed, checked before any work: a bad one is a usage error, as
    every other bad value is, not a failure of the ask."""
    from crossmodalrag.agent.tools import InvalidArgument, parse_when

    try:
        parse_when(text, "the date")
    except InvalidArgument as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def importance(text: str) -> float:
    """`mem remember --importance`, checked before any work (the embedding model loads first)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:  # nan included
        raise argparse.ArgumentTypeError("must be a number from 0 to 1, e.g. 0.8")
    return value


def memory_kind(text: str) -> str:
    """`mem remember --kind` (and `mem memories --kind`), checked as the library checks it, before any
    work: a bad value is a usage error (exit 2), as a bad --importance is."""
    from crossmodalrag.agent.memory_input import KIND

    if not KIND.match(text):
        raise argparse.ArgumentTypeError("must be one short lowercase word, e.g. fact, decision, preference, task")
    return text


def listing_day(text: str) -> str:
    """A `mem sources --since/--until` day, checked as the listing will read it (sources.parse_day), so a
    bad one is a usage error like a bad `--after`, not a failed listing."""
    from crossmodalrag.sources import BadFilter, parse_day

    try:
        parse_day(text, "the date")
    except BadFilter as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text
