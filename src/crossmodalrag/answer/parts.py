"""The parts of a model's answer: the short answer (the first sentence of its "Answer:" line) and
the support sentences after it, without the labels, list markers and citation lines around them;
the short answer as `--json` carries it."""

from __future__ import annotations

import re

from crossmodalrag.answer.citations import CITATION, cited_ids, sentences
from crossmodalrag.answer.echo import without_echo
from crossmodalrag.answer.prompt import cited_excerpts
from crossmodalrag.answer.when import dated_answer, moved_date, with_day
from crossmodalrag.retrieval.stopwords import stopwords_for
from crossmodalrag.types import Evidence

# "Answer:", "**Answer:** ", "The answer:": the label, not a citation right after it ("Answer: [E1] Yes").
# After the colon only blanks and markdown go: "€55,000", "$1,200", "~700 MB", "<1%" keep their sign.
ANSWER_LINE = re.compile(r"^[^\w\[]*(?:the\s+)?answer[^\w\[]*:[\s*_`\"'“”]*", re.IGNORECASE)
_LABEL = re.compile(r"^\W*\w+\W*")  # "Support:" before a line's citations
_HEADING = re.compile(r"^\W*\w+(?: \w+)?\W*:\W*$")  # "Support:" or "**Answer:**" alone on its line
# What opens a support sentence without being part of its claim: a list marker ("- ", "2. "), a
# label ("Explanation: "), a stray colon. Small models write them inline too ("... [E1] - She ..."),
# so each sentence loses its own; a line loses its own first, or `sentences` cuts "2." off as one.
_LEAD = re.compile(r"^(?:[-*•–]\s+|\d{1,2}[.)]\s+|:\s*|(?:support|explanation|reason|evidence)\s*:\s*)+", re.I)
# Citations with what joins them ("Yes, [E3] and [E4]", "hiking [E1] and [E3]"): gone from a short
# answer together, or it reads "Yes, and"; then whatever still dangles at its end.
_CITATION_LIST = re.compile(rf"(?:,?\s*(?:(?:and|or|&)\s*)?{CITATION.pattern})+", re.IGNORECASE)
_DANGLING = re.compile(r"(?:[\s,;:]|\b(?:and|or)\b)+$", re.IGNORECASE)
# A note's tag ("#重构", "#heating"), which the model copies from an excerpt to the end of its answer:
# "#重构 [E1][E2]" was judged as a claim and passed, citing an excerpt that has nothing to do with it.
_TAG = re.compile(r"(?<![\w&])#\w[\w/-]*")
_LAST_END = re.compile(r"[.!?。！？]([^.!?。！？]*)$")  # what follows a sentence's last mark
# An excerpt's label written as if it were a sentence ("... every 90 days. - E2 [E2]"): no claim.
_LABELS_ONLY = re.compile(r"[\W_]*(?:E\d{1,3}[\W_]*)+", re.IGNORECASE)
# The "Answer:" label anywhere in the text, its markdown with it ("... Schröder? [E1] **Answer:** ...").
_ANSWER_LABEL = re.compile(r"[*_]*\banswer[*_ ]*:", re.IGNORECASE)
_ASKED = ("?", "？")  # how a question ends, in Latin and CJK punctuation


def without_asked_question(text: str) -> str:
    """`text` from its "Answer:" label on when all before it is a question: a small model repeats the
    question first ("WER übernimmt das Lagerverwaltungssystem von Frau Schröder? [E1] Answer: Herrn
    Özdemir [E1]"), and the question, taken for the short answer, was judged a supported claim."""
    label = _ANSWER_LABEL.search(text)
    if label is None or label.start() == 0:
        return text
    asked = [piece for line in text[: label.start()].splitlines() for piece in sentences(CITATION.sub("", line))]
    if not asked or not all(piece.rstrip(" *_\"'“”").endswith(_ASKED) for piece in asked):
        return text
    return text[label.start() :]


def split_answer(text: str) -> list[tuple[str, bool]]:
    """(sentence, is the short answer) in order. The short answer is the first sentence of the first
    "Answer:" line: models often run on after it on the same line ("Lots of homes were ruined. It
    was a serious challenge"), and those sentences are support, each judged on its own. A line of
    nothing but citations ("Support: [E3]") gives them to the sentence before it; a heading alone
    ("Support:") is no sentence, and after a lone "Answer:" the next line is the answer. The question
    repeated before the "Answer:" label is no sentence of it either (without_asked_question)."""
    parts: list[tuple[str, bool]] = []
    heading = ""
    for line in (line.strip() for line in without_asked_question(text).splitlines()):
        if not line:
            continue
        if _HEADING.match(line) and not CITATION.search(line):
            heading = line if not parts and ANSWER_LINE.match(line) else heading
            continue
        if parts and _onlycitations_in(line):
            sentence, short = parts[-1]
            parts[-1] = (f"{sentence} {''.join(CITATION.findall(line))}", short)
            continue
        if not parts and (heading or ANSWER_LINE.match(line)):
            line = f"{heading} {line}".strip()
            label = ANSWER_LINE.match(line)
            label_text = label.group(0) if label else ""
            first, *support = sentences(line[len(label_text) :]) or [""]
            parts.append((f"{label_text}{first}".strip(), True))
            _add_supporting(parts, support)
            continue
        _add_supporting(parts, sentences(_LEAD.sub("", line)))
    return parts


