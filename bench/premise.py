#!/usr/bin/env python3
"""Fit the premise check (`verify_min_premise_margin`, answer/premise.py) on LoCoMo dev.

    python bench/premise.py --model PATH.gguf [--shared DIR] [--workdir DIR] [--answerable 240] [--seed 7]
    python bench/premise.py --model PATH.gguf --financebench     # what it would do over documents

An adversarial LoCoMo question often swaps one detail of what was said ("For how long has Nate had
his snakes?" of his turtles). For every adversarial question of LoCoMo dev and `--answerable`
answerable ones (drawn with `--seed`), through the library path of `mem ask` (each conversation
ingested with `mem ingest-chat` as bench/generation.py does, the retriever, its no-model gate, the
subject share, the model's gate): the question's words no excerpt holds (`unmentioned_words`, for
questions `presupposes` accepts) and, for each, the model's yes-minus-no margin that the gate's
excerpt speaks of it (`premise_messages`; the product asks it of the excerpts the short answer
cites, which are mostly that one: measuring it needs no written answer).

Reported per threshold: of the questions the gates before the answer let through, the adversarial
and answerable ones it refuses, on the fit set (the questions of bench/generation.py's draws, seeds
0 and 3, left out) and on those draws apart; the AUC of the lowest margin. `--financebench`: the same
measurement over FinanceBench dev's PDFs (lexical; every question answerable), which is why the
product asks only of conversation turns. Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from calibrate_margin import auc, current_thresholds, settings_for
from generation import CATEGORIES, ingest_conversation, pick_questions
from locomo import load_locomo

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.premise import presupposes, unmentioned_words
from crossmodalrag.answer.prompt import premise_messages
from crossmodalrag.answer.subjects import subject_share
from crossmodalrag.answer.verify import gate_evidence, gate_margin, judge
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_pdfs
from crossmodalrag.store import open_store

THRESHOLDS = (-1.0, -0.75, -0.5, -0.35, -0.25, -0.15, 0.0)
BENCHMARK_SEEDS = (0, 3)  # bench/generation.py's draws reported in docs/benchmarks.md


def choose(data: list[dict], answerable: int, seed: int) -> list[tuple[int, dict]]:
    pool = [(i, q) for i, s in enumerate(data) for q in s["qa"] if q.get("category") in CATEGORIES]
    adversarial = [item for item in pool if item[1]["category"] == 5]
    others = [item for item in pool if item[1]["category"] != 5]
    return adversarial + random.Random(seed).sample(others, min(answerable, len(others)))


def measure(settings: Settings, llm, questions: list[tuple[bool, bool, str]]) -> list[dict]:
    """(adversarial, in a benchmark draw, question) each through retrieval, the gates and the premise."""
    store = open_store(settings.db_path)
    retriever = open_retriever(store, settings)
    thresholds = current_thresholds()
    rows = []
    for adversarial, benchmark, question in questions:
        started = time.perf_counter()
        answer = evidence_answer(question, retriever.search(question), retriever.options, started, 0.0)
        row = {"question": question, "adversarial": adversarial, "benchmark": benchmark, "words": []}
        rows.append(row)
        if answer.abstained:
            row["refused_by"] = "retrieval"
            continue
        evidence = answer.evidence
        share = subject_share(question, evidence)
        if share is not None and share < settings.abstain_min_subject_share:
            row["refused_by"] = "subject_share"
            continue
        row["words"] = unmentioned_words(question, evidence) if presupposes(question) else []
        if not row["words"]:
            continue  # nothing to check: the model's gate is not needed either
        judged = gate_evidence(question, evidence)
        row["gate_margin"] = round(gate_margin(llm, question, evidence, settings.llm_evidence_chars, judged), 3)
        if row["gate_margin"] < thresholds[query_form(question)]:
            row["refused_by"] = "gate"
        margins = judge(llm, [premise_messages(evidence, [judged.id], word) for word in row["words"]])
        row["premise"] = [round(m, 3) for m in margins]
    store.close()
    return rows


def report(rows: list[dict]) -> dict:
    """Refusals per threshold among the questions no earlier gate refused."""
    passing = [r for r in rows if "refused_by" not in r]

    def lowest(row: dict) -> float:
        return min(row.get("premise") or [float("inf")])

    def refused(items: list[dict]) -> dict:
        adversarial = [r for r in items if r["adversarial"]]
        answerable = [r for r in items if not r["adversarial"]]
        return {
            "passing": {"adversarial": len(adversarial), "answerable": len(answerable)},
            "refused": {
                str(t): {
                    "adversarial": sum(lowest(r) < t for r in adversarial),
                    "answerable": sum(lowest(r) < t for r in answerable),
                    "answerable_questions": [r["question"] for r in answerable if lowest(r) < t],
                }
                for t in THRESHOLDS
            },
        }

    checked = [r for r in rows if r.get("premise")]
    return {
        "fit": refused([r for r in passing if not r["benchmark"]]),
        "benchmark_draws": refused([r for r in passing if r["benchmark"]]),
        "auc_lowest_margin": auc(
            [lowest(r) for r in checked if not r["adversarial"]], [lowest(r) for r in checked if r["adversarial"]], 3
        ),
        "checked": {
            "adversarial": sum(r["adversarial"] for r in checked),
            "answerable": sum(not r["adversarial"] for r in checked),
        },
        "refused_before": {
            gate: sum(r.get("refused_by") == gate for r in rows) for gate in ("retrieval", "subject_share", "gate")
        },
    }


def financebench(shared: Path, workdir: Path, llm, llm_env: dict) -> dict:
    """Answerable questions over documents: how many each threshold would refuse if the check ran there."""
    root = shared / "data" / "financebench"
    questions = [json.loads(line) for line in (root / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    db = workdir / "financebench.db"
    if not db.exists():
        pdfs = sorted({root / "pdfs" / f"{q['doc_name']}.pdf" for q in questions})
        log(f"[financebench] ingesting {len(pdfs)} PDFs")
        ingest_pdfs(open_store(db), [path for path in pdfs if path.exists()])
    lexical = {**llm_env, "CMRAG_EMBED_MODEL": "BAAI/bge-small-en-v1.5"}  # not on disk offline: lexical
    rows = measure(settings_for(db, lexical), llm, [(False, False, " ".join(q["question"].split())) for q in questions])
    checked = [r for r in rows if r.get("premise") and "refused_by" not in r]
    return {
        "questions": len(rows),
        "checked": len(checked),
        "refused": {str(t): sum(min(r["premise"]) < t for r in checked) for t in THRESHOLDS},
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--answerable", type=int, default=240)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--financebench", action="store_true", help="FinanceBench dev's PDFs instead of LoCoMo")
    args = parser.parse_args()
    env = clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="premise-"))
    workdir.mkdir(parents=True, exist_ok=True)
    llm_env = {"CMRAG_LLM_MODEL_PATH": str(args.model.resolve())}
    started = time.perf_counter()
    llm = load_llm(settings_for(workdir / "any.db", llm_env))
    if args.financebench:
        result = {"benchmark": "premise_financebench", "model": args.model.name, "machine": machine()}
        print(json.dumps({**result, **financebench(args.shared, workdir, llm, llm_env)}, indent=2))
        return
    data = load_locomo(args.shared)
    drawn = {(i, q["question"]) for seed in BENCHMARK_SEEDS for i, q in pick_questions(data, 20, seed)}
    chosen = choose(data, args.answerable, args.seed)
    rows: list[dict] = []
    for index in sorted({i for i, _ in chosen}):
        db = workdir / f"locomo-{index}.db"
        ingest_conversation(data[index], workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        questions = [
            (q["category"] == 5, (i, q["question"]) in drawn, " ".join(q["question"].split()))
            for i, q in chosen
            if i == index
        ]
        log(f"[locomo] conversation {index}: {len(questions)} questions")
        rows += measure(settings_for(db, llm_env), llm, questions)
    print(
        json.dumps(
            {
                "benchmark": "premise",
                "model": args.model.name,
                "machine": machine(),
                "source": source_state(),
                "current_default": Settings(db_path=Path("x")).verify_min_premise_margin,
                **report(rows),
                "wall_seconds": round(time.perf_counter() - started, 1),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
