"""The model as a yes/no judge: does the evidence answer the question, does each answer sentence
say what its cited excerpts say.

No registry package ships an NLI model or a cross-encoder, but a small instruction model judges
support well through the logits of its first answer token (yes minus no: AUC 0.855 on SciFact
claim/evidence pairs) while it ranks badly, so it only judges here. Backends without logits
(Ollama, OpenAI-compatible servers) answer the same question in one generated word instead.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from crossmodalrag.agent.temporal import time_ranges as agent_dates
from crossmodalrag.answer.citations import CITATION, cited_ids, sentences, states_absence
from crossmodalrag.answer.echo import restates_question, without_echo
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.llm import LLM, Generation, Message
from crossmodalrag.answer.premise import in_conversations, presupposes, unmentioned_words
from crossmodalrag.answer.prompt import (
    JUDGE_EXCERPT_CHARS,
    cited_excerpts,
    claim_messages,
    clip,
    gate_messages,
    premise_messages,
)
from crossmodalrag.answer.subjects import another_subject, excerpts_about, named_subjects, neighbour_turns, speaker
from crossmodalrag.answer.when import dated_answer, moved_date, with_day
from crossmodalrag.config import Settings
from crossmodalrag.retrieval.stopwords import stopwords_for
from crossmodalrag.types import Evidence

# A backend that can only say yes or no gets this margin, beyond any fitted threshold either way.
REPLY_MARGIN = 10.0
MAX_CHECKS = 5  # an answer is a short answer and at most three support sentences
# "Answer:", "**Answer:** ", "The answer:": the label, not a citation right after it ("Answer: [E1] Yes").
# After the colon only blanks and markdown go: "€55,000", "$1,200", "~700 MB", "<1%" keep their sign.
_ANSWER_LINE = re.compile(r"^[^\w\[]*(?:the\s+)?answer[^\w\[]*:[\s*_`\"'“”]*", re.IGNORECASE)
_LABEL = re.compile(r"^\W*\w+\W*")  # "Support:" before a line's citations
_HEADING = re.compile(r"^\W*\w+(?: \w+)?\W*:\W*$")  # "Support:" or "**Answer:**" alone on its line
# What opens a support sentence without being part of its claim: a list marker ("- ", "2. "), a
# label ("Explanation: "), a stray colon. Small models write them inline too ("... [E1] - She ..."),
# so each sentence loses its own; a line loses its own first, or `sentences` cuts "2." off as one.
_LEAD = re.compile(r"^(?:[-*•–]\s+|\d{1,2}[.)]\s+|:\s*|(?:support|explanation|reason|evidence)\s*:\s*)+", re.I)
_WORD = re.compile(r"\w{3,}")
_ANY_WORD = re.compile(r"\w+")
REPEATED = "repeated"  # a Verdict.reason: said already by an earlier sentence of the answer
UNCITED = "uncited"  # a Verdict.reason: passed, but nothing it could cite (Verification.leave_out_uncited)
HEDGE = "hedge"  # a Verdict.reason: it says the evidence lacks what the question asks, after a short answer that passed
HEDGE_SHARE = 0.5  # ... naming at least this share of the question's content words
LEFT_OUT = (REPEATED, UNCITED, HEDGE)  # left out of the answer, not failed
RESTATES = "restates_question"  # a Verdict.reason: a short answer of nothing but the question's words
PREMISE = "premise_missing"  # a Verdict.reason: its excerpts never speak of a word the question takes as given
NOT_ABOUT = ("names_missing", "other_speaker")  # Verdict.reasons: its excerpts are about someone else
_YEAR = re.compile(r"\b\d{4}\b")
# Citations with what joins them ("Yes, [E3] and [E4]", "hiking [E1] and [E3]"): gone from a short
# answer together, or it reads "Yes, and"; then whatever still dangles at its end.
_CITATION_LIST = re.compile(rf"(?:,?\s*(?:(?:and|or|&)\s*)?{CITATION.pattern})+", re.IGNORECASE)
_DANGLING = re.compile(r"(?:[\s,;:]|\b(?:and|or)\b)+$", re.IGNORECASE)
# A question's date names the day it was said, give or take the week it speaks of ("the week before").
DATE_SLACK = 7 * 86400.0
# A sentence of at least ATTRIBUTED_WORDS content words whose cited excerpts hold under MISCITED_SHARE
# of them, while another excerpt holds SOURCE_SHARE (or, in an answer citing nothing, MISCITED_SHARE),
# is judged against and cites that one (`word_source`): the README's own question was
# answered with the sample note's sentences cited to a diff that holds none of their words, and the
# judge, lenient by design, passed them; 3 of the sample's 9 answers cited nothing at all.
ATTRIBUTED_WORDS = 4
MISCITED_SHARE = 0.3
SOURCE_SHARE = 0.6


@dataclass
class Verdict:
    """One sentence of an answer and the judge's margin for it."""

    sentence: str
    cited: list[str]
    margin: float | None  # None: not checked (a statement of what the evidence lacks, or over budget)
    supported: bool
    short: bool = False  # the "Answer:" line
    reason: str | None = None  # why an unsupported sentence failed without the judge
    judged: list[str] = field(default_factory=list)  # the excerpts it was judged against
    added: list[str] = field(default_factory=list)  # uncited excerpts its second look passed it with
    attributed: str | None = None  # the excerpt its words come from, judged and cited instead of its own

    def to_dict(self) -> dict[str, Any]:
        return {
            "sentence": self.sentence,
            "cited": self.cited,
            "margin": None if self.margin is None else round(self.margin, 3),
            "supported": self.supported,
            "short_answer": self.short,
            "reason": self.reason,
            "added_citations": self.added,
            "judged": self.judged,
            "attributed_to": self.attributed,
        }


