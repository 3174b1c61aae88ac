"""Text rendering of results for a terminal (JSON comes from the result types' to_dict)."""

from __future__ import annotations

import json
import sys
from typing import Any

from crossmodalrag.answer.evidence import render_evidence_answer
from crossmodalrag.types import Answer, Hit


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def explain_line(hit: Hit, weights: dict[str, float]) -> str:
    """`score = 0.52×vector 0.910 + …` with the raw values (bm25, cosine) alongside."""
    if "rrf" in hit.components:
        parts = f"rrf {hit.components['rrf']:.4f} (reciprocal rank fusion of BM25 and vector ranks)"
    else:
        parts = " + ".join(
            f"{weight:.2f}×{name} {hit.components.get(name, 0.0):.3f}" for name, weight in weights.items()
        )
    raw = f"bm25 {hit.components['bm25']:.3f}"
    if "cosine" in hit.components:
        raw += f", cosine {hit.components['cosine']:.3f}"
    side = f", found by sub-query {hit.sub_query!r}" if hit.sub_query else ""
    if "ocr_factor" in hit.components:
        side += f", ×{hit.components['ocr_factor']:.3f} for OCR confidence {hit.components['ocr_confidence']:.2f}"
    return f"     score = {parts} → {hit.score:.3f}   ({raw}{side})"


def render_answer(answer: Answer, explain: bool, weights: dict[str, float]) -> str:
    if not explain or answer.abstained:
        return answer.text
    return render_evidence_answer(answer.evidence, answer.comparison, lambda hit: explain_line(hit, weights))


def status_line(answer: Answer) -> str:
    verdict = f"abstained ({answer.abstention_reason})" if answer.abstained else f"{len(answer.evidence)} evidence"
    similarity = "" if answer.similarity is None else f" · similarity {answer.similarity:.2f}"
    return (
        f"[retrieval: {answer.retrieval} · {verdict} · coverage {answer.match_coverage:.0%}{similarity} · "
        f"top score {answer.top_score:.3f} · {answer.timing['total_seconds'] * 1000:.0f} ms]"
    )


def render_eval(report: dict[str, Any]) -> str:
    lines = [f"{'hit':>4} {'rec':>5} {'mrr':>5} {'ndcg':>5} {'cov':>5}  query"]
    for q in report["per_query"]:
        metrics = q["metrics"]
        if metrics:
            cells = (
                f"{metrics['hit_rate']:>4.0f} {metrics['recall']:>5.2f} {metrics['mrr']:>5.2f} {metrics['ndcg']:>5.2f}"
            )
        else:
            cells = f"{'abstain ok' if q['abstention_correct'] else 'ANSWERED':>22}"
        flag = "" if q["abstention_correct"] else "  (gate wrong)"
        lines.append(f"{cells} {q['coverage']:>5.2f}  {q['query_text']}{flag}")
    o = report["overall"]

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    lines.append(
        f"overall@{report['top_k']}: hit_rate {fmt(o['hit_rate'])}  recall {fmt(o['recall'])}  mrr {fmt(o['mrr'])}  "
        f"ndcg {fmt(o['ndcg'])}  over {o['answerable']} answerable; abstention accuracy "
        f"{fmt(o['abstention_accuracy'])} over {o['queries']} queries"
    )
    return "\n".join(lines)


def render_doctor(report: dict[str, Any]) -> str:
    database = report["database"]
    lines = [f"database: {database['path']}" + ("" if database["exists"] else " (missing)")]
    if database.get("schema_version") is not None:
        lines.append(
            f"  schema v{database['schema_version']}, {database['size_mb']} MB, integrity {database['integrity']}, "
            f"{database['chunks']} chunks from {sum(database['sources'].values())} sources {database['sources']}"
        )
    lines.append(f"config file: {report['config_file'] or 'none (defaults and environment)'}")
    lines.append(f"connectors: notes {report['connectors']['notes'] or '-'}; git {report['connectors']['git'] or '-'}")
    lines.append("extras: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in report["extras"].items()))
    embeddings = report["embeddings"]
    line = f"embedding model: {embeddings['model']}"
    if "embedded" in embeddings:
        counts = f"{embeddings['embedded']}/{embeddings['chunks']} chunks embedded"
        line += f" ({counts}, window {embeddings['max_tokens']} tokens)"
    lines.append(line)
    lines += [f"problem: {p}" for p in report["problems"]] + [f"why: {e}" for e in report["explanations"]]
    return "\n".join(lines)
