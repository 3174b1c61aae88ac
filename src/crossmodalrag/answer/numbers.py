"""Numbers an answer states that its evidence neither states nor yields by one step of arithmetic.

The judge passes a sentence whose words match its excerpt's whatever its figure: asked by how much
PepsiCo increased a credit agreement, the model answered "1,050,000,000" from excerpts holding
3,800,000,000 and 4,950,000,000, and the judge passed it (-0.895 against a threshold of -1). A figure
is checked here instead: one the evidence states (written any way: "1.05 billion", "$1,050 million",
"1,050" in a table of millions), or the sum, difference, ratio or percentage change of two it
states ("by how much did it increase" is a difference), is supported; any other is made up. Counts
and days of the month (up to MAX_EXEMPT: "3" to "how many times …?" is counted, not stated) and
years (a date computed from "last year") are never checked.
"""

from __future__ import annotations

import re
from itertools import permutations

from crossmodalrag.types import Evidence

MAX_EXEMPT = 31  # a count, or a day of the month: derived by counting or from a relative date
YEARS = range(1000, 3000)  # a bare four-digit year: computed from "last year" and the like
SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
# A number as written: "4,950,000,000", "1.05", "3,20" (a decimal comma), then a scale word or not.
_NUMBER = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?)(?![\w]|[.,]\d)"
    r"(?:\s*(thousand|million|billion|trillion)\b)?",
    re.IGNORECASE,
)
RELATIVE_SLACK = 0.005  # figures rounded for an answer ("about 4.2 billion") within half a percent


def made_up_numbers(claim: str, question: str, evidence: list[Evidence]) -> list[str]:
    """The numbers of `claim`, as written, that neither the question nor `evidence` states or yields
    by one step of arithmetic (module docstring). Raises nothing."""
    return numbers_not_in(claim, [question, *(f"{item.hit.title} {item.hit.text}" for item in evidence)])


def numbers_not_in(claim: str, texts: list[str]) -> list[str]:
    """The numbers of `claim`, as written, that no text of `texts` states or yields by one step of
    arithmetic (a study card's answer against the excerpt it cites, too)."""
    stated = [value for text in texts for value in values_in(text)]
    made_up = []
    for match in _NUMBER.finditer(claim):
        readings = readings_of(match)
        if not readings or all(exempt(value) for value, _ in readings):
            continue
        if not any(supported(value, unit, stated) for value, unit in readings):
            made_up.append(match.group(0))
    return made_up


def values_in(text: str) -> list[float]:
    """Every value the numbers of `text` may mean ("1.450" is 1.45 or, in German, 1450)."""
    return sorted({value for match in _NUMBER.finditer(text) for value, _ in readings_of(match)})


def readings_of(match: re.Match) -> list[tuple[float, float]]:
    """The values a number may mean, each with the unit of its last digit (its rounding): "1.450" is
    1.45 or, written in German, 1450; "3,20" is 3.2; "4,950,000,000" only what it says in English."""
    digits, scale = match.group(1), SCALES.get((match.group(2) or "").lower(), 1.0)
    german = None if _grouped(digits) else _parse(digits.translate(str.maketrans(",.", ".,")))
    readings = [reading for reading in (_parse(digits), german) if reading is not None]
    return list(dict.fromkeys((value * scale, unit * scale) for value, unit in readings))


def _grouped(digits: str) -> bool:
    """Whether commas group the whole part's digits in threes ("4,950,000"), as English writes."""
    groups = digits.partition(".")[0].split(",")
    return len(groups) > 1 and all(len(group) == 3 for group in groups[1:])


def _parse(digits: str) -> tuple[float, float] | None:
    """The value of a number written in English, and the unit of its last digit; None if it is not."""
    whole, _, fraction = digits.partition(".")
    if "," in whole and not _grouped(whole):
        return None
    whole = whole.replace(",", "")
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return float(f"{whole}.{fraction or 0}"), _unit(whole, fraction)


def _unit(whole: str, fraction: str) -> float:
    """The rounding a number is written to: 0.01 for "1.05", 10,000,000 for "1,050,000,000"."""
    if fraction:
        return 10.0 ** -len(fraction)
    return 10.0 ** (len(whole) - len(whole.rstrip("0"))) if whole.strip("0") else 1.0


def exempt(value: float) -> bool:
    return value <= MAX_EXEMPT or (value.is_integer() and int(value) in YEARS)


def supported(value: float, unit: float, stated: list[float]) -> bool:
    """Whether `value` is one of `stated`, or one step of arithmetic on two of them, to its rounding
    or the scale of a table ("1,050,000,000" is "1,050" in a table of millions)."""
    if any(close(value, unit, known) for known in stated):
        return True
    return any(close(value, unit, derived) for derived in _derived(stated))


def close(value: float, unit: float, known: float) -> bool:
    if known <= 0:
        return False
    for scale in (1.0, 1e3, 1e6, 1e9):  # a table's figures may be in thousands, millions, billions
        if abs(value - known * scale) <= max(unit / 2, RELATIVE_SLACK * value):
            return True
    return False


def _derived(stated: list[float]):
    """The sums, differences, ratios (as percentages too) and percentage changes of two values."""
    for a, b in permutations(stated, 2):
        yield a + b
        yield abs(a - b)
        if b:
            yield a / b
            yield 100 * a / b
            yield 100 * abs(a - b) / b
