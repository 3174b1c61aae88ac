"""Which hedges ("No excerpt directly states ...") to leave out of an answer whose short answer passed.

A small model often closes a good answer by saying the evidence lacks it: "Answer: PostgreSQL 16 [E1]
... No excerpt directly states that Helios uses PostgreSQL 16." Such a sentence is no claim to judge,
but shown, it denies the answer before it. One about the question's own subject, or naming the short
answer itself, goes; one about another part ("it does not say when", to a question why) stays.
Words are compared by their stems, as the index compares them (index/fts.py: Porter for every word,
Snowball stems for Spanish, German and Russian text: index/stems.py), so "uses" names "use".
"""

from __future__ import annotations

import re

from crossmodalrag.answer.attribution import content_words
from crossmodalrag.answer.citations import without_absence
from crossmodalrag.index.scripts import fold
from crossmodalrag.index.stems import SNOWBALL, snowball
from crossmodalrag.retrieval.stopwords import guess_language

HEDGE_SHARE = 0.5  # a hedge naming at least this share of the question's content words is about it
# What a hedge says around what it finds missing ("The evidence does not explicitly say ...").
HEDGE_WORDS = frozenset(
    "evidence excerpt excerpts context information explicitly directly specifically clearly".split()
)
# "what" and "which" ask for anything: "does not say what it costs" answers "How much ...?" too.
QUESTION_WORDS = frozenset("when where who whom whose why how".split())
_WORD = re.compile(r"\w+")
ASKING = QUESTION_WORDS | frozenset("what which whether if".split())  # what a hedge asks with, it says is missing
# Where a hedge lists the things it says are missing: "Bob Ramirez or the timing", "neither X nor Y".
_ALTERNATIVES = re.compile(r",|;|\b(?:or|nor|neither|either)\b", re.IGNORECASE)
PREFIX_MIN_LETTERS = 4  # a stem this long also names its longer forms ("month" in "monthly")
# FTS syntax typed into a question is plain text to the index (index/fts.py), and no content of the
# question: '"Helios" AND pricing OR NEAR(cost, 5) -- what's the team plan price?' asks about pricing.
# A question why, and what a hedge says is missing when it is the reason ("the reason for", "why").
_WHY = re.compile(r"\b(?:why|reasons?|cause|motive|warum|wieso|weshalb|grund|por ?qu[eé]|motivo|raz[oó]n)\b", re.I)
_FTS_OPERATOR = re.compile(r"\b(?:AND|OR|NOT)\b|\bNEAR\s*\(|,\s*\d+\s*\)")


def about_the_question(hedge: str, question: str) -> bool:
    """Whether `hedge` names at least HEDGE_SHARE of the question's content words, or says nothing
    is missing but what the question names: "No excerpt directly states the charge for the boiler."
    to "How much did Jon Millar charge for the boiler?" names only two of its five words."""
    asked = question_words(question)
    if not asked or asks_another_thing(hedge, question):
        return False
    missing = content_words(without_absence(hedge)) - HEDGE_WORDS
    named = named_in(asked, content_words(hedge))
    return len(named) >= HEDGE_SHARE * len(asked) or bool(missing) and named_in(missing, asked) == missing


def doubts_the_reason(hedge: str, question: str) -> bool:
    """Whether, to a question why, `hedge` says the evidence does not state the reason: the model's
    own doubt that what it answered is one. The judge checks that the excerpts say what a sentence
    says, not that it is the reason: "We moved Kestrel to PostgreSQL because Jonas Weber proposed it"
    passed (+0.39), the decision note does say he proposed it, and with the model's "No excerpt
    directly states the reason for moving Kestrel to PostgreSQL." left out the user read a proposal
    as the reason. Kept, it reads as a caveat beside an answer that may still be one."""
    return bool(_WHY.search(question)) and bool(_WHY.search(without_absence(hedge)))


def denies_what_is_there(hedge: str, excerpts: list[str]) -> bool:
    """Whether `hedge` says the evidence lacks something these excerpts name: "No excerpt mentions
    Bob Ramirez or the timing of the migration." after an answer citing "Alice Chen and Bob Ramirez
    migrated ...". Each thing it lists as missing ("X or Y", "neither X nor Y") must be missing for
    it to be true, so one whose every content word the excerpts name makes it false. One asking with
    a question word ("does not say when Bob left") says a kind of thing is missing, which no word in
    an excerpt shows is there."""
    present = content_words(" ".join(excerpts))
    for missing in _ALTERNATIVES.split(without_absence(hedge)):
        words = content_words(missing) - HEDGE_WORDS
        if words and not set(_WORD.findall(missing.lower())) & ASKING and named_in(words, present) == words:
            return True
    return False


def asks_another_thing(hedge: str, question: str) -> bool:
    """Whether the hedge says what is missing by a question word the question does not ask with:
    "The evidence does not say when I rewrote the tokenizer." to "Why did I rewrite the tokenizer?"."""
    missing = set(_WORD.findall(without_absence(hedge).lower())) & QUESTION_WORDS
    return bool(missing) and not missing & set(_WORD.findall(question.lower()))


def names_the_answer(hedge: str, short_claim: str) -> bool:
    """Whether `hedge` names every content word of the short answer: it says the answer is not in
    the evidence, which the short answer's passed check says it is."""
    answered = content_words(short_claim)
    return bool(answered) and named_in(answered, content_words(hedge)) == answered


def question_words(question: str) -> set[str]:
    """The question's content words, without the FTS operators typed into it."""
    return content_words(_FTS_OPERATOR.sub(" ", question))


def named_in(asked: set[str], words: set[str]) -> set[str]:
    """The words of `asked` a sentence of these `words` names, by stem, a longer form of one included
    ("monthly" names "month" of "How much does Helios cost per month?")."""
    language = guess_language(sorted(asked | words))
    stems = {stem_as_indexed(word, language) for word in words}

    def named(word: str) -> bool:
        own = stem_as_indexed(word, language)
        return own in stems or (len(own) >= PREFIX_MIN_LETTERS and any(s.startswith(own) for s in stems))

    return {word for word in asked if named(word)}


def stem_as_indexed(word: str, language: str) -> str:
    """The stem the index gives a lowercase word: Snowball's in Spanish, German and Russian text,
    Porter's otherwise (numbers and other non-words stay themselves)."""
    folded = fold(word)
    if not folded.isalpha():
        return folded
    return snowball(SNOWBALL.get(language, "porter")).stemWord(folded)