def _add_supporting(parts: list[tuple[str, bool]], found: list[str]) -> None:
    """Support sentences without what opens them as list items or labelled lines (`_LEAD`): the
    claim is judged alone, and an answer rebuilt from kept sentences reads as prose. A piece that
    only names excerpts ("- E2 [E2]") gives its citations to the sentence before it, as a line of
    citations does: judged as a claim, "E2" passed against E2 and was shown as a supported sentence."""
    for piece in (_without_tags_after(_LEAD.sub("", sentence)) for sentence in found):
        if labels_only(piece):
            if parts and CITATION.search(piece):
                sentence, short = parts[-1]
                parts[-1] = (f"{sentence} {''.join(CITATION.findall(piece))}", short)
        elif _has_text(piece) and not only_tags(piece):
            parts.append((piece, False))


def labels_only(piece: str) -> bool:
    """Whether a sentence is nothing but excerpt labels, bracketed or not ("E2 [E2]", "- E1, E3")."""
    return bool(_LABELS_ONLY.fullmatch(piece.strip()))


def _has_text(piece: str) -> bool:
    """Words or citations: not a stray "." alone on its line, which is no claim to judge."""
    return bool(re.search(r"\w", piece))


def bare_line(line: str) -> bool:
    """A heading alone on its line, nothing but citations, or nothing but punctuation: no words of a
    claim; or a line holding a sentence of nothing but excerpt labels ("... days. - E2 [E2]")."""
    line = line.strip()
    if not line:
        return False
    heading = _HEADING.match(line) and not CITATION.search(line)
    labelled = any(labels_only(_LEAD.sub("", piece)) for piece in sentences(line))
    return bool(heading) or _onlycitations_in(line) or not _has_text(line) or labelled


def only_tags(piece: str) -> bool:
    """#tags, with or without citations, and nothing else: no claim to judge."""
    return bool(_TAG.search(piece)) and not re.search(r"\w", _TAG.sub("", CITATION.sub("", piece)))


def _without_tags_after(sentence: str) -> str:
    """The sentence without the #tags (and their citations) written after its end: "It is three
    times faster. [E1] #refactor [E1][E2]" is one sentence to the splitter, and its claim ends at "[E1]"."""
    end = _LAST_END.search(sentence)
    if not end or not only_tags(end.group(1)):
        return sentence
    return sentence[: _TAG.search(sentence, end.start(1)).start()].rstrip()


def has_tags(line: str) -> bool:
    """Whether a sentence of `line` is only #tags and citations, or has some after its end: the
    answer shown is rebuilt without them."""
    return any(only_tags(piece) or _without_tags_after(piece) != piece for piece in sentences(line))


def _onlycitations_in(line: str) -> bool:
    """Citations and at most a label ("Support:", "Sources -"): no words of a claim."""
    return bool(CITATION.search(line)) and not re.search(r"\w", _LABEL.sub("", CITATION.sub("", line)))


def short_answer(text: str, question: str | None = None, evidence: list[Evidence] | None = None) -> str | None:
    """The short answer: the first sentence of the "Answer:" line (or else of the text) without label
    or citations, nor the words that only restate `question` (answer/echo.py); a date copied from
    the header of a cited excerpt that says "yesterday" is the day it means (answer/when.py)."""
    parts = split_answer(text)
    if not parts:
        return None
    first = ANSWER_LINE.sub("", parts[0][0]) if parts[0][1] else parts[0][0]
    bare = re.sub(r"\s+([,;:])", r"\1", re.sub(r"\s+", " ", _CITATION_LIST.sub("", first))).strip()
    bare = _DANGLING.sub("", bare.rstrip(".。").strip())
    if bare and question:
        bare = without_echo(bare, question)
    if bare and evidence:
        bare = dated_answer(bare, _short_answer_excerpts(parts[0][0], text, evidence), question or "")
    return bare or None


def _short_answer_excerpts(first: str, text: str, evidence: list[Evidence]) -> list[Evidence]:
    """What the short-answer sentence `first` rests on: the excerpts it cites, else those `text` cites."""
    return cited_excerpts(evidence, citations_in(first) or citations_in(text))


def dated_text(text: str, evidence: list[Evidence], question: str = "") -> tuple[str, tuple[str, str] | None]:
    """`text` with the date of its short-answer sentence moved as `short_answer` moves it, and
    (the date written, the day meant) when it was: what is shown says what the short answer says."""
    parts = split_answer(text)
    if not parts:
        return text, None
    first = parts[0][0]
    moved = moved_date(first, _short_answer_excerpts(first, text, evidence), question)
    return (text, None) if moved is None else (with_day(text, *moved, count=1), moved)


def citations_in(text: str) -> list[str]:
    return [ref for match in CITATION.finditer(text) for ref in cited_ids(match.group(0))]


def without_citations(sentence: str, refs: list[str]) -> str:
    """`sentence` no longer citing `refs` in the citations it ends with ("… team. [E1][E2]" without
    E2: "… team. [E1]"); one inside its prose ("mentioned in both [E2] and [E3].") stays, or the
    prose would lose a word (one after a function word is prose too)."""

    def kept(match: re.Match) -> str:
        return "".join(f"[{ref}]" for ref in cited_ids(match.group(0)) if ref not in refs)

    tail = re.search(rf"(?:[ \t]*(?:{CITATION.pattern}))+[ \t.!?]*$", sentence)
    if not refs or tail is None:
        return sentence
    last = re.findall(r"\w+", sentence[: tail.start()].lower())[-1:]
    if last and last[0] in stopwords_for(last):  # "… in both [E2] and [E3].": prose, not a citation
        return sentence
    ending = re.sub(r"[ \t]+(?=[.!?]*$)", "", CITATION.sub(kept, tail.group(0)))  # "[E1] [E2]" left "[E1] "
    return sentence[: tail.start()] + (ending if ending.strip(" \t.!?") else ending.strip(" \t"))
