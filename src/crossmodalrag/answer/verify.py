"""The model as a yes/no judge: does the evidence answer the question, does each answer sentence
say what its cited excerpts say.

No registry package ships an NLI model or a cross-encoder, but a small instruction model judges
support well through the logits of its first answer token (yes minus no: AUC 0.855 on SciFact
claim/evidence pairs) while it ranks badly, so it only judges here. Backends without logits
(Ollama, OpenAI-compatible servers) answer the same question in one generated word instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from crossmodalrag.answer.attribution import (
    body_of,
    closest_excerpt,
    content_words,
    document_source,
    excerpts_holding_missing_specifics,
    excerpts_holding_missing_words,
    figure_source,
    off_topic,
    unrelated_excerpts,
    word_source,
)
from crossmodalrag.answer.citations import CITATION, states_absence
from crossmodalrag.answer.dated import question_dates, within
from crossmodalrag.answer.echo import restates_question
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.hedges import about_the_question, denies_what_is_there, doubts_the_reason, names_the_answer
from crossmodalrag.answer.llm import LLM, Generation, Message
from crossmodalrag.answer.numbers import made_up_numbers
from crossmodalrag.answer.parts import ANSWER_LINE, bare_line, citations_in, has_tags, split_answer, without_citations
from crossmodalrag.answer.premise import in_conversations, presupposes, unmentioned_words
from crossmodalrag.answer.prompt import (
    cited_excerpts,
    claim_messages,
    gate_messages,
    judged_statement,
    premise_messages,
)
from crossmodalrag.answer.subjects import another_subject, excerpts_about, named_subjects, neighbour_turns
from crossmodalrag.answer.superseded import newest_look
from crossmodalrag.answer.when import header_date_guess, moved_date
from crossmodalrag.config import Settings
from crossmodalrag.types import Evidence

# A backend that can only say yes or no gets this margin, beyond any fitted threshold either way.
REPLY_MARGIN = 10.0
GUESSED_CITATION_MIN_MARGIN = 0.0  # a support sentence citing nothing is given the excerpt it passed against from here
MAX_CHECKS = 5  # at most this many sentences of an answer are checked, and so shown: a short answer and its support
REPEATED = "repeated"  # a Verdict.reason: said already by an earlier sentence of the answer
UNCITED = "uncited"  # a Verdict.reason: passed, but nothing it could cite (Verification.leave_out_uncited)
HEDGE = "hedge"  # a Verdict.reason: it says the evidence lacks what the question asks or the answer, which passed
LEFT_OUT = (REPEATED, UNCITED, HEDGE)  # left out of the answer, not failed
RESTATES = "restates_question"  # a Verdict.reason: a short answer of nothing but the question's words
PREMISE = "premise_missing"  # a Verdict.reason: its excerpts never speak of a word the question takes as given
MADE_UP_NUMBER = "made_up_number"  # a Verdict.reason: passed, but its figure is not the evidence's (answer/numbers.py)
OFF_TOPIC = "off_topic"  # a Verdict.reason: a support sentence about excerpts the question and answer never touch
NOT_ABOUT = ("names_missing", "other_speaker")  # Verdict.reasons: its excerpts are about someone else


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
    unrelated: list[str] = field(default_factory=list)  # judged beside the others, holding none of its words: not cited

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
            "unrelated_citations": self.unrelated,
            "leaned_no": self.margin is not None and self.margin < 0,  # passed, then only by the tolerance
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
        before it), or a sentence is only #tags or ends in some ("#重构 [E1][E2]": left out)."""
        lines = text.splitlines()
        rebuild = any(not v.supported for v in self.verdicts) or any(map(bare_line, lines))
        rebuild = rebuild or any(map(has_tags, lines))  # "#重构 [E1][E2]": shown, it would cite E2
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
        it was judged against instead of its own citations. None cites an excerpt `unrelated` to it."""
        if verdict.unrelated:
            return self._cited(uncite(verdict, verdict.unrelated))
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
        against that the kept sentences cite, else that any sentence cites. A support sentence was
        judged against its closest excerpt, a guess: none when the judge leaned against it there (a
        margin below 0, passed only by the claims' tolerance). "Tomasz estimates a week." was judged
        against a commit that never says it (-0.31) and shown citing it; the note saying it was cited too."""
        if not verdict.short and verdict.margin is not None and verdict.margin < GUESSED_CITATION_MIN_MARGIN:
            return []
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

    def leave_out_hedges(self, question: str, evidence: list[Evidence]) -> None:
        """Leave out a support sentence saying the evidence lacks what the question asks, or the short
        answer itself, once the short answer passed (answer/hedges.py): "Answer: 7 May 2023 [E1]" went
        on "No excerpt directly states when Caroline went to the support group." (13 of 100 LoCoMo
        answers hedged so), "Answer: PostgreSQL 16 [E1]" on "No excerpt directly states that Helios
        uses PostgreSQL 16.", contradicting the answer before them. One saying what else is missing
        ("it does not say when", to a question why) stays, and so does every hedge after a short
        answer that is only the date a cited message was written while the message names another
        time (answer/when.py `header_date_guess`): "Answer: 20 April 2025 [E1]" to "When is Jonas
        moving to Lisbon?", from "... moving to Lisbon in September", went on "No excerpt directly
        states when Jonas is moving to Lisbon.", the model's own true doubt; so does one saying, to a
        question why, that the reason is not stated (answer/hedges.py `doubts_the_reason`). A hedge saying the
        excerpts the answer rests on lack what they name (answer/hedges.py `denies_what_is_there`)
        is false: it goes too."""
        short = next((v for v in self.verdicts if v.short and v.supported), None)
        if short is None:
            return
        short_claim = CITATION.sub("", ANSWER_LINE.sub("", short.sentence))
        judged = [item for item in evidence if item.id in short.judged]
        # A header date the answer will show moved to the time its message names is no guess any more.
        doubted = header_date_guess(short_claim, judged) and moved_date(short_claim, judged, question) is None
        rests_on = [body_of(item) for item in evidence if item.id in self._rests_on()]
        for verdict in self.verdicts:
            if not verdict.short and verdict.supported and states_absence(verdict.sentence):
                hedge = verdict.sentence
                about = about_the_question(hedge, question) or names_the_answer(hedge, short_claim)
                if (
                    denies_what_is_there(hedge, rests_on)
                    or about
                    and not (doubted or doubts_the_reason(hedge, question))
                ):
                    verdict.supported, verdict.reason = False, HEDGE

    def drop_off_topic(self, question: str, evidence: list[Evidence]) -> None:
        """Fail a support sentence resting on excerpts the passed short answer does not rest on, when
        it, they, the question and the short answer share no word (attribution.py `off_topic`)."""
        short = next((v for v in self.verdicts if v.short and v.supported), None)
        for verdict in self.verdicts if short else []:
            rests_on = set(verdict.cited + verdict.judged)
            if verdict.short or not verdict.supported or verdict.margin is None or rests_on & set(short.judged):
                continue
            items = [item for item in evidence if item.id in rests_on]
            if off_topic(CITATION.sub("", verdict.sentence), question, CITATION.sub("", short.sentence), items):
                verdict.supported, verdict.reason = False, OFF_TOPIC

    def _rests_on(self) -> list[str]:
        """The ids of the excerpts the kept, checked sentences cite or were judged against."""
        kept = [v for v in self.verdicts if v.supported and v.margin is not None]
        return list(dict.fromkeys(ref for v in kept for ref in v.cited + v.judged))


