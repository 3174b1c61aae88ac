"""Checking a model's answer against its evidence: invented citations go, uncited claims are flagged,
and "the evidence does not answer this" is recognised however the model phrases it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from crossmodalrag.answer.prompt import HEADER_COPY, INSUFFICIENT, echoes_note
from crossmodalrag.types import Evidence

# [E1], [e2], [E1, E3], [E1; 3], [E1-E3] (ranges are expanded), with optional spaces.
CITATION = re.compile(r"\[\s*[Ee]\s*\d+(?:\s*(?:[,;]|-|–|and)\s*(?:[Ee]\s*)?\d+)*\s*\]")
_NUMBER = re.compile(r"\d+")
_MARKER = re.compile(r"insufficient[\s_-]*evidence", re.IGNORECASE)
# How models say "the evidence does not answer this" when they ignore the exact marker.
_REFUSAL = re.compile(
    r"\b(?:(?:does|do|did)\s*(?:not|n't)\s+(?:contain|mention|provide|include|say|specify|discuss|address|answer)"
    r"|(?:no|not\s+(?:enough|sufficient|any))\s+(?:relevant\s+)?(?:information|evidence|details?|mention)"
    r"|(?:cannot|can't|can\s+not|unable\s+to)\s+(?:be\s+)?(?:answer|determine|find|tell|say)"
    r"|not\s+(?:mentioned|covered|stated|specified|provided|addressed)"
    r"|there\s+is\s+no\s+(?:evidence|information|mention)"
    # The model's own phrasing: "No excerpt directly states when …", "None of the excerpts mention …".
    r"|(?:no|none\s+of\s+the)\s+(?:excerpts?|passages?|sources?)\s+(?:\w+\s+)?"
    r"(?:states?|says?|mentions?|answers?|specif(?:y|ies)|provides?|gives?|compares?|contains?|shows?|lists?))",
    re.IGNORECASE,
)
# Where a sentence ends: after . ! ? (group 1, the word before it, must be no title or initial:
# "Dr. Patel", "J. R. R.") or after a citation, before a capital, digit, quote, parenthesis or an
# inline bullet ("... [E1]. - Caroline said ..."). A citation after the full stop still belongs to
# the sentence before it: never split before "[". Chinese and Japanese end a sentence with a
# full-width 。！？ and no space: there, after the mark and the citations that follow it.
_SENTENCE_END = re.compile(
    r"(\b\w+)?[.!?]+\s+(?=[A-Z0-9\"'(]|[-*\u2022]\s)|\]\s+(?=[A-Z\"'(]|[-*\u2022]\s)"
    r"|[。！？]+[」』）]*(?:\s*\[[Ee]\d+\])*\s*(?=[^\s\[])"
)
_ABBREVIATION = re.compile(r"Dr|Mrs?|Ms|Prof|Rev|St|Mt|Jr|Sr|Gen|Col|Capt|Lt|Inc|Ltd|Corp|Co|vs|[A-Z](?:\.[A-Z])*")
# A day written as an ordinal before its month ("12. Dezember 2023", German and Scandinavian style)
# is no sentence end (cut there, "Answer: 12. Dezember 2023" gave the short answer "12").
_MONTH_NEXT = re.compile(r"(?:Jan|Feb|M[aä]r|Apr|Ma[iy]|Jun|Jul|Aug|Sep|O[ck]t|Nov|De[cz])[a-zä]*\b")
CLAIM_MIN_WORDS = 6
# An evidence header the model was copying when its tokens ran out ("- [E5] (pdf · Form 8-K for Pepsico
# INC filed 05/30/2023 · PEPSICO_2023_8K_dated-2023-05"): never closed, so no HEADER_COPY, it was
# judged as a claim and reported as unsupported. The [E#] opening its line goes with it: it cites only
# the header, and left alone it would cite the sentence before (parts.py `bare_line`).
_CUT_HEADER = re.compile(
    r"(?:^[ \t]*(?:[-*\u2022][ \t]*)?\[\s*[Ee]\s*\d+\s*\][ \t]*)?"
    r"\((?:note|commit|pdf|image|conversation|memory) · [^\n]*\s*\Z",
    re.MULTILINE,
)
# "E1, E2" or "(E3)" without square brackets: a small model sometimes drops them ("... release plan. E1, E2").
# Not inside a word ("E2E") nor a bracketed citation.
_BARE = re.compile(r"\(\s*E(\d{1,2})\s*\)|(?<![\w\[])E(\d{1,2})\b(?!\s*\])")


@dataclass
class CitationReport:
    """The cleaned answer text, the evidence it cites (in order of first use) and what was wrong."""

    text: str
    cited: list[Evidence] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    @property
    def invalid(self) -> list[str]:
        return [w["citation"] for w in self.warnings if w["kind"] == "invalid_citation"]

    def citations(self) -> list[dict[str, Any]]:
        return [item.citation() for item in self.cited]


def cited_ids(bracket: str) -> list[str]:
    """`[E1, E3-E5]` → E1, E3, E4, E5 (a range is capped: a typo must not expand to thousands)."""
    ids: list[int] = []
    for part in re.split(r"[,;]|\band\b", bracket.strip("[] ")):
        numbers = [int(n) for n in _NUMBER.findall(part)]
        if len(numbers) == 2 and 0 < numbers[1] - numbers[0] <= 20:
            ids.extend(range(numbers[0], numbers[1] + 1))
        else:
            ids.extend(numbers)
    return [f"E{n}" for n in dict.fromkeys(ids)]


def validate(text: str, evidence: list[Evidence]) -> CitationReport:
    """Remove citations of evidence that does not exist and copied evidence headers, and flag claims
    that cite nothing."""
    text = _CUT_HEADER.sub("", HEADER_COPY.sub("", text))
    by_id = {item.id: item for item in evidence}
    text = _bracketed(text, by_id)
    report = CitationReport(text="")
    order: dict[str, Evidence] = {}

    def rewrite(match: re.Match[str]) -> str:
        kept = []
        for ref in cited_ids(match.group(0)):
            if ref in by_id:
                kept.append(ref)
                order.setdefault(ref, by_id[ref])
            else:
                report.warnings.append(
                    {"kind": "invalid_citation", "citation": f"[{ref}]", "detail": f"no evidence {ref}: removed"}
                )
        return "".join(f"[{ref}]" for ref in kept)

    cleaned = CITATION.sub(rewrite, text)
    cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", cleaned)).strip()
    report.text, report.cited = cleaned, list(order.values())
    if not report.cited:
        if cleaned:
            report.warnings.append({"kind": "no_citations", "citation": "", "detail": "the answer cites no evidence"})
        return report
    # A line of only citations ("Support:" then "- [E1] [E2]") cites the claims written since the last
    # citation, as the verifier reads it (parts.py `split_answer`); a heading between them is no claim.
    waiting: list[str] = []
    for sentence in (sentence for line in cleaned.splitlines() for sentence in sentences(line)):
        cites, words = bool(CITATION.search(sentence)), sentence.split()
        if cites and not has_words(sentence):
            waiting.clear()
        elif cites:
            _uncited(report, waiting)
        elif len(words) >= CLAIM_MIN_WORDS and not _REFUSAL.search(sentence):
            waiting.append(" ".join(words))
    _uncited(report, waiting)
    return report


def without_copied_note(text: str, note: str) -> tuple[str, list[str]]:
    """`text` without the sentences that copy the prompt's note on which excerpt is newest
    (prompt.py `echoes_note`), and those sentences; lines losing none are kept as written."""
    if not note:
        return text, []
    lines, copied = [], []
    for line in text.splitlines():
        found = sentences(line)
        echoed = [sentence for sentence in found if echoes_note(sentence, note)]
        copied += echoed
        if not echoed:
            lines.append(line)
        elif len(echoed) < len(found):
            lines.append(" ".join(sentence for sentence in found if sentence not in echoed))
    return "\n".join(lines), copied


def _uncited(report: CitationReport, claims: list[str]) -> None:
    report.warnings += [{"kind": "uncited_claim", "citation": "", "detail": claim[:200]} for claim in claims]
    claims.clear()


def _bracketed(text: str, by_id: dict[str, Evidence]) -> str:
    """Bare references to this prompt's excerpts as citations, when the answer brackets none."""
    if CITATION.search(text):
        return text

    def bracket(match: re.Match[str]) -> str:
        ref = f"E{match.group(1) or match.group(2)}"
        return f"[{ref}]" if ref in by_id else match.group(0)

    return _BARE.sub(bracket, text)


