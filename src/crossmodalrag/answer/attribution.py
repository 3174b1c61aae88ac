"""Where an answer sentence's words come from: which excerpt a claim rests on when the model cited
the wrong one or none, and which further excerpts hold the words its cited ones lack. Plain word
overlap, so the judge (answer/verify.py) is asked about the excerpt a sentence was copied from."""

from __future__ import annotations

import re

from crossmodalrag.answer.numbers import exempt, values_in
from crossmodalrag.answer.prompt import judge_excerpt
from crossmodalrag.answer.subjects import speaker
from crossmodalrag.answer.when import RELATIVE
from crossmodalrag.index.scripts import CJK_CHAR
from crossmodalrag.retrieval.snippets import KEY_LETTERS  # "rotates" and "rotation": one key
from crossmodalrag.retrieval.stopwords import stopwords_for
from crossmodalrag.types import Evidence, human_date
from crossmodalrag.written_dates import MONTHS

# A sentence of at least ATTRIBUTED_WORDS content words whose cited excerpts hold under MISCITED_SHARE
# of them, while another excerpt holds SOURCE_SHARE (or, in an answer citing nothing, MISCITED_SHARE),
# is judged against and cites that one (`word_source`): the README's own question was
# answered with the sample note's sentences cited to a diff that holds none of their words, and the
# judge, lenient by design, passed them; 3 of the sample's 9 answers cited nothing at all.
ATTRIBUTED_WORDS = 4
MISCITED_SHARE = 0.3
SOURCE_SHARE = 0.6
_WORD = re.compile(r"\w{3,}")
_ANY_WORD = re.compile(r"\w+")
_INNER_WORD = re.compile(r"(?<=[^\s.!?:;\[(\-])\s+([^\W\d_]+)\b")  # a word after another word, not at a sentence start
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*")  # "€1,850" is 1,850; "E1" holds no number
# A figure or date as written: numbers with at most one word between them ("3. Mai 2024", "7:42", "49,90").
_ALNUM = re.compile(r"[^\W_]+")
# A day of a month as written ("16 November 2026", "3. Mai", "Nov 16", "2026-11-16"): a name for
# `specific_words`, its numbers no figures of their own.
_MONTH = "|".join(sorted(map(re.escape, MONTHS), key=len, reverse=True))  # a month's names, longest first
_WRITTEN_DAY = re.compile(
    rf"(?<![\w.,])(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th|\.)?\s+(?:de\s+)?(?P<m1>{_MONTH})\b\.?"
    rf"|(?<!\w)(?P<m2>{_MONTH})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\b(?![.,:]\d))(?:,?\s+(?:del?\s+)?\d{{4}}\b)?"
    r"|(?<![\w.,])\d{4}-(?P<m3>\d{1,2})-(?P<d3>\d{1,2})\b",
    re.I,
)
_FIGURE = re.compile(r"(?<![\w.,])\d+(?:[\W_]+(?:[^\W\d_]+[\W_]+)?\d+)*")


def excerpts_holding_missing_words(
    claim: str, question: str, judged: list[Evidence], pool: list[Evidence]
) -> list[Evidence]:
    """The excerpts of `pool` beyond `judged` that hold a content word of `claim` none of `judged`
    holds, the question's own words aside: retrieval found every excerpt by them, so holding one says
    nothing of where the claim comes from ("Fly.io is the hosting platform used for Helios." was
    judged beside, and cited, every note naming Helios, an office move among them). When what is
    missing includes a number or a name (`specific_words`), only excerpts holding one of those: the
    topic words of a claim are in many excerpts, its figures in the one it comes from ("1,850 warm"
    was judged beside, and cited, "Budget cap €1,700" and "base rent EUR 1,540", which hold "1")."""
    specific = excerpts_holding_missing_specifics(claim, question, judged, pool)
    if specific is not None:
        return specific
    held = set().union(*(content_words(body_of(item)) for item in judged))
    missing = content_words(claim) - held - content_words(question)
    return [item for item in pool if item not in judged and missing & content_words(body_of(item))] if missing else []


