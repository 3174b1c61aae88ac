"""Knowledge updates without a model: does a new memory restate an old one's fact with another value?

"The staging key rotates weekly" after "Deploys need the VPN; the staging key rotates monthly":
some clause of each has the same subject (first content word), most content words in common,
and each side has one to three words the other lacks (the old and the new value). A clause
that only adds words ("… rotates monthly, at noon") is an addition, not an update; a negation
on one side alone is a change. Stemming is crude on purpose (rotates/rotated, monthly/month);
the figures are in docs/benchmarks.md (bench/agent_updates.py).
"""

from __future__ import annotations

import re

from crossmodalrag.retrieval.stopwords import ENGLISH

NEGATIONS = frozenset({"not", "no", "never", "dont", "doesnt", "isnt", "wont", "cannot", "nor"})
STOP = ENGLISH - NEGATIONS | {"now", "currently", "instead", "actually", "anymore", "still"}
SENTENCES = re.compile(r"(?:[^.;!?\n]|[.](?=\S))+[.;!?]*")  # "3.10" stays whole
CLAUSES = re.compile(r",\s+(?:and|but|so)\s+|\s+but\s+")
WORDS = re.compile(r"[a-z0-9][a-z0-9_'-]*")
SUFFIXES = ("ingly", "edly", "ing", "ly", "ed", "es", "s")
MAX_CHANGED = 3


def stem(word: str) -> str:
    word = word.replace("'", "")
    for suffix in SUFFIXES:
        if len(word) - len(suffix) >= 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(clause: str) -> list[str]:
    """The clause's words that carry its fact, stemmed, in order."""
    return [stem(w) for w in WORDS.findall(clause.lower()) if w.replace("'", "") not in STOP]


def clauses(text: str) -> list[list[str]]:
    """The content words of each statement in the text. A sentence ending in `?` or `!` states no fact
    (a question, a greeting, a cheer: "Hey Mel!" is no value of Mel to update)."""
    found = []
    for sentence in SENTENCES.findall(text):
        if sentence.rstrip().endswith(("?", "!")):
            continue
        found += [words for part in CLAUSES.split(sentence) if len(words := content_words(part)) >= 2]
    return found


def restates_with_new_value(old: str, new: str) -> bool:
    """Is `new` an update of a fact stated in `old` (same subject, changed value)?"""
    return any(_clause_update(o, n) for o in clauses(old) for n in clauses(new))


def _clause_update(old: list[str], new: list[str]) -> bool:
    if old[0] != new[0]:
        return False  # another subject: "Alice prefers tea" is no update of "Bob prefers tea"
    before, after = set(old), set(new)
    shared = before & after
    gone, added = before - after, after - before
    if len(shared) < 2 or len(shared) < 0.5 * max(len(before), len(after)):
        return False
    if (gone | added) & NEGATIONS:
        return True
    return 1 <= len(gone) <= MAX_CHANGED and 1 <= len(added) <= MAX_CHANGED
