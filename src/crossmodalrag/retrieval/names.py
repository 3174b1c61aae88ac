"""The names a question uses that nothing in memory holds: what it asks about is not stored.

The coverage gate (gate.py) refuses only evidence sharing almost nothing with the question, since
words are paraphrased ("capex" for "capital expenditures"). Names are not: a question about AMCOR,
Kenvue or Upjohn in a memory where no chunk has that word at all cannot be answered from it, however
well the rest of its words match other sources. FinanceBench dev (bench/gate_documents.py), each
question asked of a memory holding only other companies' filings: 15 of its 57 questions are refused
for a name nowhere in it (AMCOR, Adobe, JnJ, Kenvue, Upjohn, ...), and asked of the memory with its
filing, none; end to end, the model had answered 4 of the first 20 from another company's filing, 2
of them among those.

A name here is a word inside the question (not its first) that is capitalised and has lower-case
letters ("Adobe", "JnJ", "PepsiCo", "Zürich"), or is all capitals and at least five letters long
("AMCOR"; shorter ones are mostly a field's abbreviations, "COGS", "FY", which its texts spell out).
English questions only: German capitalises every noun, and the multilingual dev sets (es, vi) spell
names otherwise than their paragraphs ("Ghandi", "Canaria" of "Canarias"). A name sharing its first
five letters with an indexed word counts as known ("Himalayan" of "Himalayas"). The gate reads them
only when the best evidence is a document (gate.py `SHORT_KINDS`).
"""

from __future__ import annotations

import calendar
import re
import sqlite3
from functools import partial

from crossmodalrag.answer.forms import query_form
from crossmodalrag.index import fts
from crossmodalrag.retrieval.stopwords import ANY_LANGUAGE, ENGLISH, guess_language

# Latin letters (the scripts whose case marks a name), and digits after the first letter: the index
# holds "oauth2", "ipv6", "word2vec" whole, and their letters alone ("OAuth", "IPv") are in no chunk.
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff][0-9A-Za-z\u00c0-\u024f\u1e00-\u1eff]*")
_CALENDAR = (*calendar.month_name, *calendar.month_abbr, *calendar.day_name, *calendar.day_abbr)
_NOT_NAMES = frozenset([name.lower() for name in _CALENDAR if name] + ["sept", "today", "yesterday", "tomorrow"])
MIN_LETTERS = 3  # "Dr", "Mr", "St": titles and abbreviations, not names
MIN_CAPITALS = 5  # an all-capitals word this long is a name; shorter, mostly an abbreviation
STEM_LETTERS = 5  # a longer name is known when some indexed word shares this many first letters


def question_names(query: str) -> list[str]:
    """The name-like words of a question, in order, once each (see the module docstring)."""
    words = [w.lower() for w in _WORD.findall(query)]
    if guess_language(words) != "en" or not ENGLISH.intersection(words):  # English by its own words, not by default
        return []
    names: list[str] = []
    for match in _WORD.finditer(query):
        word, before = match.group(0), query[: match.start()].rstrip()
        if not before or before[-1] in ".!?:;\"'(“‘¿¡":
            continue  # a sentence's first word is capitalised anyway
        title_case = word[0].isupper() and any(c.islower() for c in word[1:]) and len(word) >= MIN_LETTERS
        capitals = word.isupper() and sum(c.isalpha() for c in word) >= MIN_CAPITALS  # "FY2023": two
        if (title_case or capitals) and word.lower() not in ANY_LANGUAGE and word.lower() not in _NOT_NAMES:
            names.append(word)
    return list(dict.fromkeys(names))


def unknown_names(conn: sqlite3.Connection, query: str) -> list[str]:
    """The names of a question (not a statement or a guess: what "would she ...?" asks about is
    often not stored by design) that no indexed chunk holds, as the index spells words."""
    names = question_names(query) if query_form(query) == "question" else []
    if not names:
        return []
    analyzed = fts.analyze(conn, names)
    tokens = sorted({token for found in analyzed for token in found})
    if not tokens:
        return []
    _, frequencies = fts.document_frequencies(conn, tokens)
    return [
        name
        for name, found in zip(names, analyzed, strict=True)
        if found and not any(map(frequencies.get, found)) and not any(map(partial(_stem_known, conn), found))
    ]


def _stem_known(conn: sqlite3.Connection, token: str) -> bool:
    """A name's other forms ("Himalayan" of "Himalayas", "European" of "Europe", "Shelly" of
    "Shelley") are not misses: a long name is known when an indexed word shares its first letters."""
    return len(token) > STEM_LETTERS and fts.has_prefix(conn, token[:STEM_LETTERS])
