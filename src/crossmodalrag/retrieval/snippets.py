"""Where in a chunk its excerpt should start: at the question's words, not always at the top.

A chunk holds up to a few thousand characters and an excerpt shows 280 of them; a match near the
end of a long section showed only its opening lines ("hippogriff saddle" found a chunk whose first
300 characters were about something else). The focus is the start of the excerpt-sized window
holding the most distinct query words, compared by their first letters, case and accents folded, so
"rotates" finds "rotation"; Chinese and Japanese query words count by their character pairs.
"""

from __future__ import annotations

import re
from typing import Iterable

from crossmodalrag.index.scripts import fold as fold_word
from crossmodalrag.retrieval.stopwords import stopwords_for
from crossmodalrag.types import EXCERPT_CHARS, Hit, flat_body

KEY_LETTERS = 5  # a word's key: its first letters ("rotat" of rotates and rotation)
LEAD = 60  # characters of context shown before the first word matched
_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
_CJK_RUN = re.compile(_CJK.pattern + "+")


def fold(text: str) -> str:
    """Lowercase without accents as the index folds them, character for character: a position in it
    is the same position in `text` (a lone combining mark, which folds to nothing, is kept)."""
    return "".join(fold_word(c) or c for c in text.lower())


def focus_hits(hits: Iterable[Hit], query: str) -> None:
    """Set each hit's excerpt focus: done where excerpts are shown, once for the hits shown, not in
    every search (a recall strategy's variants, an eval's thousands of questions)."""
    for hit in hits:
        hit.focus = focus(flat_body(hit.text), query, EXCERPT_CHARS)


def query_keys(query: str) -> set[str]:
    words = _WORD.findall(fold(query))
    keys = {w[:KEY_LETTERS] for w in set(words) - stopwords_for(words) if len(w) >= 3 and not _CJK.search(w)}
    return keys | {piece for run in _CJK_RUN.findall(query) for piece in _pairs(run)}


def _pairs(run: str) -> list[str]:
    """A Chinese or Japanese run's keys: its character pairs, as the index reads it (a lone character
    alone). One by one, 天 of 哪天 matched every 今天 of a page of meeting notes, and the window
    holding the most keys began before the answer and cut it off."""
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def key_matches(body: str, query: str) -> list[tuple[int, int, str]]:
    """Where the query's words are in `body`: each match's start, end and key, in order."""
    keys = query_keys(query)
    if not keys:
        return []
    folded = fold(body)
    found = [(m.start(), m.end(), m.group(0)[:KEY_LETTERS]) for m in _WORD.finditer(folded)]
    found += [
        (run.start() + i, run.start() + i + width, run.group(0)[i : i + width])
        for run in _CJK_RUN.finditer(folded)
        for width in (1, 2)
        for i in range(len(run.group(0)) - width + 1)
    ]
    return sorted(match for match in found if match[2] in keys)


def focus(body: str, query: str, width: int) -> int:
    """The offset in `body` (a chunk's body flattened to one line) where an excerpt `width` long
    shows the most query words; 0 when the top shows as many as anywhere."""
    if len(body) <= width:
        return 0
    found = [(at, key) for at, _, key in key_matches(body, query)]
    if not found:
        return 0
    best_start, best = 0, len({key for at, key in found if at < width})
    for index, (at, _) in enumerate(found):
        start = max(0, at - LEAD)
        shown = set()
        for later, key in found[index:]:
            if later >= start + width:
                break
            shown.add(key)
        if len(shown) > best:
            best_start, best = start, len(shown)
    return best_start