def _day_before_month(line: str, end: re.Match[str]) -> bool:
    day = end.group(1) or ""
    return day.isdigit() and len(day) <= 2 and bool(_MONTH_NEXT.match(line, end.end()))


def _dotted_letters(line: str, end: re.Match[str]) -> bool:
    """The end of "i.e." or "e.g.": one letter after another letter's period."""
    word, start = end.group(1) or "", end.start(1)
    return len(word) == 1 and start >= 2 and line[start - 1] == "." and line[start - 2].isalpha()


def sentences(line: str) -> list[str]:
    """The sentences of one line. A piece without words (a bullet and its citation, "- [E3]", before
    "Today I went...") opens the sentence after it, or closes the last one: alone it would be an empty
    claim, and the sentence after it would look uncited."""
    pieces, start = [], 0
    for end in _SENTENCE_END.finditer(line):
        abbreviated = end.group(1) and _ABBREVIATION.fullmatch(end.group(1)) or _dotted_letters(line, end)
        if not abbreviated and not _day_before_month(line, end):
            pieces.append(line[start : end.start() + len(end.group(0).rstrip())])
            start = end.end()
    merged: list[str] = []
    opening = ""
    for piece in (piece.strip() for piece in [*pieces, line[start:]]):
        if piece and not has_words(piece):
            opening = f"{opening} {piece}".strip()
        elif piece:
            merged.append(f"{opening} {piece}".strip())
            opening = ""
    if opening and merged:
        merged[-1] = f"{merged[-1]} {opening}"
    return merged or ([opening] if opening else [])