@dataclass
class Verification:
    verdicts: list[Verdict] = field(default_factory=list)
    premise: dict[str, float] = field(default_factory=dict)  # word -> margin (answer/premise.py)

    @property
    def unsupported(self) -> bool:
        """Nothing supported remains, or the short answer itself is not supported."""
        kept = [v for v in self.verdicts if v.supported]
        return not kept or any(v.short and not v.supported for v in self.verdicts)

    @property
    def dropped(self) -> list[Verdict]:
        """The sentences that failed their check (a repeat, or one with nothing to cite, is left out, not failed)."""
        return [v for v in self.verdicts if not v.supported and v.reason not in LEFT_OUT]

    def answer_text(self, text: str) -> str:
        """What the user reads: `text` as written with judged citations added, or the answer rebuilt
        from what was kept when a sentence is left out or a line says nothing of its own (a heading
        alone, "Support:", or a line of citations such as "- [E1] [E2]", which go to the sentence
        before it)."""
        rebuild = any(not v.supported for v in self.verdicts) or any(map(_bare_line, text.splitlines()))
        return self.text() if rebuild else self.cite_judged(text)

    def text(self) -> str:
        """The answer rebuilt without its unsupported sentences (the short answer keeps its own line),
        each kept sentence that cites nothing citing what it was judged against (`_cited`)."""
        short = [self._cited(v) for v in self.verdicts if v.short and v.supported]
        rest = " ".join(self._cited(v) for v in self.verdicts if not v.short and v.supported)
        return "\n".join(short + ([rest] if rest else []))

    def cite_judged(self, text: str) -> str:
        """`text` as the model wrote it (layout kept), each sentence that cites nothing but was judged
        supported now citing the excerpts it was judged against: the model often cites once at the
        end of a paragraph, and its other sentences would read as uncited claims."""
        out, start = [], 0
        for verdict in self.verdicts:
            at = text.find(verdict.sentence, start)
            if at < 0:  # reassembled by split_answer (a heading joined to its line): left as written
                continue
            end = at + len(verdict.sentence)
            out.append(text[start:at] + self._cited(verdict))
            start = end
        return "".join(out) + text[start:]

    def _cited(self, verdict: Verdict) -> str:
        """The sentence, with the citations it gets from its check when it has none of its own: the
        excerpts it was judged against, only those cited by a kept sentence if any are, and never
        one the model did not cite ("Answer: X. Y [E1]" loses its only citation with Y, and X was
        judged by E1). One that passed only beside excerpts it did not cite (`_second_look`) cites them
        after its own; one judged against the excerpt its words come from (`word_source`) cites what
        it was judged against instead of its own citations."""
        if verdict.attributed and verdict.supported:
            refs = "".join(f"[{ref}]" for ref in verdict.judged)
            return f"{CITATION.sub('', verdict.sentence).rstrip()} {refs}"
        if verdict.added and verdict.supported:
            sentence = verdict.sentence.rstrip()
            refs = "".join(f"[{ref}]" for ref in verdict.added)
            return f"{sentence}{'' if sentence.endswith(']') else ' '}{refs}"
        if verdict.cited or not verdict.judged or verdict.margin is None or not verdict.supported:
            return verdict.sentence
        refs = self._judged_refs(verdict)
        if not refs:
            return verdict.sentence
        return f"{verdict.sentence.rstrip()} {''.join(f'[{ref}]' for ref in refs)}"

    def _judged_refs(self, verdict: Verdict) -> list[str]:
        """What a sentence citing nothing cites from its check (`_cited`): the excerpts it was judged
        against that the kept sentences cite, else that any sentence cites."""
        cited = [ref for v in self.verdicts for ref in v.cited]
        kept = [ref for v in self.verdicts if v.supported for ref in v.cited]
        return [ref for ref in verdict.judged if ref in kept] or [ref for ref in verdict.judged if ref in cited]

    def leave_out_uncited(self) -> None:
        """Leave out a support sentence the judge passed that would still be shown citing nothing: it
        cites nothing itself, its words come from no one excerpt, and nothing else in the answer cites
        what it was judged against. The README's own answer ended "The change was made to address this
        issue and improve the performance of the parser.", passed (+0.35) against the closest excerpt,
        which the answer never cited. An answer is never emptied this way: its last kept sentence stays."""
        kept = sum(v.supported for v in self.verdicts)
        for verdict in self.verdicts:
            uncited = not (verdict.short or verdict.cited or verdict.attributed or verdict.added)
            if kept > 1 and uncited and verdict.supported and verdict.margin is not None:
                if not self._judged_refs(verdict):
                    verdict.supported, verdict.reason, kept = False, UNCITED, kept - 1

    def leave_out_hedges(self, question: str) -> None:
        """Leave out a support sentence saying the evidence lacks what the question asks once the short
        answer passed: "Answer: 7 May 2023 [E1]" went on "No excerpt directly states when Caroline went
        to the support group." (13 of 100 LoCoMo answers hedged so), contradicting the answer before it.
        One saying what else is missing ("it does not say when", to a question why) stays."""
        asked = content_words(question)
        if not asked or not any(v.short and v.supported for v in self.verdicts):
            return
        for verdict in self.verdicts:
            if not verdict.short and verdict.supported and states_absence(verdict.sentence):
                if len(named_in(asked, content_words(verdict.sentence))) >= HEDGE_SHARE * len(asked):
                    verdict.supported, verdict.reason = False, HEDGE


