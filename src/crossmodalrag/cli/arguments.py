"""Argument types shared by the command modules: counts that argparse checks before any work starts."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def port_number(text: str) -> int:
    """A TCP port to listen on: the socket call's own OverflowError would reach the user as a crash."""
    value = positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError("must be a port from 1 to 65535")
    return value
