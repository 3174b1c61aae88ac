"""Text rendering of results for a terminal (JSON comes from the result types' to_dict)."""

from __future__ import annotations

import json
import sys
from typing import Any

from crossmodalrag.types import Answer


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def explain_line(components: dict[str, float], weights: dict[str, float]) -> str:
    parts = " + ".join(f"{weights[name]:.2f}×{name} {components[name]:.3f}" for name in weights)
    return f"     score = {parts}   (bm25 {components['bm25']:.3f})"


def render_answer(answer: Answer, explain: bool, weights: dict[str, float]) -> str:
    if not explain or answer.abstained:
        return answer.text
    lines = answer.text.splitlines()
    out = [lines[0]]
    body = iter(lines[1:])
    for item in answer.evidence:
        out.append(next(body))
        out.append(next(body))
        out.append(explain_line(item.hit.components, weights) + f" → {item.hit.score:.3f}")
    return "\n".join(out)


def status_line(answer: Answer) -> str:
    verdict = f"abstained ({answer.abstention_reason})" if answer.abstained else f"{len(answer.evidence)} evidence"
    return (
        f"[retrieval: lexical · {verdict} · coverage {answer.match_coverage:.0%} · "
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
