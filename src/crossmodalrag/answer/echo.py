"""The short answer without the words that restate the question.

Asked for "only the answer", a small model still often writes a sentence: "When did Caroline apply
to adoption agencies?" gets "Caroline applied to adoption agencies on 22 October 2023". What the
question already says tells the user nothing, so the short answer keeps what is new: "22 October
2023". Only a restating opening (the question's own words, with the function words between them)
and a closing phrase that repeats it ("... his turtles for cheer and joy") are dropped; a no or not is
never dropped, and an answer that opens with yes or no, or would lose every content word, is kept whole.
"""

from __future__ import annotations

import re

from crossmodalrag.index.scripts import fold
from crossmodalrag.index.stems import snowball
from crossmodalrag.retrieval.stopwords import BY_LANGUAGE, guess_language

_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")  # "John's" is one word: its "s" never stands alone
_POSSESSIVE = re.compile(r"['\u2019]s$")
SNOWBALL = {"en": "english", "de": "german", "es": "spanish", "fr": "french"}
# Words that carry the answer even though they are function words (or look like the question's).
KEPT = frozenset("yes no not never none nothing nobody neither nor ja nein nicht kein keine sí si oui non".split())
# Function words that only link a restated opening to the answer ("... agencies on 22 October").
LINKS = frozenset("on in at to by for of from as is was are were be been that because with about".split())
_EDGES = " \t,;:-\u2013\u2014"


def _stem(word: str, language: str) -> str:
    folded = fold(_POSSESSIVE.sub("", word.lower()))
    return snowball(SNOWBALL[language]).stemWord(folded) if language in SNOWBALL else folded


def without_echo(answer: str, question: str) -> str:
    """`answer` without a leading restatement of `question` and a trailing phrase repeating it."""
    words = list(_WORD.finditer(answer))
    language = guess_language([w.lower() for w in _WORD.findall(question)])
    stopwords = BY_LANGUAGE.get(language, frozenset())
    asked = {_stem(word, language) for word in _WORD.findall(question)}
    kinds = [_kind(match.group(0).lower(), language, asked, stopwords) for match in words]
    if kinds and kinds[0] == "kept":
        return answer  # "No, she is not part of it": a yes or no with its reason is short already
    start, end = _opening(kinds, words), _closing(kinds)
    kept = words[start:end]
    if not any(kind in ("new", "kept") for kind in kinds[start:end]) or not kept:
        return answer
    return answer[kept[0].start() if start else 0 : kept[-1].end() if end < len(words) else len(answer)].strip(_EDGES)


def _kind(word: str, language: str, asked: set[str], stopwords: frozenset[str]) -> str:
    if word in KEPT:
        return "kept"
    if word in stopwords:
        return "function"
    return "echo" if _stem(word, language) in asked else "new"


def _opening(kinds: list[str], words: list[re.Match]) -> int:
    """How many leading words restate the question: up to its last echoed word, plus the linking
    words right after it (so "his" in "Nate relies on his turtles" stays)."""
    run = 0
    while run < len(kinds) and kinds[run] in ("echo", "function"):
        run += 1
    echoed = [i for i in range(run) if kinds[i] == "echo"]
    if not echoed:
        return 0
    cut = echoed[-1] + 1
    while cut < run and words[cut].group(0).lower() in LINKS:
        cut += 1
    return cut


def _closing(kinds: list[str]) -> int:
    """Where a trailing phrase repeating the question starts (a function word opening a run of
    echoed and function words: "for cheer and joy"); the length of the answer when there is none."""
    start = len(kinds)
    while start > 0 and kinds[start - 1] in ("echo", "function"):
        start -= 1
    while start < len(kinds) and kinds[start] == "echo":
        start += 1  # "fantasy stories" for "what kind of stories": the head noun stays
    if start == len(kinds) or "echo" not in kinds[start:]:
        return len(kinds)
    return start
