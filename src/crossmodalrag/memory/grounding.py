"""What an event states that its evidence cannot: names, figures and words of another script.

The provenance check (provenance.py) scores an event by embedding cosine to its source's sentences,
and one added fact barely moves a cosine: "Finished reading 'Designing Data-Intensive Applications'
by Martin Fowler" (the note names no author) and "... vacuum took four小时" (the note says "four
hours") were both stored as supported. Such facts are checked here by their letters instead:
- a name (an English statement's capitalised word inside a sentence, retrieval/names.py) that no
  word of the evidence starts like (its first letters: "Priya's", "Postgres" of "PostgreSQL" pass);
- a number the evidence neither states nor yields by one step of arithmetic (answer/numbers.py,
  as an answer's figures are checked: counts, days of the month and years are not);
- a letter of a script (Han or kana, Hangul, Cyrillic, ...) the evidence has none of; Latin is left
  out (an English event of a note in another language is a translation, not an invention).
An event with any of them is unsupported, as one no chunk supports.
"""

from __future__ import annotations

import re
import unicodedata

from crossmodalrag.answer.numbers import numbers_not_in
from crossmodalrag.retrieval.names import question_names

KNOWN_PREFIX = 5  # a longer name is known when a word of the evidence shares its first letters
WORD = re.compile(r"\w+")
# Scripts read as one: a Japanese note mixes Han and kana, full-width Latin is Latin.
SAME_SCRIPT = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "FULLWIDTH": "LATIN", "HALFWIDTH": "CJK"}


def not_in_evidence(statement: str, texts: list[str]) -> list[str]:
    """The names, numbers and other-script words of `statement` that `texts` (its evidence) do not
    hold, as written in the statement, in order (module docstring). Raises nothing."""
    evidence = " ".join(texts)
    known = {word.lower() for word in WORD.findall(evidence)}
    missing = [name for name in question_names(statement) if not _known(name, known)]
    missing += numbers_not_in(statement, [evidence])
    scripts = {script for char in evidence if (script := _script(char))}
    missing += [word for word in WORD.findall(statement) if any(_foreign(char, scripts) for char in word)]
    return list(dict.fromkeys(missing))


def _known(name: str, known: set[str]) -> bool:
    word = name.lower()
    if word in known:
        return True
    prefix = word[:KNOWN_PREFIX]
    return len(word) > KNOWN_PREFIX and any(other.startswith(prefix) for other in known)


def _script(char: str) -> str:
    """The script of a letter ("LATIN", "CJK", "CYRILLIC", ...), "" for anything else."""
    if not char.isalpha():
        return ""
    first = unicodedata.name(char, "").split(" ", 1)[0]
    return SAME_SCRIPT.get(first, first)


def _foreign(char: str, scripts: set[str]) -> bool:
    script = _script(char)
    return bool(script) and script != "LATIN" and script not in scripts
