"""`mem ask` with a language model: retrieve, gate, prompt, stream, validate citations, or fall back.

The retrieval gate runs first, so a question memory cannot answer never loads or calls a model.
Any model failure before a usable answer falls back to the deterministic evidence answer, with
one notice saying why: an answer is always given.
"""

from __future__ import annotations

import time
from typing import Callable

from crossmodalrag.answer.citations import (
    CITATION,
    is_insufficient,
    merged_citations,
    strip_marker,
    validate,
    without_copied_note,
)
from crossmodalrag.answer.evidence import Retriever, diagnostics, evidence_answer, render_evidence_answer
from crossmodalrag.answer.forms import UNDECIDED, is_statement
from crossmodalrag.answer.llm import LLM, Generation, LLMError, load_llm
from crossmodalrag.answer.parts import dated_text, short_answer, split_answer, without_asked_question
from crossmodalrag.answer.prompt import INSUFFICIENT, build_messages, echoes_instructions, newest_note
from crossmodalrag.answer.subjects import full_names, named_subjects, subject_share
from crossmodalrag.answer.superseded import SUPERSEDED
from crossmodalrag.answer.verify import (
    MADE_UP_NUMBER,
    MAX_CHECKS,
    NOT_ABOUT,
    PREMISE,
    RESTATES,
    Verification,
    gate_evidence,
    gate_margin,
    gate_min_margin,
    verify_answer,
)
from crossmodalrag.answer.when import with_day
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.types import Answer, Evidence
from crossmodalrag.wording import counted

LLM_INSUFFICIENT = "llm_insufficient"
UNSUPPORTED = "unsupported"
SUBJECT_MISSING = "subject_missing"
PROMPT_ECHO = "prompt_echo"  # a citation warning: a sentence copying the prompt's note on dates, removed
GONE = ("invalid_citation", PROMPT_ECHO)  # warnings about what is gone from the text before it is checked
MAX_SENTENCES = 4  # the short answer and three sentences of support, as the prompt asks


