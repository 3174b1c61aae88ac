"""`mem eval`: retrieval quality of the stored eval queries, overall and per query."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.evals.metrics import score_ranking
from crossmodalrag.evals.queries import EvalQuery
from crossmodalrag.retrieval.search import is_weak

METRICS = ("hit_rate", "recall", "mrr", "ndcg")


@dataclass
class EvalReport:
    top_k: int
    hybrid: bool = False
    per_query: list[dict[str, Any]] = field(default_factory=list)

    def overall(self) -> dict[str, Any]:
        answerable = [q for q in self.per_query if q["expected_source_uris"]]
        negatives = [q for q in self.per_query if not q["expected_source_uris"]]
        summary: dict[str, Any] = {
            "queries": len(self.per_query),
            "answerable": len(answerable),
            "should_abstain": len(negatives),
        }
        for name in METRICS:
            summary[name] = _mean([q["metrics"][name] for q in answerable])
        summary["abstention_accuracy"] = _mean([1.0 if q["abstention_correct"] else 0.0 for q in self.per_query])
        summary["false_abstain_rate"] = _mean([1.0 if q["abstained"] else 0.0 for q in answerable])
        summary["false_answer_rate"] = _mean([0.0 if q["abstained"] else 1.0 for q in negatives])
        return summary

    def to_dict(self) -> dict[str, Any]:
        return {
            "top_k": self.top_k,
            "retrieval": "hybrid" if self.hybrid else "lexical",
            "overall": self.overall(),
            "per_query": self.per_query,
        }


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def evaluate(retriever: Retriever, queries: list[EvalQuery]) -> EvalReport:
    """Run every query through the same retrieval and gate `mem ask` uses."""
    report = EvalReport(retriever.options.top_k, retriever.semantic is not None)
    for query in queries:
        result = retriever.search(query.question)
        ranked = [hit.source_uri for hit in result.hits]
        gold = set(query.expected_source_uris)
        abstained = is_weak(result, retriever.options)
        report.per_query.append(
            {
                "query_text": query.query_text,
                "expected_source_uris": query.expected_source_uris,
                "retrieved_source_uris": list(dict.fromkeys(ranked)),
                "metrics": {k: round(v, 6) for k, v in score_ranking(ranked, gold, retriever.options.top_k).items()}
                if gold
                else None,
                "coverage": round(result.coverage, 6),
                "similarity": None if result.similarity is None else round(result.similarity, 6),
                "abstained": abstained,
                "abstention_correct": abstained != bool(gold),
            }
        )
    return report
