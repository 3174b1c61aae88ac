"""Retrieval as `mem ask` and `mem eval` use it, and the deterministic evidence answer (`--no-llm`)."""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.retrieval.gate import is_weak, reason, shares_words
from crossmodalrag.retrieval.search import SearchOptions, SearchResult, search
from crossmodalrag.retrieval.semantic import SemanticIndex, open_semantic
from crossmodalrag.retrieval.snippets import focus_hits
from crossmodalrag.store import Store
from crossmodalrag.types import Answer, Evidence, Hit, excerpt, iso_time
from crossmodalrag.wording import counted, one_line

if TYPE_CHECKING:
    from crossmodalrag.agent.judge import SessionJudge

WEAK_RETRIEVAL = "weak_retrieval"
CLOSEST = 3  # hits kept after a weak_retrieval abstention, for --explain


def search_options(
    settings: Settings, top_k: int | None = None, profile: str | None = None, modalities: tuple[str, ...] = ()
) -> SearchOptions:
    """The retrieval knobs a user can set, taken from resolved settings (CLI values win)."""
    return SearchOptions(
        top_k=top_k if top_k is not None else settings.top_k,
        profile=profile or settings.profile,
        fusion=settings.fusion,
        title_boost_weight=settings.title_boost_weight,
        recency_weight=settings.recency_weight,
        recency_half_life_days=settings.recency_half_life_days,
        usage_half_life_days=settings.usage_halflife_days,
        usage_saturation=settings.usage_saturation,
        max_chunks_per_source=settings.max_chunks_per_source,
        repeat_source_factor=settings.repeat_source_factor,
        rocchio_hits=settings.rocchio_hits,
        dedupe_threshold=settings.dedupe_threshold,
        min_coverage=settings.abstain_min_coverage,
        min_similarity=settings.abstain_min_similarity,
        min_similarity_floor=settings.abstain_min_similarity_floor,
        modalities=tuple(modalities),
        match=settings.match,
    )


@dataclass
class Retriever:
    """Everything one command needs to search: options, the semantic index if any, and notices."""

    store: Store
    options: SearchOptions
    semantic: SemanticIndex | None
    notices: list[str] = field(default_factory=list)
    strategy: str = "direct"  # or "episodic" | "fusion" (agent/recall.py)
    judge: SessionJudge | None = None  # agent/judge.py: opt-in, picks the leading sessions of those two

    def search(self, query: str, answering: bool = False) -> SearchResult:
        """Ranked evidence by the strategy; `answering`: for a model to answer from (agent/recall.py)."""
        if self.strategy != "direct":
            from crossmodalrag.agent.recall import recall

            return recall(self, query, self.strategy, answering)
        return search(self.store, query, self.options, self.semantic)


def open_retriever(
    store: Store,
    settings: Settings,
    top_k: int | None = None,
    profile: str | None = None,
    lexical_only: bool = False,
    modalities: tuple[str, ...] = (),
) -> Retriever:
    """Set up retrieval once per command; says (in notices) when and why it is lexical only."""
    options = search_options(settings, top_k, profile, modalities)
    if lexical_only:
        return Retriever(store, options, None, strategy=settings.strategy)
    status = open_semantic(store, settings)
    notices = [status.notice] if status.notice else []
    if status.index is None and profile:
        notices.append(f"--profile {profile} needs vectors; ranking is lexical (BM25, recency, title) instead")
    return Retriever(store, options, status.index, notices, settings.strategy)


# One limit for every surface (CLI, HTTP API, console, MCP): a question, not a document. Over HTTP it
# travels in the address: 2,000 characters of a 4-byte script, percent-encoded, is 24,000 bytes
# (api/security.py's MAX_QUERY_BYTES and `mem serve`'s request-line limit leave room for it).
MAX_QUESTION_CHARS = 2000


def require_question(query: str) -> str:
    """The question as asked; raises CMRAGError for one of nothing but blanks or one over
    MAX_QUESTION_CHARS (every surface says so alike)."""
    if not query.strip():
        raise CMRAGError("the question is empty", 'ask something, e.g. "why did I change the parser?"')
    if len(query) > MAX_QUESTION_CHARS:
        raise CMRAGError(
            f"the question is {len(query):,} characters long: at most {MAX_QUESTION_CHARS:,} are taken",
            "ask it in fewer words; a passage is found by a few of its own words",
        )
    return query


def ask_without_llm(retriever: Retriever, query: str, debug: bool = False) -> Answer:
    """Retrieve evidence and render it as a numbered, cited answer, or abstain when it is weak."""
    started = time.perf_counter()
    result = retriever.search(query)
    answer = evidence_answer(query, result, retriever.options, started, time.perf_counter() - started)
    if debug:
        answer.debug = {"retrieval": diagnostics(result, retriever)}
    return answer