def excerpts_holding_missing_specifics(
    claim: str, question: str, judged: list[Evidence], pool: list[Evidence]
) -> list[Evidence] | None:
    """The excerpts of `pool` beyond `judged` that hold a number or name of `claim` that none of
    `judged` nor the question holds; None when there is no such number or name."""
    held = set().union(*(specific_words(body_of(item)) for item in judged))
    missing = specific_words(claim) - held - specific_words(question) - content_words(question)
    if not missing:
        return None
    return [item for item in pool if item not in judged and missing & specific_words(body_of(item))]


def specific_words(text: str) -> set[str]:
    """The numbers ("1,850" whole, not "1" and "850") and the words capitalised inside a sentence
    (not opening it, where any word is), lowercase, function words aside: what a claim names,
    beside what it is about."""
    days, text = _written_days(text)
    names = {match.group(1).lower() for match in _INNER_WORD.finditer(text) if match.group(1)[0].isupper()}
    return set(_NUMBER.findall(text)) | days | (names - stopwords_for(sorted(names)))


def _written_days(text: str) -> tuple[set[str], str]:
    """The days of months `text` names, each keyed month-day whatever its form, and `text` without
    them: the "16" of "16 November 2026" is no figure, or it made a note about PostgreSQL 16 hold a
    date's number."""
    days: set[str] = set()

    def keyed(match: re.Match) -> str:
        month = match["m3"] or MONTHS[(match["m1"] or match["m2"]).lower()]
        days.add(f"{int(month)}-{int(match['d1'] or match['d2'] or match['d3'])}")
        return " "

    return days, _WRITTEN_DAY.sub(keyed, text)


def word_source(claim: str, claimed: list[Evidence], pool: list[Evidence]) -> Evidence | None:
    """The excerpt of `pool` that `claim`'s words come from, when the excerpts it claims to rest on
    (`claimed`: those it cites, else those its answer cites, else none) hold few of them: small
    models copy a sentence from one excerpt and cite the last ones they read, or cite nothing at
    all. None when the claim is short (a name, a date: its words may sit in a header, or nowhere),
    or no other excerpt clearly holds it."""
    words = content_words(claim)
    if len(words) < ATTRIBUTED_WORDS:
        return None

    def share(item: Evidence) -> float:
        return len(words & content_words(f"{item.hit.title} {judge_excerpt(item, claim)}")) / len(words)

    if max(map(share, claimed), default=0.0) >= MISCITED_SHARE:
        return None
    # Moving a citation the model made takes a clear source; giving one to an answer without any,
    # only an excerpt holding as much of it as a citation must.
    needed = SOURCE_SHARE if claimed else MISCITED_SHARE
    best = max(pool, key=share, default=None)  # the first in prompt order on a tie
    return best if best is not None and best not in claimed and share(best) >= needed else None


def figure_source(claim: str, question: str, judged: list[Evidence], pool: list[Evidence]) -> Evidence | None:
    """The first excerpt of `pool` (prompt order) whose text states every figure or date of `claim`
    (`figures`) when none of `judged` states any of them, in its text, title or header date: "Answer:
    3. Mai 2024 [E1]" cited the user's question ("Wann wurde die Heizungsanlage gewartet?"), the
    assistant's reply after it says "am 3. Mai 2024", and the judge passed it against the question
    (-0.87, within the claims' tolerance). None when the claim's figures are the question's, or
    only a count, a day or a year alone (counted or computed from "last year", stated nowhere)."""
    wanted = [figure for figure in figures(claim) if figure not in flat_text(question)]
    if not any(map(_specific, wanted)):
        return None
    if any(figure in flat_text(_held_text(item)) for item in judged for figure in wanted):
        return None
    if any(RELATIVE.search(body_of(item)) for item in judged):
        return None  # "yesterday" in a turn: the date is computed from its header, stated nowhere
    # Its body, not its header date: a turn written on the day a relative date means ("yesterday"
    # in the next day's turn) is not where the answer comes from.
    return next(
        (item for item in pool if item not in judged and all(f in flat_text(body_of(item)) for f in wanted)), None
    )


def figures(text: str) -> list[str]:
    """The figures and dates of `text`, each as `flat_text` writes it: "3. Mai 2024" is " 3 mai 2024 "."""
    return [flat_text(match.group(0)) for match in _FIGURE.finditer(text)]


