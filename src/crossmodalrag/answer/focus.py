"""The part of a long excerpt the prompt shows: the sentences about the question, not its opening.

An answer prompt holds a few hundred characters of each excerpt (CMRAG_LLM_EVIDENCE_CHARS shared
among them), a claim check 500. A note section, a PDF page or an abstract is longer, and what the
question asks about is often in its middle: cut from the start, the prompt showed the model the
section's preamble and the sentence that answers was gone (docs/benchmarks.md, "What the prompt
shows of long excerpts"). So a long excerpt is cut to a window of whole sentences (or lines, for
tables) grown around its sentence sharing most of the question's words. Growing around one
sentence makes a larger window hold every smaller one, so the claim check (500 characters) sees
what the answer was written from (the answer's share). Short excerpts, and excerpts sharing no word
with the question (a match by meaning only), read as before: from their start.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from crossmodalrag.retrieval.stopwords import stopwords_for

_WORD = re.compile(r"\w+")
# Where a window may start or end: after a sentence's end, or at a line break (tables, lists).
_UNIT_END = re.compile(r"(?<=[.!?;])\s+|\s*\n\s*")
STEM = 5  # words sharing their first 5 letters match ("backtracking", "backtracks"), as a cheap stem
ELLIPSIS = " …"


def focus_words(question: str) -> frozenset[str]:
    """The question's content words, lowercase: what a window is chosen by."""
    words = [w.lower() for w in _WORD.findall(question)]
    return frozenset(w for w in words if len(w) > 1 or w.isdigit()) - stopwords_for(words)


def _key(word: str) -> str:
    return word if word.isdigit() else word[:STEM]


def _units(text: str) -> list[str]:
    return [unit for unit in (" ".join(piece.split()) for piece in _UNIT_END.split(text)) if unit]


def _score(unit: str, keys: Collection[str]) -> int:
    """How many of the question's words (by stem) the unit holds, each once."""
    return len(keys & {_key(w.lower()) for w in _WORD.findall(unit)})


def focused(text: str, words: Collection[str], limit: int) -> str:
    """At most `limit` characters of `text` (whitespace flattened): all of it if it fits; else
    whole sentences grown around the one holding most of `words`, towards the better-scoring
    neighbour, "…" marking a cut; from the start when no sentence holds any of them."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    keys = {_key(w) for w in words}
    units = _units(text)
    scores = [_score(unit, keys) for unit in units]
    if not units or max(scores) == 0:
        return clip(flat, limit)
    best = scores.index(max(scores))
    if len(units[best]) > limit:  # one long sentence: from its start, as clip does
        return _marked(clip(units[best], limit - len(ELLIPSIS)), best > 0)
    first = last = best
    used = len(units[best])
    head = tail = ""  # the part of the next unit that still fits, when it does not fit whole
    for index in _growth(scores, best)[1:]:
        room = limit - used - 1
        if len(units[index]) > room:
            if index > last:
                tail = _prefix(units[index], room)
            else:
                head = _suffix(units[index], room)
            break
        used += 1 + len(units[index])
        first, last = min(first, index), max(last, index)
    window = " ".join(part for part in (head, *units[first : last + 1], tail) if part)
    cut_after = last + 1 < len(units)
    return _marked(window + (ELLIPSIS if cut_after else ""), first > 0)


def _prefix(unit: str, room: int) -> str:
    """The words of `unit` that fit in `room` from its start ("" if too few fit to read)."""
    cut = unit.rfind(" ", 0, room)
    return unit[:cut] if cut > 20 else ""


def _suffix(unit: str, room: int) -> str:
    """The words of `unit` that fit in `room` up to its end ("" if too few fit to read)."""
    cut = unit.find(" ", len(unit) - room)
    return unit[cut + 1 :] if 0 <= cut < len(unit) - 20 else ""


def _growth(scores: list[int], best: int) -> list[int]:
    """The order units join a window grown from `best`: the better-scoring neighbour first, the one
    after on a tie (what follows a sentence explains it). The order does not depend on the limit, so
    a window of a larger limit holds every window of a smaller one."""
    order, first, last = [best], best, best
    while first > 0 or last + 1 < len(scores):
        if last + 1 < len(scores) and (first == 0 or scores[last + 1] >= scores[first - 1]):
            last += 1
            order.append(last)
        else:
            first -= 1
            order.append(first)
    return order


def _marked(window: str, cut_before: bool) -> str:
    return "… " + window if cut_before else window


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + ELLIPSIS