def named_in(asked: set[str], words: set[str]) -> set[str]:
    """The question's words a sentence names, a longer form of one included ("monthly" names "month"
    of "How much does Helios cost per month?"): exact words alone left that hedge in the answer."""
    return {word for word in asked if word in words or (len(word) >= 4 and any(w.startswith(word) for w in words))}


def judge(llm: LLM, prompts: list[list[Message]]) -> list[float]:
    """Yes-minus-no margins, one per prompt: logits where the backend has them, else one word."""
    margins = getattr(llm, "support_margins", None)
    if margins is not None:
        return margins(prompts)
    replies = []
    for messages in prompts:
        reply = "".join(llm.stream(messages, Generation(max_tokens=3, temperature=0.0))).strip().lower()
        replies.append(REPLY_MARGIN if reply.startswith("yes") else -REPLY_MARGIN if reply.startswith("no") else 0.0)
    return replies


def gate_evidence(question: str, evidence: list[Evidence]) -> Evidence:
    """The excerpt the gate judges: the best one about whom the question names (in a conversation
    they take part in, their own turn: answer/subjects.py), else the best one. The best hit overall
    is often the other person's turn, which the judge reads as an answer about either of them."""
    names = named_subjects(question)
    about = excerpts_about(evidence, names, evidence) if names else []
    return (about or evidence)[0]


