"""Who a question is about: the names it mentions, which an answer's cited evidence must mention too.

A small judge model reads "Melanie: I ran a charity race" as support for "what did Caroline realize
after her charity race?": the words match and the person does not. The check here needs no model: a
sentence that answers a question naming Caroline must cite some excerpt that mentions Caroline (in
its text or its title, e.g. a chat turn's speaker or a note named after her).
"""

from __future__ import annotations

import re
import unicodedata

from crossmodalrag.retrieval.stopwords import BY_LANGUAGE, guess_language
from crossmodalrag.types import Evidence

# A capitalised word (letters only, possessive allowed), so acronyms and code identifiers are not names.
_CAPITALISED = re.compile(r"\b([A-Z][a-z\u00df-\u024f]{2,})(?:['\u2019]s)?\b")
_WORD = re.compile(r"[\w'\u2019]+")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow".split()
)
_GREETINGS = "hey|hi|hello|thanks|thank you|yes|yep|yeah|wow|oh|dear|sorry|congrats|congratulations"
_ALL_STOPWORDS = frozenset().union(*BY_LANGUAGE.values())


def named_subjects(question: str) -> list[str]:
    """Capitalised words inside the question that look like names (lowercased), first one skipped
    since any sentence starts with a capital. Empty for German, which capitalises every noun."""
    words = [w.lower() for w in _WORD.findall(question)]
    if guess_language(words) == "de":
        return []
    names = []
    for match in _CAPITALISED.finditer(question):
        before = question[: match.start()].rstrip()
        if not before or before[-1] in ".!?:;\"'(":
            continue  # the first word of a sentence
        name = match.group(1).lower()
        if name not in _ALL_STOPWORDS and name not in _CALENDAR:
            names.append(name)
    return list(dict.fromkeys(names))


def mentions_any(items: list[Evidence], names: list[str]) -> bool:
    """Whether some excerpt (its title or text) mentions one of the names, as a word or a word's
    start ("Melanie" finds "Melanie's"), accents and case ignored. A name only spoken to ("Thanks,
    Caroline!") does not count: in a chat turn that is the listener, and the rest is the speaker's."""
    text = _fold(" ".join(f"{item.hit.title}\n{item.hit.text}" for item in items))
    for name in map(_fold, names):
        spoken_to = re.compile(rf"(?:,\s*|\b(?:{_GREETINGS})\s+){re.escape(name)}\w*(?=\s*[!?.,])")
        if re.search(rf"\b{re.escape(name)}", spoken_to.sub(" ", text)):
            return True
    return False


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
