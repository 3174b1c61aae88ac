"""`mem ask` with a language model: retrieve, gate, prompt, stream, validate citations, or fall back.

The retrieval gate runs first, so a question memory cannot answer never loads or calls a model.
Any model failure before a usable answer falls back to the deterministic evidence answer, with
one notice saying why: an answer is always given.
"""

from __future__ import annotations

import time
from typing import Callable

from crossmodalrag.answer.citations import is_insufficient, strip_marker, validate
from crossmodalrag.answer.evidence import Retriever, evidence_answer
from crossmodalrag.answer.llm import LLM, Generation, LLMError, load_llm
from crossmodalrag.answer.prompt import INSUFFICIENT, build_messages
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.types import Answer

LLM_INSUFFICIENT = "llm_insufficient"


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
    evidence answer when no model can be used. `on_text` receives the answer as it streams."""
    started = time.perf_counter()
    result = retriever.search(query)
    retrieval_seconds = time.perf_counter() - started
    fallback = evidence_answer(query, result, retriever.options, started, retrieval_seconds)
    if debug:
        fallback.debug = {"retrieval": _diagnostics(result, retriever)}
    if fallback.abstained:
        return fallback  # weak retrieval: no model call at all
    try:
        llm = llm or load_llm(settings)
        model = {"provider": llm.provider, "model": llm.model}
    except CMRAGError as error:
        fallback.notices.append(f"showing the evidence answer: {error}")
        return fallback

    evidence = fallback.evidence
    messages = build_messages(query, evidence, settings.llm_evidence_chars)
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
    except LLMError as error:
        fallback.notices.append(
            f"the language model failed{' mid-answer' if pieces else ''} ({error}); showing the evidence answer"
        )
        fallback.llm = model
        fallback.timing["total_seconds"] = time.perf_counter() - started
        return fallback
    generation_seconds = time.perf_counter() - generation_started

    raw = "".join(pieces)
    report = validate(strip_marker(raw) if not _leads_with_marker(raw) else "", evidence)
    abstained = is_insufficient(raw, report)
    answer = Answer(
        query=query,
        abstained=abstained,
        abstention_reason=LLM_INSUFFICIENT if abstained else None,
        top_score=fallback.top_score,
        match_coverage=fallback.match_coverage,
        evidence=evidence,
        text=_insufficient_text(evidence) if abstained else report.text,
        retrieval=fallback.retrieval,
        similarity=fallback.similarity,
        comparison=fallback.comparison,
        mode="llm",
        llm=model,
        citations=[] if abstained else report.citations(),
        citation_warnings=[] if abstained else report.warnings,
        usage={
            "prompt_chars": sum(len(m["content"]) for m in messages),
            "evidence_chars": len(messages[-1]["content"]),
            **llm.usage,
        },
        timing={
            "retrieval_seconds": retrieval_seconds,
            "first_token_seconds": first_token if first_token is not None else generation_seconds,
            "generation_seconds": generation_seconds,
            "total_seconds": time.perf_counter() - started,
        },
    )
    if debug:
        answer.debug = {**(fallback.debug or {}), "prompt": messages, "raw_output": raw}
    return answer


def _leads_with_marker(text: str) -> bool:
    return text.strip().lstrip("*_`\"' ").upper().replace(" ", "_").startswith(INSUFFICIENT)


def _insufficient_text(evidence: list) -> str:
    return (
        f"No answer: the language model judged that none of the {len(evidence)} retrieved pieces of evidence "
        "answers this question."
    )


def _diagnostics(result, retriever: Retriever) -> dict:
    return {
        "coverage": round(result.coverage, 4),
        "similarity": None if result.similarity is None else round(result.similarity, 4),
        "hybrid": result.hybrid,
        "weights": retriever.options.weights(retriever.semantic is not None),
        "hits": [
            {"locator": h.locator, "score": round(h.score, 4), **{k: round(v, 4) for k, v in h.components.items()}}
            for h in result.hits
        ],
    }