# Each form's gate threshold (a setting), fitted on that form's dev queries by bench/calibrate_margin.py.
GATE_THRESHOLDS = {
    "question": "abstain_min_margin",
    "statement": "abstain_min_margin_statements",
    "conjecture": "abstain_min_margin_conjectures",
}


def gate_min_margin(settings: Settings, query: str) -> float:
    """The gate's threshold for this query's form. The judge scores statements and conjectures lower
    than questions whatever the evidence (SciFact claims, LoCoMo's "would she ...?" against its other
    questions), so one threshold for all would be set by them; each form has its own, fitted by
    bench/calibrate_margin.py."""
    return getattr(settings, GATE_THRESHOLDS[query_form(query)])


def gate_margin(
    llm: LLM,
    question: str,
    evidence: list[Evidence],
    budget_chars: int = Settings.llm_evidence_chars,
    judged: Evidence | None = None,
) -> float:
    """How sure the model is that the gate's excerpt (`judged`, by default `gate_evidence`) answers
    the question (> 0 leans yes), asked inside the answer prompt of `budget_chars` (answer/prompt.py
    `gate_messages`)."""
    judged = judged or gate_evidence(question, evidence)
    return judge(llm, [gate_messages(question, evidence, judged, budget_chars)])[0]


def split_answer(text: str) -> list[tuple[str, bool]]:
    """(sentence, is the short answer) in order. The short answer is the first sentence of the first
    "Answer:" line: models often run on after it on the same line ("Lots of homes were ruined. It
    was a serious challenge"), and those sentences are support, each judged on its own. A line of
    nothing but citations ("Support: [E3]") gives them to the sentence before it; a heading alone
    ("Support:") is no sentence, and after a lone "Answer:" the next line is the answer."""
    parts: list[tuple[str, bool]] = []
    heading = ""
    for line in (line.strip() for line in text.splitlines()):
        if not line:
            continue
        if _HEADING.match(line) and not CITATION.search(line):
            heading = line if not parts and _ANSWER_LINE.match(line) else heading
            continue
        if parts and _only_citations(line):
            sentence, short = parts[-1]
            parts[-1] = (f"{sentence} {''.join(CITATION.findall(line))}", short)
            continue
        if not parts and (heading or _ANSWER_LINE.match(line)):
            line = f"{heading} {line}".strip()
            label = _ANSWER_LINE.match(line)
            label_text = label.group(0) if label else ""
            first, *support = sentences(line[len(label_text) :]) or [""]
            parts.append((f"{label_text}{first}".strip(), True))
            parts.extend(_supporting(support))
            continue
        parts.extend(_supporting(sentences(_LEAD.sub("", line))))
    return parts


def _supporting(found: list[str]) -> list[tuple[str, bool]]:
    """Support sentences without what opens them as list items or labelled lines (`_LEAD`): the
    claim is judged alone, and an answer rebuilt from kept sentences reads as prose."""
    return [(bare, False) for bare in (_LEAD.sub("", sentence) for sentence in found) if _has_text(bare)]


def _has_text(piece: str) -> bool:
    """Words or citations: not a stray "." alone on its line, which is no claim to judge."""
    return bool(re.search(r"\w", piece))


