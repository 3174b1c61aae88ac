"""Knowledge updates without a model: does a new memory restate an old one's fact with another value?

"The staging key rotates weekly" after "Deploys need the VPN; the staging key rotates monthly":
a clause of each says the same thing about the same subject except for one slot. In content words,
old = P A S and new = P B S: the same start P (the subject, its first word, and usually the
attribute), the same end S, and one contiguous run replaced (A -> B, one to three words each: the
old and the new value), with P and S together at least two words and at least half of either
clause. A clause that only adds words ("... rotates monthly, at noon") is an addition, not an
update; a clause that differs only by a negation ("does not support") is one. Two words swapped in
different places are a different sentence, not a changed value.

The new memory must also be about that fact: the clause holds at least half of its content words.
A long message that contains one sentence shaped like an older one ("Thanks, Mel." after
"Thanks, Melanie.", inside chat turns stored one by one) states no update.
Stemming is crude on purpose (rotates/rotated, monthly/month); the figures are in
docs/benchmarks.md (bench/agent_updates.py, and bench/agent_mcp.py for chat turns stored one by one).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from crossmodalrag.retrieval.stopwords import ENGLISH

NEGATIONS = frozenset({"not", "no", "never", "dont", "doesnt", "isnt", "wont", "cannot", "nor"})
STOP = ENGLISH - NEGATIONS | {"now", "currently", "instead", "actually", "anymore", "still"}
SENTENCES = re.compile(r"(?:[^.;!?\n]|[.](?=\S))+[.;!?]*")  # "3.10" stays whole
CLAUSES = re.compile(r",\s+(?:and|but|so)\s+|\s+but\s+")
WORDS = re.compile(r"[a-z0-9][a-z0-9_'-]*")
SUFFIXES = ("ingly", "edly", "ing", "ly", "ed", "es", "s")
MAX_CHANGED = 3
LABEL = re.compile(r"\s*([A-Z][\w'-]*(?: [A-Z][\w'-]*)?):\s+")
MIN_SHARE_OF_NEW = 0.5  # the updating clause's share of the new memory's content words
ASIDES = re.compile(r"\[[^\[\]\n]*\]")


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
    (a question, a greeting, a cheer: "Hey Mel!" is no value of Mel to update), and neither does a
    bracketed aside, such as the caption of a shared photo ("[shares a photo: a bowl with ...]")."""
    found = []
    for sentence in SENTENCES.findall(ASIDES.sub(" ", text)):
        if sentence.rstrip().endswith(("?", "!")):
            continue
        found += [words for part in CLAUSES.split(sentence) if len(words := content_words(part)) >= 2]
    return found


def split_label(text: str) -> tuple[str, str]:
    """A leading "Name:" label (a transcript's speaker, a topic) and the text after it. The label says
    who spoke or what about, so it must match, but it is not the sentence's subject: "Jon: Thanks for
    the support" and "Jon: Thanks for having my back" share no subject."""
    match = LABEL.match(text)
    return (match.group(1).lower(), text[match.end() :]) if match else ("", text)


def restates_with_new_value(old: str, new: str) -> bool:
    """Is `new` an update of a fact stated in `old` (same subject, changed value)?"""
    (old_label, old), (new_label, new) = split_label(old), split_label(new)
    if old_label and new_label and old_label != new_label:
        return False  # "Staging: ..." and "Production: ..." are about different things
    new_clauses = clauses(new)
    total = sum(len(words) for words in new_clauses)
    return any(_clause_update(o, n) for n in new_clauses if len(n) >= MIN_SHARE_OF_NEW * total for o in clauses(old))


def _clause_update(old: list[str], new: list[str]) -> bool:
    if old[0] != new[0]:
        return False  # another subject: "Alice prefers tea" is no update of "Bob prefers tea"
    changes = [op for op in SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if len(changes) != 1:
        return False  # the same, or changed in more than one place
    _, old_start, old_end, new_start, new_end = changes[0]
    gone, added = old[old_start:old_end], new[new_start:new_end]
    shared = len(old) - len(gone)
    if shared < 2 or shared < 0.5 * max(len(old), len(new)):
        return False
    if set(gone) ^ set(added) and set(gone) ^ set(added) <= NEGATIONS:
        return True  # "supports" -> "does not support"
    return 1 <= len(gone) <= MAX_CHANGED and 1 <= len(added) <= MAX_CHANGED
