"""Who a question is about: the names it mentions, which an answer's cited evidence must be about too.

A small judge model reads "Melanie: I ran a charity race" as support for "what did Caroline realize
after her charity race?": the words match and the person does not. The check here needs no model: a
sentence that answers a question naming Caroline must cite some excerpt about Caroline. In a
conversation she takes part in, that is one of her own turns: what a person did or said is in their
words, not in the other side's reply, nor in the session title or the breadcrumb, which name everyone
(LoCoMo dev: a turn by the named person is among the gold evidence of 95-100% of answerable questions
and of 26% of adversarial ones). Elsewhere (notes, PDFs, people who only come up in a chat) an excerpt
is about her when it mentions her in its title or text, or when a word of the path it is known by
in memory names her: notes in a project's folder, or named after it, rarely repeat its name
("work/2025-01-20-helios-pricing.md" says "29 euros per month", not "Helios costs ...").
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from crossmodalrag.retrieval.ranking import CONVERSATION  # its chunks are turns opening with "Speaker: "
from crossmodalrag.retrieval.stopwords import ANY_LANGUAGE, guess_language
from crossmodalrag.types import Evidence

# A capitalised word (letters only, possessive allowed), so acronyms and code identifiers are not names.
_CAPITALISED = re.compile(r"\b([A-Z][a-z\u00df-\u024f]{2,})(?:['\u2019]s)?\b")
_WORD = re.compile(r"[\w'\u2019]+")
CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow".split()
)
_GREETINGS = "hey|hi|hello|thanks|thank you|yes|yep|yeah|wow|oh|dear|sorry|congrats|congratulations"
_SPEAKER = re.compile(r"\s*([^\s:][^:\n]{0,39}):\s")
MIN_REPEATED_WORDS = 2


def named_subjects(question: str) -> list[str]:
    """Capitalised words inside the question that look like names (lowercased), first one skipped
    since any sentence starts with a capital. Empty for German, which capitalises every noun."""
    return list(dict.fromkeys(match.group(1).lower() for match in _name_matches(question)))


def full_names(question: str) -> list[str]:
    """The names of `named_subjects` with the names right after them, each run one person ("john
    millar"): what a message names, where "John or Millar" would be two people."""
    runs: list[list[re.Match[str]]] = []
    for match in _name_matches(question):
        if runs and not question[runs[-1][-1].end() : match.start()].strip():
            runs[-1].append(match)
        else:
            runs.append([match])
    return list(dict.fromkeys(" ".join(m.group(1).lower() for m in run) for run in runs))


def _name_matches(question: str) -> Iterable[re.Match[str]]:
    words = [w.lower() for w in _WORD.findall(question)]
    if guess_language(words) == "de":
        return
    for match in _CAPITALISED.finditer(question):
        before = question[: match.start()].rstrip()
        if not before or before[-1] in ".!?:;\"'(":
            continue  # the first word of a sentence
        name = match.group(1).lower()
        if name not in ANY_LANGUAGE and name not in CALENDAR:
            yield match


def excerpts_about(items: list[Evidence], names: list[str], evidence: list[Evidence]) -> list[Evidence]:
    """Those of `items` (the excerpts a sentence cites) that are about one of the names; `evidence`
    (everything retrieved) tells who takes part in the conversations at hand."""
    participants = _participants(evidence)
    folded = [_fold(name) for name in names]
    return [item for item in items if any(_is_about(item, name, participants) for name in folded)]


def subject_share(question: str, evidence: list[Evidence]) -> float | None:
    """The share of `evidence` in the own words of the people the question names who take part in
    the retrieved conversations; None when it names none of them. What a person did or said is
    mostly in their own turns, so the best matches of a question about them are mostly theirs:
    when the best matches are someone else's, the question usually has the wrong person (LoCoMo
    dev, 5 excerpts: 2 or more are the named person's for 37 of 38 answerable questions, fewer for
    5 of 39 adversarial ones: bench/calibrate_margin.py)."""
    participants = _participants(evidence)
    names = [name for name in map(_fold, named_subjects(question)) if name in participants]
    if not names or not evidence:
        return None
    return len(excerpts_about(evidence, names, evidence)) / len(evidence)


def neighbour_turns(claim: str, items: list[Evidence], names: list[str], evidence: list[Evidence]) -> list[Evidence]:
    """The named people's own turns in `evidence` next to one of `items` (replying to it, or the turn
    it replies to: a turn's breadcrumb ends with `re: ` and the turn before it, clipped) that hold
    one of `claim`'s own words, or any such turn when it has none (a date, a number). The model often
    cites the turn next to the one it answers from: the other side's question ("You play any
    instruments?") before the named person's answer, or their "Congrats on winning!" after it."""
    participants = _participants(evidence)
    folded = [_fold(name) for name in names]
    words = _content_words(claim, participants)
    return [
        turn
        for turn in evidence
        if any(_is_about(turn, name, participants) for name in folded)
        and any(_replies(turn, item) or _replies(item, turn) for item in items)
        and (not words or words & _content_words(_body(turn.hit.text), participants))
    ]


def _replies(turn: Evidence, earlier: Evidence) -> bool:
    """Whether `turn`'s breadcrumb says it answers `earlier` (same conversation, next turn)."""
    crumb, _, _ = turn.hit.text.partition("\n")
    _, marker, before = crumb.partition(" · re: ")
    before = before.rstrip("…").strip()
    return (
        bool(marker and before)
        and turn.hit.source_uri == earlier.hit.source_uri
        and (" ".join(_body(earlier.hit.text).split()).startswith(" ".join(before.split())))
    )


def another_subject(claim: str, question: str, evidence: list[Evidence]) -> str | None:
    """The other participant a sentence of the answer is about, when the question names someone
    taking part in the retrieved conversations and the sentence is not about them; else None.
    A small model answering a question that names the wrong person copies the other side's turn
    ("Joanna's brother wrote her notes", asked what Nate got from his brother) and cites the named
    person's turn beside it: that turn passes the names check and the judge reads words, not people.
    Two signs, either enough: the sentence opens with the other person's name ("John used turmeric")
    and never names the person asked about; or its own words (not the question's, nor names, dates,
    numbers) come from the other person's turns: at least MIN_REPEATED_WORDS of them, and twice as
    many as from the named person's own turns."""
    participants = _participants(evidence)
    named = {name for name in map(_fold, named_subjects(question)) if name in participants}
    if not named or not participants - named:
        return None
    words = _content_words(claim, participants) - _content_words(question, participants)
    opener = re.match(r"\W*([^\W\d_]+)", _fold(claim))
    if words and opener and opener.group(1) in participants - named and not _text_mentions(claim, named):
        return opener.group(1)
    said: dict[str, set[str]] = {}
    for item in evidence:
        if (who := speaker(item)) is not None:
            said.setdefault(first_name(who), set()).update(_content_words(_body(item.hit.text), participants))
    own = max((len(words & said.get(name, set())) for name in named), default=0)
    repeated = {who: len(words & heard) for who, heard in said.items() if who not in named}
    who = max(repeated, key=repeated.get, default=None)
    if who is not None and repeated[who] >= max(MIN_REPEATED_WORDS, 2 * own):
        return who
    return None


def _content_words(text: str, names: set[str]) -> set[str]:
    """Lowercased, unaccented words of 3+ letters that are not function words, calendar words,
    numbers or `names`, cut to their first five letters ("notes" ~ "note", "memories" ~ "memory")."""
    words = (_fold(word) for word in re.findall(r"[^\W\d_]{3,}", text))
    return {word[:5] for word in words if word not in ANY_LANGUAGE and word not in CALENDAR and word not in names}


def _participants(evidence: list[Evidence]) -> set[str]:
    """The first names of whoever speaks a turn in `evidence` (folded)."""
    return {first_name(who) for who in map(speaker, evidence) if who}


def _is_about(item: Evidence, name: str, participants: set[str]) -> bool:
    who = speaker(item)
    if who is not None and first_name(who) == name:
        return True
    if who is not None and name in participants:
        return False  # another participant's turn: their words, not hers
    return mentions_any([item], [name], own_words=True) or name in path_words(item)


def path_words(item: Evidence) -> set[str]:
    """The words of the path a source is known by in memory (folded, split at anything not a letter
    or digit): a note's path inside its vault without the heading after "#", a PDF's or an image's
    file name, a commit's repository and file. A conversation's is its session title, which names
    everyone taking part, so it has none. Folders above what was ingested are left out: they name
    the machine and its user ("/home/ana/..."), not what the source is about."""
    if item.hit.source_type == CONVERSATION:
        return set()
    path = item.hit.locator.split("#", 1)[0]
    return {word for word in re.split(r"[\W_]+", _fold(path)) if word}


def speaker(item: Evidence) -> str | None:
    """Who spoke a conversation turn (its body opens with `Name: `), folded; None for other evidence."""
    if item.hit.source_type != CONVERSATION:
        return None
    match = _SPEAKER.match(_body(item.hit.text))
    return _fold(match.group(1)) if match else None


def first_name(who: str) -> str:
    return who.split()[0]


def mentions_any(items: list[Evidence], names: list[str], own_words: bool = False) -> bool:
    """Whether some excerpt (its title or text) mentions one of the names, as a word or a word's
    start ("Melanie" finds "Melanie's"), accents and case ignored. A name only spoken to ("Thanks,
    Caroline!") does not count: in a chat turn that is the listener, and the rest is the speaker's.
    `own_words`: a conversation turn's body only, without the title and breadcrumb."""
    texts = (_own_text(item) if own_words else f"{item.hit.title}\n{item.hit.text}" for item in items)
    return _text_mentions(" ".join(texts), names)


def _text_mentions(text: str, names: Iterable[str]) -> bool:
    text = _fold(text)
    for name in map(_fold, names):
        spoken_to = re.compile(rf"(?:,\s*|\b(?:{_GREETINGS})\s+){re.escape(name)}\w*(?=\s*[!?.,])")
        if re.search(rf"\b{re.escape(name)}", spoken_to.sub(" ", text)):
            return True
    return False


def _own_text(item: Evidence) -> str:
    hit = item.hit
    return _body(hit.text) if hit.source_type == CONVERSATION else f"{hit.title}\n{hit.text}"


def _body(text: str) -> str:
    """A chunk without its breadcrumb line (for a turn: the session, the day and the turn before)."""
    return text.split("\n", 1)[-1]


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))
