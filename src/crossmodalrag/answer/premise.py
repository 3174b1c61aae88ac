"""What a question takes for granted that none of the evidence speaks of.

A question with one detail swapped ("For how long has Nate had his snakes?" when he told of his
turtles; "Where was the photoshoot done for John's fragrance deal?" of a shoot for outdoor gear)
finds the excerpt about the rest of it, and the judge reads that excerpt as the answer: every other
word matches. Asked narrowly instead, whether an excerpt speaks of snakes, the same model says no.
So a content word of the question that no retrieved excerpt holds (by stem) is put to the model
against the excerpts the answer rests on, and a clear no withholds the answer.

Only for English questions asking what, who, where, ... (not yes/no questions, whose premise is
what they ask; nor statements, conjectures or questions offering alternatives), answered from
conversation turns: the prompt is English, and the measurement was on conversations. Over
documents the model says no to the words of a long question's instructions and reasoning ("What
drove ...", "Basing your judgments off of ..."): FinanceBench dev, every question answerable, would
lose several (bench/premise.py --financebench). LoCoMo dev (bench/premise.py): of the questions the
gates let through, a margin below -0.25 for one such word refused 11 of 157 adversarial questions
and 1 of 180 answerable ones.
"""

from __future__ import annotations

import re

from crossmodalrag.answer.echo import stem
from crossmodalrag.answer.forms import AUXILIARY, offers_alternatives, query_form
from crossmodalrag.answer.subjects import CALENDAR
from crossmodalrag.index.scripts import fold
from crossmodalrag.retrieval.ranking import CONVERSATION
from crossmodalrag.retrieval.stopwords import ANY_LANGUAGE, guess_language
from crossmodalrag.types import Evidence

MAX_WORDS = 3  # a question rarely has more than one swapped detail; each word costs a short check
_WORD = re.compile(r"[^\W\d_]{3,}")
_YES_NO = AUXILIARY | {"shall", "may"}  # the words a yes/no question opens with
# The words that ask rather than presuppose ("what kind of", "how often", "what is the name of").
_ASKING = frozenset("what which who whom whose when where why how kind type sort name many much often long".split())


def presupposes(question: str) -> bool:
    """Whether the question asks about something it takes as given: an English question opening
    with a question word, not a yes/no question, a statement, a conjecture or a choice."""
    words = [w.lower() for w in re.findall(r"\w+", question)]
    return (
        bool(words)
        and question.isascii()
        and guess_language(words) == "en"
        and words[0] not in _YES_NO
        and query_form(question) == "question"
        and not offers_alternatives(question)
    )


def in_conversations(items: list[Evidence]) -> bool:
    """Whether the excerpts an answer rests on are all conversation turns (where the check was fitted)."""
    return bool(items) and all(item.hit.source_type == CONVERSATION for item in items)


def unmentioned_words(question: str, evidence: list[Evidence]) -> list[str]:
    """The question's content words (not function, calendar or question words, nor capitalised ones)
    that no excerpt holds in any form of the word. A name or a title ("When did Joanna first watch
    "Eternal Sunshine of the Spotless Mind"?") is often "it" or "that movie" in the very turn that
    answers, named turns before (LoCoMo dev: that question, answered right, was withheld for
    "eternal"; of the 12 adversarial questions refused on the fit set, one was for a capitalised
    word: a quoted title)."""
    if not evidence:
        return []
    held = set().union(*(_stems(item.hit.text.split("\n", 1)[-1]) for item in evidence))  # not the breadcrumb
    words = []
    for word in (fold(w.lower()) for w in _WORD.findall(question) if not w[0].isupper()):
        if word in ANY_LANGUAGE or word in _ASKING or word in CALENDAR:
            continue
        if stem(word, "en") not in held and word not in words:
            words.append(word)
    return words[:MAX_WORDS]


def _stems(text: str) -> set[str]:
    return {stem(word, "en") for word in _WORD.findall(text)}
