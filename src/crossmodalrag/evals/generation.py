"""`mem eval-generation`: how well the model's answers cite and abstain, over the stored eval queries."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.answer.llm import LLM
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.config import Settings
from crossmodalrag.evals.queries import EvalQuery
from crossmodalrag.types import Answer


@dataclass
class GenerationReport:
    model: dict[str, str]
    top_k: int
    per_query: list[dict[str, Any]] = field(default_factory=list)

    def overall(self) -> dict[str, Any]:
        rows = self.per_query
        answerable = [q for q in rows if q["expected_source_uris"]]
        negatives = [q for q in rows if not q["expected_source_uris"]]
        generated = [q for q in rows if q["mode"] == "llm"]
        totals = [q["timing"]["total_seconds"] for q in generated]
        # A gate's abstention came before any token: it has no first token.
        first = [q["timing"]["first_token_seconds"] for q in generated if "first_token_seconds" in q["timing"]]
        return {
            "queries": len(rows),
            "answerable": len(answerable),
            "should_abstain": len(negatives),
            "generated": len(generated),
            "fallbacks": sum(1 for q in rows if q["fallback"]),
            # No invented [E#] in any answer the model wrote.
            "citation_validity": _mean([0.0 if q["invalid_citations"] else 1.0 for q in generated]),
            # Over answerable queries: an abstention cites nothing, so it counts as a miss.
            "source_grounding_hit": _mean([1.0 if q["cited_expected"] else 0.0 for q in answerable]),
            "source_coverage": _mean([len(q["cited_expected"]) / len(q["expected_source_uris"]) for q in answerable]),
            "abstention_correct": _mean([1.0 if q["abstention_correct"] else 0.0 for q in rows]),
            "answered_answerable": _mean([0.0 if q["abstained"] else 1.0 for q in answerable]),
            "abstained_unanswerable": _mean([1.0 if q["abstained"] else 0.0 for q in negatives]),
            "uncited_answers": sum(1 for q in generated if "no_citations" in q["warning_kinds"]),
            "latency_p50_seconds": _median(totals),
            "latency_max_seconds": round(max(totals), 3) if totals else None,
            "first_token_p50_seconds": _median(first),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "top_k": self.top_k, "overall": self.overall(), "per_query": self.per_query}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def score_answer(query: EvalQuery, answer: Answer) -> dict[str, Any]:
    """One query's generation metrics, from the answer `mem ask --json` would print."""
    gold = set(query.expected_source_uris)
    cited_uris = list(dict.fromkeys(c["source_uri"] for c in answer.citations)) if answer.mode == "llm" else []
    kinds = [w["kind"] for w in answer.citation_warnings]
    return {
        "query_text": query.query_text,
        "expected_source_uris": query.expected_source_uris,
        "answer": answer.text,
        "mode": answer.mode,
        "fallback": answer.mode != "llm" and answer.abstention_reason != "weak_retrieval",
        "abstained": answer.abstained,
        "abstention_reason": answer.abstention_reason,
        "abstention_correct": answer.abstained != bool(gold),
        "cited_source_uris": cited_uris,
        "cited_expected": [uri for uri in cited_uris if uri in gold],
        "invalid_citations": [w["citation"] for w in answer.citation_warnings if w["kind"] == "invalid_citation"],
        "warning_kinds": kinds,
        "usage": answer.usage,
        "timing": {k: round(v, 3) for k, v in answer.timing.items()},
    }


def evaluate_generation(
    retriever: Retriever,
    queries: list[EvalQuery],
    settings: Settings,
    llm: LLM,
    progress: Callable[[int, dict[str, Any]], None] | None = None,
) -> GenerationReport:
    """Ask every query exactly as `mem ask` does, with the given model, and score the answers."""
    report = GenerationReport({"provider": llm.provider, "model": llm.model}, retriever.options.top_k)
    for index, query in enumerate(queries, 1):
        row = score_answer(query, ask_with_llm(retriever, query.question, settings, llm=llm))
        report.per_query.append(row)
        if progress:
            progress(index, row)
    return report
