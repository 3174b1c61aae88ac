"""The deterministic evidence answer behind `mem ask --no-llm`, with its abstention gate."""

from __future__ import annotations

import time

from crossmodalrag.config import Settings
from crossmodalrag.retrieval.search import SearchOptions, SearchResult, search
from crossmodalrag.store import Store
from crossmodalrag.types import Answer, Evidence, excerpt, iso_time

WEAK_RETRIEVAL = "weak_retrieval"


def search_options(settings: Settings, top_k: int | None = None) -> SearchOptions:
    """The retrieval knobs a user can set, taken from resolved settings."""
    return SearchOptions(
        top_k=top_k if top_k is not None else settings.top_k,
        title_boost_weight=settings.title_boost_weight,
        recency_weight=settings.recency_weight,
        recency_half_life_days=settings.recency_half_life_days,
        max_chunks_per_source=settings.max_chunks_per_source,
        dedupe_threshold=settings.dedupe_threshold,
    )


def should_abstain(result: SearchResult, settings: Settings) -> bool:
    """The gate: abstain when no returned evidence covers enough of the query's (idf-weighted) terms."""
    return not result.hits or result.coverage < settings.abstain_min_coverage


def ask_without_llm(store: Store, query: str, settings: Settings, top_k: int | None = None) -> Answer:
    """Retrieve evidence and render it as a numbered, cited answer, or abstain when it is weak."""
    started = time.perf_counter()
    result = search(store, query, search_options(settings, top_k))
    retrieval_seconds = time.perf_counter() - started
    top_score = result.hits[0].score if result.hits else 0.0
    abstained = should_abstain(result, settings)
    evidence = [] if abstained else [Evidence(f"E{i}", hit) for i, hit in enumerate(result.hits, 1)]
    if abstained:
        text = (
            "No answer: nothing in memory matches this question well enough "
            f"(the best evidence covers {result.coverage:.0%} of the query; at least "
            f"{settings.abstain_min_coverage:.0%} is needed)."
        )
    else:
        text = render_evidence_answer(evidence)
    return Answer(
        query=query,
        abstained=abstained,
        abstention_reason=WEAK_RETRIEVAL if abstained else None,
        top_score=top_score,
        match_coverage=result.coverage,
        evidence=evidence,
        text=text,
        timing={"retrieval_seconds": retrieval_seconds, "total_seconds": time.perf_counter() - started},
    )


def citation(evidence: Evidence) -> str:
    """How a piece of evidence is cited inline: locator plus kind and date."""
    hit = evidence.hit
    when = iso_time(hit.timestamp)
    return f"{hit.locator} ({hit.source_type}{', ' + when[:10] if when else ''})"


def render_evidence_answer(evidence: list[Evidence]) -> str:
    lines = [f"Found {len(evidence)} piece{'s' if len(evidence) != 1 else ''} of evidence:"]
    for item in evidence:
        lines.append(f"[{item.id}] {item.hit.title} — {citation(item)}")
        lines.append(f"     {excerpt(item.hit.text)}")
    return "\n".join(lines)