def with_retriever_notices(answer: Answer, retriever: Retriever, standing: list[str], shown: int) -> Answer:
    """The retriever's notices belong to the answer (its JSON `notices`, whichever surface asked): those
    it had from the start (`--as-of`'s "answering from memory as of seq N", "ranked lexically",
    "lexical retrieval only") first, then those said while searching for this answer (`shown`: how
    many it had before; a session judge that failed)."""
    answer.notices[:0] = [message for message in standing if message not in answer.notices]
    answer.notices.extend(retriever.notices[shown:])
    return answer


def diagnostics(result: SearchResult, retriever: Retriever) -> dict:
    """--debug's retrieval part: the gate's inputs, the weights, and every hit's score components."""
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


def evidence_answer(
    query: str, result: SearchResult, options: SearchOptions, started: float, retrieval_seconds: float
) -> Answer:
    """The deterministic answer to a search result: its evidence listed and cited, or an abstention."""
    abstained = is_weak(result, options)
    focus_hits(result.hits[:CLOSEST] if abstained else result.hits, query)  # what is shown
    evidence = [] if abstained else [Evidence(f"E{i}", hit) for i, hit in enumerate(result.hits, 1)]
    text = abstention_text(result, options) if abstained else render_evidence_answer(evidence, result.comparison)
    return Answer(
        query=query,
        abstained=abstained,
        abstention_reason=WEAK_RETRIEVAL if abstained else None,
        top_score=result.hits[0].score if result.hits else 0.0,
        match_coverage=result.coverage,
        evidence=evidence,
        text=text,
        timing={"retrieval_seconds": retrieval_seconds, "total_seconds": time.perf_counter() - started},
        retrieval="hybrid" if result.hybrid else "lexical",
        similarity=result.similarity,
        comparison=result.comparison,
        citations=[item.citation() for item in evidence],
        closest=[Evidence(f"C{i}", hit) for i, hit in enumerate(result.hits[:CLOSEST], 1)] if abstained else [],
    )


def abstention_text(result: SearchResult, options: SearchOptions) -> str:
    where = _searched(result.window or (options.after, options.before))
    if not result.hits:
        return f"No answer: nothing {where} matches this question."
    why = reason(result, options)
    if shares_words(result, options):
        # Refused for its meaning alone: "nothing matches" was untrue of evidence holding the question's words
        return f"No answer: found related evidence {where}, but none close enough to answer this question ({why})."
    return f"No answer: nothing {where} matches this question well enough ({why})."


def _searched(window: tuple[float | None, float | None]) -> str:
    """What was searched, said so that a refusal under --after/--before does not read as "nothing at all"."""
    after, before = (_moment(bound) for bound in window)
    if after and before:
        return f"from {after} to {before}"
    if after or before:
        return f"from {after} on" if after else f"before {before}"
    return "in memory"


def _moment(timestamp: float | None) -> str | None:
    """A bound as the user wrote it: the day alone at midnight (UTC), else the day and time."""
    shown = iso_time(timestamp)
    if shown is None:
        return None
    return shown[:10] if shown[11:19] == "00:00:00" else shown[:16].replace("T", " ")


def citation(evidence: Evidence) -> str:
    """How a piece of evidence is cited inline: locator plus kind and date."""
    hit = evidence.hit
    when = iso_time(hit.timestamp)
    return f"{hit.locator} ({hit.source_type}{', ' + when[:10] if when else ''})"


def source_line(item: Evidence) -> str:
    """The title and citation of a piece of evidence, the title once when the locator opens with it
    (a chat turn's: "Caroline & Melanie · session 1 (…) · D1:3"); compared composed, as a heading typed
    "Über" opens a file name macOS wrote decomposed."""
    cited, title = citation(item), item.hit.title
    opens = title and unicodedata.normalize("NFC", cited).startswith(unicodedata.normalize("NFC", title))
    return one_line(cited if opens else f"{title} — {cited}")  # a title's "\r\n" broke the numbered list


def render_evidence_answer(
    evidence: list[Evidence],
    comparison: dict | None = None,
    explain: Callable[[Hit], str] | None = None,
    heading: str | None = None,
) -> str:
    """Numbered evidence with citations and excerpts; `explain` adds a line per hit."""
    lines = [heading or f"Found {counted(len(evidence), 'piece')} of evidence:"]
    for item in evidence:
        side = ""
        if comparison and item.hit.sub_query:
            # not found by one side's own pass: by the whole question's ("both" read wrong when a side had none)
            found_by = item.hit.sub_query if item.hit.sub_query in comparison["sides"] else "the whole question"
            side = f" [for: {found_by}]"
        lines.append(f"[{item.id}] {source_line(item)}{side}")
        lines.append(f"     {excerpt(item.hit.text, start=item.hit.focus)}")
        if explain:
            lines.append(explain(item.hit))
    if comparison and comparison["missing"]:
        lines.append("No evidence found for: " + ", ".join(comparison["missing"]))
    return "\n".join(lines)
