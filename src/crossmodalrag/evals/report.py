"""The retrieval eval as `mem eval --json` and the API's `/eval` both run it: stored queries, one report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import Settings
from crossmodalrag.errors import EvalError
from crossmodalrag.evals.queries import gold_warnings, list_queries
from crossmodalrag.evals.retrieval import evaluate
from crossmodalrag.memory.retrieve import at_level
from crossmodalrag.store import Store


@dataclass
class EvalRun:
    """The report (its JSON) plus what a person should be told beside it (notes and gold warnings)."""

    report: dict[str, Any]
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def run_retrieval_eval(
    store: Store,
    settings: Settings,
    top_k: int | None = None,
    query_prefix: str | None = None,
    profile: str | None = None,
    modalities: tuple[str, ...] = (),
    level: str = "evidence",
) -> EvalRun:
    """Measure retrieval on the stored eval queries (those starting with `query_prefix`). Raises EvalError."""
    queries = list_queries(store, query_prefix)
    if not queries:
        raise EvalError(
            "no eval queries" + (f" start with {query_prefix!r}" if query_prefix else " are stored"),
            "load some with `mem eval --load-queries FILE`, or run `mem seed-sample`",  # the API's hint too
        )
    warnings = gold_warnings(store, queries)
    retriever = open_retriever(store, settings, top_k or settings.top_k, profile, modalities=tuple(modalities))
    retriever = at_level(retriever, level, settings)  # above evidence: only the top-k drilled-down chunks count
    report = {**evaluate(retriever, queries).to_dict(), "level": level}
    return EvalRun(report, list(retriever.notices), warnings)