def _specific(figure: str) -> bool:
    """More than one number ("3 mai 2024", "7 42"), or one that is no count, day or year ("49")."""
    values = values_in(figure)
    return len(figure.split()) > 1 or not all(map(exempt, values))


def flat_text(text: str) -> str:
    return f" {' '.join(_ALNUM.findall(text.lower()))} "


def _held_text(item: Evidence) -> str:
    dated = human_date(item.hit.timestamp) if item.hit.timestamp is not None else ""
    return f"{item.hit.title} {item.hit.text} {dated}"


def document_source(claim: str, short: bool, claimed: list[Evidence], pool: list[Evidence]) -> Evidence | None:
    """For a claim whose cited excerpts are not about what the question names (or not from its
    time), the document excerpt among those that are which holds it: the model cited the wrong one
    of several documents ("3.9" for "Which Python version is the minimum?" cited a release commit,
    the planning note beside it says "Python 3.9 is the minimum"). A short answer is matched by all
    its words, the first such excerpt in prompt order; a sentence as `word_source` would. Not for
    conversation turns: there a name is a person, and another person's turn holding the same words
    is the wrong person's answer (the question names the wrong one)."""
    documents = [item for item in pool if speaker(item) is None]
    if not short:
        return word_source(claim, claimed, documents)
    words = content_words(claim)
    holding = (item for item in documents if words and words <= content_words(f"{item.hit.title} {body_of(item)}"))
    return next(holding, None)


def unrelated_excerpts(claim: str, question: str, items: list[Evidence]) -> list[Evidence]:
    """The excerpts of `items` (those a passed claim rests on together) that share none of its own
    words, the question's aside, while another of them does: the judge reads them together, and one
    excerpt holding the claim carries any other beside it ("Her deputy is Bob Ramirez [E1][E2]",
    E2 a migration decision that only names Alice). Words are compared by their first KEY_LETTERS
    ("migrated", "migration"); a claim in Chinese or Japanese, whose words are runs of characters no
    excerpt need repeat whole, or of numbers alone, is left as it is."""
    own = _keys(claim) - _keys(question)
    if len(items) < 2 or not any(key.isalpha() for key in own) or CJK_CHAR.search(claim):
        return []  # a count ("2" to "how many …?") is in no excerpt: counted across them
    unrelated = [item for item in items if not own & _keys(f"{item.hit.title} {body_of(item)}")]
    return unrelated if len(unrelated) < len(items) else []


def off_topic(sentence: str, question: str, answer: str, items: list[Evidence]) -> bool:
    """Whether a support sentence shares no word (key) with the question or the short answer, and
    neither do the excerpts it rests on (`items`): in a small memory every note is retrieved, and the
    model retells them ("Answer: 3. Mai 2024" to when the heating was serviced went on with a train
    fare to Strasbourg and a flight to Seville, each passed against its own note)."""
    asked = _keys(question)
    if _keys(sentence) & (asked | _keys(answer)) or CJK_CHAR.search(sentence + question):
        return False  # Chinese and Japanese words are runs of characters no sentence need repeat whole
    return bool(items) and not any(asked & _keys(f"{item.hit.title} {body_of(item)}") for item in items)


def _keys(text: str) -> set[str]:
    return {word[:KEY_LETTERS] for word in content_words(text)}


def body_of(item: Evidence) -> str:
    return item.hit.text.split("\n", 1)[-1]  # without the breadcrumb line


def content_words(sentence: str) -> set[str]:
    """The words of a sentence that carry its content: lowercase, without the function words of its
    language. A sentence all of whose content words an earlier one said repeats it."""
    words = _ANY_WORD.findall(sentence.lower())
    return set(words) - stopwords_for(words)


def closest_excerpt(claim: str, items: list[Evidence]) -> Evidence:
    """The excerpt sharing the most words with `claim` (the first on a tie): what a support sentence
    that cites nothing is judged against."""
    words = set(_WORD.findall(claim.lower()))
    bodies = [body_of(item).lower() for item in items]
    return items[max(range(len(items)), key=lambda i: len(words & set(_WORD.findall(bodies[i]))))]