def _bare_line(line: str) -> bool:
    """A heading alone on its line, nothing but citations, or nothing but punctuation: no words of a claim."""
    line = line.strip()
    if not line:
        return False
    heading = _HEADING.match(line) and not CITATION.search(line)
    return bool(heading) or _only_citations(line) or not _has_text(line)


def _only_citations(line: str) -> bool:
    """Citations and at most a label ("Support:", "Sources -"): no words of a claim."""
    return bool(CITATION.search(line)) and not re.search(r"\w", _LABEL.sub("", CITATION.sub("", line)))


def short_answer(text: str, question: str | None = None, evidence: list[Evidence] | None = None) -> str | None:
    """The short answer: the first sentence of the "Answer:" line (or else of the text) without label
    or citations, nor the words that only restate `question` (answer/echo.py); a date copied from
    the header of a cited excerpt that says "yesterday" is the day it means (answer/when.py)."""
    parts = split_answer(text)
    if not parts:
        return None
    first = _ANSWER_LINE.sub("", parts[0][0]) if parts[0][1] else parts[0][0]
    bare = re.sub(r"\s+([,;:])", r"\1", re.sub(r"\s+", " ", _CITATION_LIST.sub("", first))).strip()
    bare = _DANGLING.sub("", bare.rstrip(".。").strip())
    if bare and question:
        bare = without_echo(bare, question)
    if bare and evidence:
        bare = dated_answer(bare, _short_answer_excerpts(parts[0][0], text, evidence))
    return bare or None


def _short_answer_excerpts(first: str, text: str, evidence: list[Evidence]) -> list[Evidence]:
    """What the short-answer sentence `first` rests on: the excerpts it cites, else those `text` cites."""
    return cited_excerpts(evidence, _citations(first) or _citations(text))


def dated_text(text: str, evidence: list[Evidence]) -> tuple[str, tuple[str, str] | None]:
    """`text` with the date of its short-answer sentence moved as `short_answer` moves it, and
    (the date written, the day meant) when it was: what is shown says what the short answer says."""
    parts = split_answer(text)
    if not parts:
        return text, None
    first = parts[0][0]
    moved = moved_date(first, _short_answer_excerpts(first, text, evidence))
    return (text, None) if moved is None else (with_day(text, *moved, count=1), moved)


