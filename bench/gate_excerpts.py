#!/usr/bin/env python3
"""Would the model's gate separate answerable from adversarial questions better judging more excerpts?

    python bench/gate_excerpts.py --model PATH.gguf [--shared DIR] [--workdir DIR] [--per-side 100] [--judged 3]
                                  [--seed 1] [--keep 0.95] [--rows ROWS.jsonl]

The gate (answer/verify.py `gate_margin`) asks, inside the answer prompt, whether ONE excerpt answers the
question: `gate_evidence`'s pick, the best match about whom the question names. For the LoCoMo dev
questions bench/calibrate_margin.py fits the threshold on (outside the generation benchmark's draw; every
answerable conjecture too), through `mem ask`'s own retriever and evidence, this records the margin for
each of the first `--judged` excerpts in the gate's order (the named person's excerpts first), where the
gold turns sit among the 5 excerpts, and the subject share. Then, over the questions of form "question"
that pass the no-model gate and the subject share (as `ask_with_llm` would judge them), per way of
scoring (the gate's excerpt, the best of the first two or three, the mean of two): the ROC AUC of
answerable against adversarial, and at the threshold fitted by calibrate_margin.py's rule (keep at least
`--keep` of the answerable ones) how many adversarial questions it refuses; the gate's excerpt also at
today's setting. Prints one JSON object on stdout; progress on stderr; rows (JSON lines) to --rows.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from calibrate_margin import auc, current_thresholds, fit, locomo_questions, settings_for
from generation import ingest_conversation
from locomo import load_locomo

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.subjects import excerpts_about, named_subjects, subject_share
from crossmodalrag.answer.verify import gate_margin
from crossmodalrag.store import open_store

SCORES = {
    "gate_excerpt": lambda margins: margins[0],
    "best_of_2": lambda margins: max(margins[:2]),
    "best_of_3": lambda margins: max(margins[:3]),
    "mean_of_2": lambda margins: sum(margins[:2]) / len(margins[:2]),
}


def judged_rows(store, settings, llm, asked: list[dict], judged: int) -> list[dict]:
    retriever = open_retriever(store, settings)
    rows = []
    for item in asked:
        question, started = item["question"], time.perf_counter()
        result = retriever.search(question, answering=True)
        answer = evidence_answer(question, result, retriever.options, started, 0.0)
        row = {"question": question, "category": item["category"], "form": query_form(question)}
        row["retrieval_refused"] = answer.abstained
        if not answer.abstained:
            evidence = answer.evidence
            names = named_subjects(question)
            about = excerpts_about(evidence, names, evidence) if names else []
            order = about + [e for e in evidence if e not in about]  # gate_evidence's pick comes first
            budget = settings.llm_evidence_chars
            row["subject_share"] = subject_share(question, evidence)
            row["judged"] = [e.id for e in order[:judged]]
            row["margins"] = [round(gate_margin(llm, question, evidence, budget, e), 3) for e in order[:judged]]
            ids = ",".join(str(e.hit.chunk_id) for e in evidence)
            turns = dict(
                store.conn.execute(f"SELECT id, json_extract(metadata, '$.turn_id') FROM chunks WHERE id IN ({ids})")
            )
            gold = set(item.get("evidence") or [])
            row["gold_at"] = [e.id for e in evidence if turns.get(e.hit.chunk_id) in gold]
        row["seconds"] = round(time.perf_counter() - started, 2)
        rows.append(row)
        log(f"{question[:60]}: {row.get('margins')} gold {row.get('gold_at')}")
    return rows


def summary(rows: list[dict], keep: float, min_share: float, setting: float) -> dict:
    judged = [
        r for r in rows
        if r["form"] == "question" and r.get("margins")
        and (r["subject_share"] is None or r["subject_share"] >= min_share)
    ]  # fmt: skip
    answerable = [r for r in judged if r["category"] != 5]
    adversarial = [r for r in judged if r["category"] == 5]
    scores = {}
    for name, score in SCORES.items():
        positives = [score(r["margins"]) for r in answerable]
        negatives = [score(r["margins"]) for r in adversarial]
        fitted = fit([{"set": "locomo", "margin": margin} for margin in positives], keep)  # the documented rule
        points = {"fitted": fitted} | ({"setting": setting} if name == "gate_excerpt" else {})
        scores[name] = {
            "auc": auc(positives, negatives),
            **{
                f"at_{label}": {
                    "threshold": value,
                    "answerable_kept": sum(p >= value for p in positives),
                    "adversarial_refused": sum(n < value for n in negatives),
                }
                for label, value in points.items()
            },
        }
    first_gold = [(r["gold_at"] or ["none"])[0] for r in answerable]
    return {
        "answerable": len(answerable),
        "adversarial": len(adversarial),
        "gold_first_at": {at: first_gold.count(at) for at in ("E1", "E2", "E3", "E4", "E5", "none")},
        "gold_in_the_gate_excerpt": sum(r["judged"][0] in r["gold_at"] for r in answerable),
        "scores": scores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--per-side", type=int, default=100)
    parser.add_argument("--judged", type=int, default=3, help="excerpts judged per question, in the gate's order")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=float, default=0.95)
    parser.add_argument("--rows", type=Path, help="also write every question's row here (JSON lines)")
    args = parser.parse_args()
    env = clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gate-excerpts-"))
    workdir.mkdir(parents=True, exist_ok=True)
    llm_env = {"CMRAG_LLM_MODEL_PATH": str(args.model.resolve()), "CMRAG_LLM_THREADS": "0"}
    started = time.perf_counter()
    settings = settings_for(workdir / "any.db", llm_env)
    llm = load_llm(settings)
    data = load_locomo(args.shared)
    chosen = locomo_questions(data, args.per_side, args.seed, conjectures=True)
    rows: list[dict] = []
    for index in sorted({i for i, _ in chosen}):
        db = workdir / f"locomo-{index}.db"
        if not db.exists():
            ingest_conversation(data[index], workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        with open_store(db, create=False) as store:
            asked = [q for i, q in chosen if i == index]
            found = judged_rows(store, settings_for(db, llm_env), llm, asked, args.judged)
        rows += [{"conversation": index, **row} for row in found]
    if args.rows:
        args.rows.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = {
        "benchmark": "gate_excerpts",
        "model": args.model.name,
        "machine": machine(),
        "source": source_state(),
        "questions": len(rows),
        "refused_before_the_model": sum(r["retrieval_refused"] for r in rows),
        **summary(rows, args.keep, settings.abstain_min_subject_share, current_thresholds()["question"]),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