class MarkerGuard:
    """Passes streamed text on, except a leading INSUFFICIENT_EVIDENCE: that becomes an abstention
    line after generation, so the raw marker never flashes on the user's screen."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.pending = ""
        self.decided = False

    def feed(self, piece: str) -> None:
        if self.decided:
            self.emit(piece)
            return
        self.pending += piece
        head = self.pending.lstrip().lstrip("*_`\"' ").upper().replace(" ", "_")
        if head and not INSUFFICIENT.startswith(head[: len(INSUFFICIENT)]):
            self.decided = True
            self.emit(self.pending.lstrip())
            self.pending = ""


def ask_with_llm(
    retriever: Retriever,
    query: str,
    settings: Settings,
    on_text: Callable[[str], None] | None = None,
    llm: LLM | None = None,
    debug: bool = False,
) -> Answer:
    """A grounded answer: model text citing [E#] evidence, an abstention with its reason, or the
    evidence answer when no model can be used. `on_text` receives the answer as it streams.

    With verification on (the default), the model first judges whether the evidence answers the
    question at all, then every sentence it wrote against the excerpts that sentence cites."""
    started = time.perf_counter()
    result = retriever.search(query, answering=True)
    retrieval_seconds = time.perf_counter() - started
    fallback = evidence_answer(query, result, retriever.options, started, retrieval_seconds)
    if debug:
        fallback.debug = {"retrieval": diagnostics(result, retriever)}
    if fallback.abstained:
        return fallback  # weak retrieval: no model call at all
    try:
        llm = llm or load_llm(settings)
        model = {"provider": llm.provider, "model": llm.model}
    except CMRAGError as error:
        fallback.notices.append(f"showing the evidence answer: {error}")
        return fallback
    ranked = fallback.evidence  # the gate judges the best excerpt for this question, in any prompt order
    _in_last_order(fallback, getattr(llm, "last_evidence", None), result.comparison)
    evidence, budget = fallback.evidence, settings.llm_evidence_chars
    checks: dict = {}
    timing = {"retrieval_seconds": retrieval_seconds}
    messages, raw = build_messages(query, evidence, budget), ""
    share = subject_share(query, evidence) if settings.llm_verify else None
    if share is not None:
        checks.update(subject_share=round(share, 3), subject_min_share=settings.abstain_min_subject_share)
    if share is not None and share < settings.abstain_min_subject_share:
        answer = _abstain(fallback, SUBJECT_MISSING, _subject_missing_text(evidence, share), model, checks, timing)
        answer.timing["total_seconds"] = time.perf_counter() - started
        return answer
    llm.last_evidence = [item.hit.chunk_id for item in evidence]  # what the KV cache will start with
    try:
        if settings.llm_verify:
            checked = time.perf_counter()
            best = gate_evidence(query, ranked).hit
            judged = next(item for item in evidence if item.hit is best)
            checks["gate_margin"] = round(gate_margin(llm, query, evidence, budget, judged), 3)
            checks["gate_evidence"] = judged.id
            checks["gate_min_margin"] = gate_min_margin(settings, query)
            timing["gate_seconds"] = time.perf_counter() - checked
        if checks.get("gate_margin", 0.0) < checks.get("gate_min_margin", 0.0):
            answer = _abstain(fallback, LLM_INSUFFICIENT, _not_answered_text(evidence), model, checks, timing)
        else:
            raw, timing = _generate(llm, messages, settings, on_text, timing)
            if echoes_instructions(raw):  # no answer, and the refusal marker inside it no refusal
                raise LLMError("it wrote out its instructions instead of an answer")
            written, copied = without_copied_note(raw, newest_note(query, evidence))
            written = without_asked_question(written)  # the question repeated before "Answer:" is no part of it
            report = validate(strip_marker(written) if not _leads_with_marker(written) else "", evidence)
            report.warnings += [{"kind": PROMPT_ECHO, "citation": "", "detail": line[:200]} for line in copied]
            if is_insufficient(written, report):
                answer = _abstain(fallback, LLM_INSUFFICIENT, _insufficient_text(evidence), model, checks, timing)
            else:
                answer = _verified(llm, query, evidence, settings, report, fallback, model, checks, timing)
        if answer.abstained and is_statement(query):
            answer = _undecided(fallback, answer, timing)
    except LLMError as error:
        fallback.notices.append(f"the language model failed ({error}); showing the evidence answer")
        fallback.llm = model
        fallback.timing["total_seconds"] = time.perf_counter() - started
        return fallback
    answer.usage = {
        "prompt_chars": sum(len(m["content"]) for m in messages),
        "evidence_chars": len(messages[-1]["content"]),
        **llm.usage,
    }
    answer.timing["total_seconds"] = time.perf_counter() - started
    if debug:
        answer.debug = {**(fallback.debug or {}), "prompt": messages, "raw_output": raw, "verification": checks}
    return answer


def _in_last_order(fallback: Answer, last: list[int] | None, comparison: dict | None) -> None:
    """Put the excerpts the last question's prompt opened with first, in that order, as far as they
    were retrieved again (the rest follow in rank order), and number them E1, E2, ... anew:
    the prompt then opens like the last one, and llama.cpp reads only what follows (a chat's
    follow-up). Only with as many excerpts as the last prompt: their ids and budget shares are
    part of the prompt's opening; and only when this question's best excerpt is the one the last
    prompt opened with: a small model leans on E1, and an unrelated question (an agent's next
    `memory_ask`) must not be answered from the last one's best excerpt first."""
    if not last or len(last) != len(fallback.evidence) or fallback.evidence[0].hit.chunk_id != last[0]:
        return
    by_chunk = {item.hit.chunk_id: item for item in fallback.evidence}
    leading = []
    for chunk in last:
        if chunk not in by_chunk:
            break
        leading.append(by_chunk[chunk])
    order = leading + [item for item in fallback.evidence if item not in leading]
    if not leading or order == fallback.evidence:
        return
    fallback.evidence = [Evidence(f"E{index}", item.hit) for index, item in enumerate(order, 1)]
    fallback.citations = [item.citation() for item in fallback.evidence]
    fallback.text = render_evidence_answer(fallback.evidence, comparison)


def _generate(llm: LLM, messages: list, settings: Settings, on_text, timing: dict) -> tuple[str, dict]:
    """Stream the answer (through the marker guard to `on_text`); the raw text and its timings."""
    generation = Generation(settings.llm_max_tokens, settings.llm_temperature)
    guard = MarkerGuard(on_text) if on_text else None
    pieces: list[str] = []
    first_token: float | None = None
    generation_started = time.perf_counter()
    try:
        for piece in llm.stream(messages, generation):
            if first_token is None:
                first_token = time.perf_counter() - generation_started
            pieces.append(piece)
            if guard:
                guard.feed(piece)
            if len(_first_sentences("".join(pieces))) < len("".join(pieces)):
                break  # small models ignore "at most three sentences": stop paying for the rest
    except LLMError as error:
        if pieces:
            raise LLMError(f"{error.message} (mid-answer)", error.hint) from None
        raise
    generation_seconds = time.perf_counter() - generation_started
    gate = timing.get("gate_seconds", 0.0)
    return _first_sentences("".join(pieces)), {
        **timing,
        # What the user waits for: the gate's check happens before the first token can appear.
        "first_token_seconds": gate + (first_token if first_token is not None else generation_seconds),
        "generation_seconds": generation_seconds,
    }


def _first_sentences(text: str) -> str:
    """The short-answer line and at most MAX_SENTENCES - 1 sentences of support, and never less than
    the first sentence that cites: a model that runs on for four uncited sentences on its answer line
    cites in the bullet after them, and cut before it the answer would name no source."""
    parts = split_answer(text)
    cited = next((i for i, (sentence, _) in enumerate(parts) if CITATION.search(sentence)), len(parts))
    keep = min(max(MAX_SENTENCES, cited + 1), MAX_CHECKS)  # no further than the checks reach
    if len(parts) <= keep:
        return text
    kept = parts[:keep]
    short = [sentence for sentence, is_short in kept if is_short]
    support = " ".join(sentence for sentence, is_short in kept if not is_short)
    return "\n".join(short + [support])


def _verified(llm, query, evidence, settings, report, fallback, model, checks, timing) -> Answer:
    """The model's answer after each sentence was checked: unsupported sentences removed, or an
    abstention (`unsupported`) when the short answer or everything else fails."""
    text = report.text
    if settings.llm_verify:
        started = time.perf_counter()
        min_premise = settings.verify_min_premise_margin
        verification = verify_answer(llm, query, evidence, text, settings.verify_min_margin, min_premise)
        timing["verification_seconds"] = time.perf_counter() - started
        checks.update(claims=[v.to_dict() for v in verification.verdicts], claim_min_margin=settings.verify_min_margin)
        if verification.premise:
            checks.update(
                premise={w: round(m, 3) for w, m in verification.premise.items()}, premise_min_margin=min_premise
            )
        if verification.unsupported:
            return _abstain(fallback, UNSUPPORTED, _unsupported_text(verification, query), model, checks, timing)
        removed = [w for w in report.warnings if w["kind"] in GONE]  # gone from `text` already
        report = validate(merged_citations(verification.answer_text(text)), evidence)
        report.warnings = removed + report.warnings
        report.warnings += [
            {"kind": "unsupported_claim", "citation": "", "detail": v.sentence[:200]} for v in verification.dropped
        ]
    text, moved = dated_text(report.text, evidence, query)
    if moved:
        _note_moved_dates(checks.get("claims", []), moved)
    answer = _copy(fallback, abstained=False, reason=None, text=text, model=model, checks=checks)
    answer.citations, answer.citation_warnings = report.citations(), report.warnings
    answer.short_answer = short_answer(report.text, query, evidence)  # moves the date itself, once
    if moved:
        answer.notices.append(f"date moved: the message it cites was written on {moved[0]} and speaks of {moved[1]}")
    answer.timing = dict(timing)
    return answer


def _note_moved_dates(claims: list[dict], moved: tuple[str, str]) -> None:
    """Each judged sentence whose date `answer` shows moved (when.py) gets `shown_as`, the sentence as
    shown: the claims record what the model wrote, and read alone said the heading's date was supported."""
    for claim in claims:
        shown = with_day(claim["sentence"], *moved, count=1)
        if shown != claim["sentence"]:
            claim["shown_as"] = shown


def _abstain(fallback: Answer, reason: str, text: str, model: dict, checks: dict, timing: dict) -> Answer:
    answer = _copy(fallback, abstained=True, reason=reason, text=text, model=model, checks=checks)
    answer.timing = dict(timing)
    return answer


def _undecided(fallback: Answer, withheld: Answer, timing: dict) -> Answer:
    """A statement the model could not settle: the evidence answer, saying so, instead of "no answer".
    Retrieval found evidence on the claim (its gate passed); the model judges only whether that
    evidence says the claim is true, and a 1.5B model also declines on claims the evidence
    contradicts or only implies (SciFact train through `mem chat --json`: 10 of the first 40 claims
    withheld at 3042d22, the evidence of each stored). Without a verdict the user still gets what
    memory holds on the claim, as `--no-llm` shows it; `verification.withheld` names the check."""
    fallback.mode, fallback.llm = "evidence", withheld.llm
    fallback.verification = {**(withheld.verification or {}), "withheld": withheld.abstention_reason}
    fallback.text = f"{UNDECIDED}\n{fallback.text}"
    fallback.timing = {**fallback.timing, **timing}
    return fallback


def _copy(fallback: Answer, abstained: bool, reason: str | None, text: str, model: dict, checks: dict) -> Answer:
    return Answer(
        query=fallback.query,
        abstained=abstained,
        abstention_reason=reason,
        top_score=fallback.top_score,
        match_coverage=fallback.match_coverage,
        evidence=fallback.evidence,
        text=text,
        retrieval=fallback.retrieval,
        similarity=fallback.similarity,
        comparison=fallback.comparison,
        mode="llm",
        llm=model,
        verification=checks or None,
    )


def _leads_with_marker(text: str) -> bool:
    return text.strip().lstrip("*_`\"' ").upper().replace(" ", "_").startswith(INSUFFICIENT)


def _not_answered_text(evidence: list) -> str:
    # Its margin is in `verification` (and beside the evidence with --explain), on every surface alike.
    return (
        f"No answer: the language model judged that the {counted(len(evidence), 'retrieved piece')} of evidence "
        f"{'does' if len(evidence) == 1 else 'do'} not answer this question."
    )


def _unsupported_text(verification: Verification, question: str) -> str:
    if any(v.reason == PREMISE for v in verification.verdicts):
        lowest = min(verification.premise.values())
        unspoken = ", ".join(f'"{word}"' for word, margin in verification.premise.items() if margin == lowest)
        return (
            f"No answer: the question takes {unspoken} as given, but the evidence the language model's answer "
            "rests on never speaks of it, so the answer is withheld."
        )
    short = next((v for v in verification.verdicts if v.short), None)
    if short is not None and short.reason == RESTATES:
        return (
            "No answer: the language model's short answer only repeats words of the question "
            f'("{short_answer(short.sentence)}"), so it is withheld.'
        )
    if short is not None and short.reason == MADE_UP_NUMBER:
        return (
            f'No answer: the language model\'s short answer ("{short_answer(short.sentence)}") states a number that '
            "the evidence neither states nor yields by one step of arithmetic, so it is withheld."
        )
    if short is not None and short.reason == SUPERSEDED:
        newest = short.judged[0]
        return (
            f'No answer: the language model\'s short answer ("{short_answer(short.sentence)}") states what an older '
            f"note said, and the newest note on it ({newest}) does not say so, so it is withheld."
        )
    names = named_subjects(question)
    if names and verification.dropped and all(v.reason in NOT_ABOUT for v in verification.dropped):
        named = " or ".join(name.title() for name in full_names(question))  # "John Millar", not "John or Millar"
        return (
            f"No answer: the evidence the language model's answer rests on is not about {named}, as the "
            "question asks (another person's words, or about something else), so it is withheld."
        )
    return (
        "No answer: the language model's answer is not supported by the evidence it cites "
        f"({len(verification.dropped)} of {len(verification.verdicts)} sentences failed the check), so it is withheld."
    )


def _subject_missing_text(evidence: list, share: float) -> str:
    return (
        f"No answer: only {round(share * len(evidence))} of the {len(evidence)} retrieved pieces of evidence are "
        "in the own words of the person the question names; the rest is what others said, so the model is not asked."
    )


def _insufficient_text(evidence: list) -> str:
    return (
        f"No answer: the language model judged that none of the {len(evidence)} retrieved pieces of evidence "
        "answers this question."
    )
