"""Parsers for setting values as written in the environment or TOML (setting_names.py's SCALARS): each takes
the text and returns the value, or raises ValueError saying what is wrong with it."""

from __future__ import annotations

import math
import re
from typing import Callable
from urllib.parse import urlsplit

from crossmodalrag.url_secrets import redact


def globs(value: str | list[str]) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [part.strip() for part in value.split(",") if part.strip()]


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
        return value

    return parse


def ocr_engine(value: str) -> str:
    """rapidocr, tesseract, or tesseract with its languages as tesseract's own -l takes them:
    "tesseract:rus+eng" (Debian's packs tesseract-ocr-rus, …)."""
    name, colon, languages = value.partition(":")
    if name not in ("rapidocr", "tesseract") or (colon and name != "tesseract"):
        raise ValueError(f"{value!r} is not rapidocr, tesseract or tesseract:LANG+LANG")
    if colon and not re.fullmatch(r"[A-Za-z_]+(\+[A-Za-z_]+)*", languages):
        raise ValueError(f"{value!r} names its languages as tesseract does: tesseract:rus+eng")
    return value


def finite(value: str) -> float:
    """A real number: nan and inf parse as floats, but compare false or win every comparison downstream
    (a nan half-life made every score nan, and the JSON output invalid)."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{value} is not a finite number")
    return number


def fraction(value: str) -> float:
    number = finite(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"{value} is outside 0..1")
    return number


def above(bound: float) -> Callable[[str], float]:
    """A finite number above `bound`: a half-life, saturation or timeout of 0 divides by zero or means nothing."""

    def parse(value: str) -> float:
        number = finite(value)
        if number <= bound:
            raise ValueError(f"{value} is not above {bound:g}")
        return number

    return parse


def database_url(value: str) -> str | None:
    """A postgresql:// (or postgres://) url; blank means none (the SQLite file)."""
    value = value.strip()
    if value and value.split("://", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError(f"{redact(value)[:60]!r} is not a postgresql://user@host/database url")
    try:
        urlsplit(value)  # "[::1/db" fails here, in one line (libpq's multi-host "h1:5432,h2:5432" parses)
    except ValueError as error:
        raise ValueError(f"{redact(value)[:60]!r} is not a valid url: {error}") from None
    return value or None


def switch(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("on", "true", "yes", "1"):
        return True
    if lowered in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"{value!r} is not on or off")


def margin_or_off(value: str) -> float | None:
    return None if value.strip().lower() == "off" else finite(value)


def whole_number(value: str) -> int:
    """int(), refusing in words a user reads beside the setting's name (not "invalid literal for int()")."""
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number") from None


def count(value: str) -> int:
    number = whole_number(value)
    if number < 0:
        raise ValueError(f"{value} is negative")
    return number


def at_least_one(value: str) -> int:
    number = whole_number(value)
    if number < 1:
        raise ValueError(f"{value} is below 1")
    return number


def at_least(minimum: float, whole: bool = False) -> Callable[[str], float]:
    """A finite number no smaller than `minimum` (nan passes no comparison, so it is refused by name)."""

    def parse(value: str) -> float:
        number = whole_number(value) if whole else finite(value)
        if number < minimum:
            raise ValueError(f"{value} is below {minimum:g}")
        return number

    return parse