def verify_answer(
    llm: LLM, question: str, evidence: list[Evidence], text: str, min_margin: float, min_premise: float | None = None
) -> Verification:
    """Judge every sentence of `text` against the excerpts it cites. One citing none: the short answer
    against every excerpt the answer cites (else all), a support sentence against the closest of them.
    Sentences that only say what the evidence lacks are kept unchecked. When the question names
    someone, a sentence is judged only against those of its excerpts about them (answer/subjects.py),
    when it names a date with its year, only against those dated near it; it fails without the judge
    if none is left (`names_missing`, `other_time`) or it is about another participant
    (`other_speaker`); past MAX_CHECKS, dropped. A short answer that only repeats the question's
    words fails unjudged (`restates_question`). A support sentence whose content words all came
    earlier is left out unchecked (`repeated`), and one passed with nothing to cite after the checks
    (`uncited`: `Verification.leave_out_uncited`). With `min_premise`, the excerpts the answer rests on
    are asked whether they speak of each word the question takes as given that no excerpt holds
    (answer/premise.py): one below `min_premise` fails the answer (`premise_missing`)."""
    verdicts: list[Verdict] = []
    checked: list[Verdict] = []
    claims: list[str] = []
    prompts: list[list[Message]] = []
    names = named_subjects(question)
    dated = question_dates(question)
    # What any sentence may rest on: the excerpts about whom the question names, from the time it names.
    pool = [item for item in (excerpts_about(evidence, names, evidence) if names else evidence) if _within(item, dated)]
    said: set[str] = set()
    text_cites = _citations(text)  # what a sentence citing nothing rests on
    for sentence, short in split_answer(text):
        cited = _citations(sentence)
        claim = re.sub(r"\s+", " ", CITATION.sub("", _ANSWER_LINE.sub("", sentence) if short else sentence)).strip()
        verdict = Verdict(sentence, list(dict.fromkeys(cited)), None, False, short)
        verdicts.append(verdict)
        if short and restates_question(claim, question):
            verdict.reason = RESTATES  # "painting" to "what kind of painting ...?" answers nothing
            continue
        words = content_words(claim)
        if not short and words and words <= said:
            verdict.reason = REPEATED  # a small model restates itself; a check would be spent on nothing new
            continue
        said |= words
        if not short and not cited and states_absence(sentence):
            verdict.supported = True  # "the evidence does not say when" is not a claim about the world
            continue
        if names and another_subject(claim, question, evidence):
            verdict.reason = "other_speaker"  # the other side's words, not the named person's
            continue
        claimed_all = about = cited_excerpts(evidence, verdict.cited or text_cites)
        if names:  # judged only against the excerpts about whom the question names, or their neighbours
            about = excerpts_about(about, names, evidence) or neighbour_turns(claim, about, names, evidence)
        judged = [item for item in about if _within(item, dated)]  # and from the time it names
        claimed = judged if cited or text_cites else []  # an answer citing nothing claims no excerpt
        source = word_source(claim, claimed, pool) if judged else None
        if not judged and (names or dated):
            source = document_source(claim, short, claimed_all, pool)
        if source is not None:
            verdict.attributed, judged = source.id, [source]
        elif judged and not cited and not short:
            judged = [closest_excerpt(claim, judged)]  # not "any of them": a made-up sentence passed that way
        if not judged:
            verdict.reason = "other_time" if about else "names_missing"
        elif len(prompts) < MAX_CHECKS and claim:
            verdict.judged = [item.id for item in judged]
            prompts.append(claim_messages(question, evidence, claim, [item.id for item in judged], short))
            checked.append(verdict)
            claims.append(claim)
    rests_on = cited_excerpts(evidence, checked[0].judged) if checked and checked[0].short else []
    asks = min_premise is not None and presupposes(question) and in_conversations(rests_on)
    words = unmentioned_words(question, evidence) if asks else []
    # The short answer's premise checks go right after its own check: same excerpts, so each costs
    # only its question's tokens (the KV cache keeps the prefix). Unused if the short answer fails.
    ahead = [premise_messages(evidence, checked[0].judged, w) for w in words]
    margins = judge(llm, prompts[:1] + ahead + prompts[1:])
    premise_margins = margins[1 : 1 + len(ahead)]
    for verdict, margin in zip(checked, margins[:1] + margins[1 + len(ahead) :], strict=True):
        verdict.margin = margin
        verdict.supported = margin >= min_margin
    _second_look(llm, question, evidence, checked, claims, pool, min_margin)
    verification = Verification(verdicts)
    verification.leave_out_uncited()
    verification.leave_out_hedges(question)
    if ahead and not verification.unsupported:  # the short answer passed: does it rest on the premise?
        short = checked[0]
        if short.added:  # its second look judged it beside more excerpts
            premise_margins = judge(llm, [premise_messages(evidence, short.judged, w) for w in words])
        verification.premise = dict(zip(words, premise_margins, strict=True))
        if min(premise_margins) < min_premise:
            short.supported, short.reason = False, PREMISE
    return verification


def _second_look(llm, question, evidence, checked, claims, pool, min_margin) -> None:
    """Judge a failed sentence once more beside the excerpts of `pool` that hold its words its
    judged excerpts lack; passing, it cites them (`Verdict.added`). An answer combining turns often
    cites only some of them: "Answer: Coco and Shadow [E3][E4]" cited the turn naming Coco, not the
    one naming Shadow, and failed (LoCoMo dev). One more check per failed sentence, at most. A
    sentence citing nothing was judged first against its closest excerpt, a guess: it cites that one
    too only if it holds some of the sentence's own words (not the question's)."""
    retried, prompts = [], []
    for verdict, claim in zip(checked, claims, strict=True):
        judged = [item for item in evidence if item.id in verdict.judged]
        extra = [] if verdict.supported else excerpts_holding_missing_words(claim, question, judged, pool)
        if extra:
            ids = [item.id for item in evidence if item in judged or item in extra]  # in prompt order
            own = content_words(claim) - content_words(question)
            guessed = [] if verdict.cited else [item for item in judged if own & content_words(_text(item))]
            added = [item.id for item in evidence if item in extra or item in guessed]
            retried.append((verdict, ids, added))
            prompts.append(claim_messages(question, evidence, claim, ids, verdict.short))
    for (verdict, ids, added), margin in zip(retried, judge(llm, prompts) if prompts else [], strict=True):
        if margin >= min_margin:
            verdict.margin, verdict.supported, verdict.judged, verdict.added = margin, True, ids, added