def uncite(verdict: Verdict, refs: list[str]) -> Verdict:
    """The verdict as if it had never cited, nor been judged against, `refs`."""
    return replace(
        verdict,
        sentence=without_citations(verdict.sentence, refs),
        cited=[ref for ref in verdict.cited if ref not in refs],
        judged=[ref for ref in verdict.judged if ref not in refs],
        added=[ref for ref in verdict.added if ref not in refs],
        unrelated=[],
    )


def with_specifics_of(claim: str, question: str, source: Evidence, pool: list[Evidence]) -> list[Evidence]:
    """The excerpt a claim's words come from and, in prompt order, those holding a number or name of
    it that one lacks: "What happened in July 2025?" was answered with a car sale, an outage and a
    lease in one sentence, attributed to (and citing only) the outage note."""
    extra = excerpts_holding_missing_specifics(claim, question, [source], pool) or []
    return [item for item in pool if item is source or item in extra]


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
    pool = [item for item in (excerpts_about(evidence, names, evidence) if names else evidence) if within(item, dated)]
    said: set[str] = set()
    text_cites = citations_in(text)  # what a sentence citing nothing rests on
    for sentence, short in split_answer(text):
        cited = citations_in(sentence)
        claim = re.sub(r"\s+", " ", CITATION.sub("", ANSWER_LINE.sub("", sentence) if short else sentence)).strip()
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
        judged = [item for item in about if within(item, dated)]  # and from the time it names
        claimed = judged if cited or text_cites else []  # an answer citing nothing claims no excerpt
        source = word_source(claim, claimed, pool) if judged else None
        if not judged and (names or dated):
            source = document_source(claim, short, claimed_all, pool)
        if source is None and judged:  # a date or figure none of them states: from the excerpt stating it
            source = figure_source(claim, question, judged, pool)
        if source is not None:  # and the excerpts holding the numbers and names its source lacks
            verdict.attributed, judged = source.id, with_specifics_of(claim, question, source, pool)
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
    lead = judged_statement(question, claims[0], short=True) if words else ""  # read as its claim check reads them
    ahead = [premise_messages(evidence, checked[0].judged, w, lead) for w in words]
    margins = judge(llm, prompts[:1] + ahead + prompts[1:])
    premise_margins = margins[1 : 1 + len(ahead)]
    for verdict, margin in zip(checked, margins[:1] + margins[1 + len(ahead) :], strict=True):
        verdict.margin = margin
        verdict.supported = margin >= min_margin
    _second_look(llm, question, evidence, checked, claims, pool, min_margin)
    newest_look(llm, question, evidence, checked, claims, judge)
    for verdict, claim in zip(checked, claims, strict=True):
        if verdict.supported and made_up_numbers(claim, question, evidence):  # the judge reads words, not figures
            verdict.supported, verdict.reason = False, MADE_UP_NUMBER
        together = cited_excerpts(evidence, verdict.judged) if verdict.supported else []
        verdict.unrelated = [item.id for item in unrelated_excerpts(claim, question, together)]  # carried by another
    verification = Verification(verdicts)
    verification.leave_out_uncited()
    verification.leave_out_hedges(question, evidence)
    verification.drop_off_topic(question, evidence)
    if ahead and not verification.unsupported:  # the short answer passed: does it rest on the premise?
        short = checked[0]
        if short.added:  # its second look judged it beside more excerpts
            premise_margins = judge(llm, [premise_messages(evidence, short.judged, w, lead) for w in words])
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
            guessed = [] if verdict.cited else [item for item in judged if own & content_words(body_of(item))]
            added = [item.id for item in evidence if item in extra or item in guessed]
            retried.append((verdict, ids, added))
            prompts.append(claim_messages(question, evidence, claim, ids, verdict.short))
    for (verdict, ids, added), margin in zip(retried, judge(llm, prompts) if prompts else [], strict=True):
        if margin >= min_margin:
            verdict.margin, verdict.supported, verdict.judged, verdict.added = margin, True, ids, added