def has_words(text: str) -> bool:
    """Whether `text` holds a word besides its citations (not only bullets and punctuation)."""
    return bool(re.search(r"\w", CITATION.sub("", text)))


_CITATION_RUN = re.compile(r"\[E\d+\](?:[ \t]*\[E\d+\])+")


# Citations, a sentence's end, and citations again ending the line: "... in Lisbon. [E1]. [E1]".
_CITED_AGAIN = re.compile(r"((?:\[E\d+\])+)([.!?])[ \t]+((?:\[E\d+\])+)[.!?]?(?=[ \t]*$)", re.MULTILINE)


def merged_citations(text: str) -> str:
    """Runs of citations with each excerpt once, side by side: "[E1] [E1][E2]" (the model's citation
    and one a check added) reads "[E1][E2]"; and citations that only repeat those just before a
    line's last full stop once: "Lisbon. [E1]. [E1]" reads "Lisbon. [E1]." (the model cites after
    the stop, and a stray line after it was cited again)."""
    text = _CITATION_RUN.sub(lambda run: "".join(dict.fromkeys(re.findall(r"\[E\d+\]", run.group(0)))), text)
    return _CITED_AGAIN.sub(_once, text)


def _once(match: re.Match[str]) -> str:
    before, stop, again = match.groups()
    repeats = set(re.findall(r"\[E\d+\]", again)) <= set(re.findall(r"\[E\d+\]", before))
    return f"{before}{stop}" if repeats else match.group(0)


def is_insufficient(text: str, report: CitationReport) -> bool:
    """Did the model judge the evidence irrelevant? The marker, or a refusal that cites nothing."""
    head = text.strip().lstrip("*_#>`\"' ").lower()
    if _MARKER.match(head):
        return True
    if report.cited:
        return False  # a partial answer: it used evidence and says what is missing
    return bool(_MARKER.search(text) or _REFUSAL.search(text) or not text.strip())


def states_absence(sentence: str) -> bool:
    """Does the sentence say what the evidence lacks ("the evidence does not say when")?"""
    return bool(_REFUSAL.search(sentence))


def without_absence(sentence: str) -> str:
    """The sentence without the words saying the evidence lacks something: what it says is missing."""
    return _REFUSAL.sub(" ", sentence)


def strip_marker(text: str) -> str:
    """The answer without a stray marker (a model may append it to a partial answer)."""
    return _MARKER.sub("", text).replace(INSUFFICIENT, "").strip()