def excerpts_holding_missing_words(
    claim: str, question: str, judged: list[Evidence], pool: list[Evidence]
) -> list[Evidence]:
    """The excerpts of `pool` beyond `judged` that hold a content word of `claim` none of `judged`
    holds, the question's own words aside: retrieval found every excerpt by them, so holding one says
    nothing of where the claim comes from ("Fly.io is the hosting platform used for Helios." was
    judged beside, and cited, every note naming Helios, an office move among them)."""
    held = set().union(*(content_words(_text(item)) for item in judged))
    missing = content_words(claim) - held - content_words(question)
    return [item for item in pool if item not in judged and missing & content_words(_text(item))] if missing else []


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
        return len(words & content_words(f"{item.hit.title} {clip(_text(item), JUDGE_EXCERPT_CHARS)}")) / len(words)

    if max(map(share, claimed), default=0.0) >= MISCITED_SHARE:
        return None
    # Moving a citation the model made takes a clear source; giving one to an answer without any,
    # only an excerpt holding as much of it as a citation must.
    needed = SOURCE_SHARE if claimed else MISCITED_SHARE
    best = max(pool, key=share, default=None)  # the first in prompt order on a tie
    return best if best is not None and best not in claimed and share(best) >= needed else None


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
    holding = (item for item in documents if words and words <= content_words(f"{item.hit.title} {_text(item)}"))
    return next(holding, None)


def _text(item: Evidence) -> str:
    return item.hit.text.split("\n", 1)[-1]  # without the breadcrumb line


def content_words(sentence: str) -> set[str]:
    """The words of a sentence that carry its content: lowercase, without the function words of its
    language. A sentence all of whose content words an earlier one said repeats it."""
    words = _ANY_WORD.findall(sentence.lower())
    return set(words) - stopwords_for(words)


def question_dates(question: str) -> list[tuple[float, float]]:
    """The spans of the dates a question states with their year ("on 8th December, 2023", "before
    August 3, 2023", "in November 2022"), each widened by DATE_SLACK; relative ones ("last week")
    and dates without a year are left out (their year is a guess)."""
    ranges, _ = agent_dates(question, datetime.now(timezone.utc))
    return [
        (-math.inf if r.start is None else r.start - DATE_SLACK, math.inf if r.end is None else r.end + DATE_SLACK)
        for r in ranges
        if _YEAR.search(r.text)
    ]


def _within(item: Evidence, dated: list[tuple[float, float]]) -> bool:
    """Whether an excerpt is dated inside one of the question's spans (undated ones, or any when the
    question names no date, always are)."""
    moment = item.hit.timestamp
    return not dated or moment is None or any(start <= moment < end for start, end in dated)


def closest_excerpt(claim: str, items: list[Evidence]) -> Evidence:
    """The excerpt sharing the most words with `claim` (the first on a tie): what a support sentence
    that cites nothing is judged against."""
    words = set(_WORD.findall(claim.lower()))
    bodies = [_text(item).lower() for item in items]
    return items[max(range(len(items)), key=lambda i: len(words & set(_WORD.findall(bodies[i]))))]


def _citations(text: str) -> list[str]:
    return [ref for match in CITATION.finditer(text) for ref in cited_ids(match.group(0))]
