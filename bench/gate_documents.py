#!/usr/bin/env python3
"""The model's gate on documents, both ways: FinanceBench questions with their filing in memory and without it.

    python bench/gate_documents.py --model PATH.gguf [--shared DIR] [--workdir DIR] [--keep 0.95] [--threads N]

The gate's threshold for questions (`abstain_min_margin`, bench/calibrate_margin.py) was fitted on
LoCoMo: chat turns of a line or two. Over notes and PDFs the judged excerpt is a long section or a
page, and no set had measured the gate there in both directions. FinanceBench dev has 62 questions
on 37 filings of 24 companies; the companies are split into two halves (alternately, by name) and
each half's filings ingested into a memory of its own (lexical: embedding 10k pages takes over an
hour on 2 cores). Each question is asked, through the library path `mem ask` takes (retriever,
no-model gate, then `gate_margin` on the excerpt the product picks), in both memories:
- `filing`: its own company's memory, the filing stored (answerable as far as retrieval reaches it:
  rows say whether the filing and a gold page are among the 5 excerpts);
- `absent`: the other memory, where no filing of that company exists (every answer would be about
  another company: the gate should refuse).
`--answer N` also runs the whole `mem ask` path (gate, answer, sentence checks) on the first N
questions in both memories, at `--threshold` (default: the setting), and counts what the gate at
`--also-threshold` would have refused as well.
Reported: the no-model gate's refusals, the margins' ROC AUC (filing among the excerpts vs absent;
a gold page among them vs absent), the share refused at the current threshold, the highest threshold
keeping `--keep` of the questions whose filing is among the excerpts, and the one maximising Youden's
J (the gold page in view kept minus absent kept). Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from calibrate_margin import auc, settings_for
from financebench import gold_pages, load_questions

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.answer.verify import gate_evidence, gate_margin, gate_min_margin
from crossmodalrag.ingest import ingest_pdfs
from crossmodalrag.store import open_store


def halves(questions: list[dict]) -> dict[str, int]:
    """Each company's memory: 0 or 1, alternately by name."""
    return {company: i % 2 for i, company in enumerate(sorted({q["company"] for q in questions}))}


def build(db: Path, pdfs: list[Path]) -> None:
    if db.exists():
        return
    log(f"ingesting {len(pdfs)} filings into {db.name}")
    with open_store(db) as store:
        ingest_pdfs(store, pdfs)


def judge(settings, llm, question: dict, condition: str) -> dict:
    text = question["question"]
    with open_store(settings.db_path, create=False) as store:
        retriever = open_retriever(store, settings)
        started = time.perf_counter()
        result = retriever.search(text, answering=True)
        answer = evidence_answer(text, result, retriever.options, started, 0.0)
        row = {"condition": condition, "question": text, "form": query_form(text), "no_model_refused": answer.abstained}
        if answer.abstained or llm is None:
            return row
        docs = [(Path(e.hit.source_uri).stem, e.hit.page) for e in answer.evidence]
        judged = gate_evidence(text, answer.evidence)
        row.update(
            filing_in_excerpts=any(d == question["doc_name"] for d, _ in docs),
            page_in_excerpts=any(d == question["doc_name"] and p in gold_pages(question) for d, p in docs),
            judged_filing=Path(judged.hit.source_uri).stem == question["doc_name"],
            margin=round(gate_margin(llm, text, answer.evidence, settings.llm_evidence_chars, judged), 3),
            threshold=gate_min_margin(settings, text),
        )
    return row


def answer(settings, llm, question: dict, condition: str) -> dict:
    """The whole `mem ask` path (gate, answer, sentence checks) for one question at the defaults."""
    with open_store(settings.db_path, create=False) as store:
        result = ask_with_llm(open_retriever(store, settings), question["question"], settings, llm=llm)
    pages = {
        (Path(e.hit.source_uri).stem, e.hit.page)
        for e in result.evidence
        if e.id in {c["id"] for c in result.citations}
    }
    checks = result.verification or {}
    return {
        "condition": condition,
        "question": question["question"],
        "abstained": result.abstained,
        "reason": result.abstention_reason,
        "gate_margin": checks.get("gate_margin"),
        "cites_filing": any(doc == question["doc_name"] for doc, _ in pages),
        "cites_gold_page": any(doc == question["doc_name"] and p in gold_pages(question) for doc, p in pages),
        "short_answer": result.short_answer,
        "gold": question["answer"][:200],
    }


def answered(rows: list[dict], also: float) -> dict:
    """Per condition: answered, abstained by reason; and the abstentions in all with the gate at
    `also` as well (a margin below it abstains at the gate; above it the same deterministic answer
    follows)."""
    out = {}
    for condition in ("filing", "absent"):
        part = [r for r in rows if r["condition"] == condition]
        reasons: dict[str, int] = {}
        for r in part:
            reasons[r["reason"] or "answered"] = reasons.get(r["reason"] or "answered", 0) + 1
        stricter = sum(r["abstained"] or (r["gate_margin"] is not None and r["gate_margin"] < also) for r in part)
        out[condition] = {
            "questions": len(part),
            "outcomes": reasons,
            "answered_citing_the_filing": sum(not r["abstained"] and r["cites_filing"] for r in part),
            "answered_citing_a_gold_page": sum(not r["abstained"] and r["cites_gold_page"] for r in part),
            f"abstained_with_the_gate_at_{also}": stricter,
        }
    return out


def youden(kept: list[float], refused: list[float]) -> dict | None:
    """The threshold (just below a kept margin) with the most of `kept` at or above it minus the most
    of `refused` at or above it: calibrated both ways, where keep-95% looks at one side only."""
    if not kept or not refused:
        return None
    best = max(
        (sum(m >= t for m in kept) / len(kept) - sum(m >= t for m in refused) / len(refused), t)
        for t in (round(m - 0.005, 3) for m in kept)
    )
    return {"threshold": best[1], "j": round(best[0], 3)}


def asked_by_mem(questions: list[dict], half: dict[str, int], dbs: list[Path], env: dict) -> dict:
    """The gate before the model as a user meets it: each question through a `mem ask --no-llm --json`
    process in both memories; how many are refused for a name nothing in the memory holds."""
    refused = {"filing": 0, "absent": 0}
    for question in (q for q in questions if query_form(q["question"]) == "question"):
        own = half[question["company"]]
        for condition, db in (("filing", dbs[own]), ("absent", dbs[1 - own])):
            command = [sys.executable, "-m", "crossmodalrag", "ask", question["question"], "--no-llm", "--json"]
            done = subprocess.run([*command, "--db-path", str(db)], env=env, capture_output=True, text=True, check=True)
            answer = json.loads(done.stdout)
            refused[condition] += answer["abstained"] and "nothing in memory mentions" in answer["answer"]
    return refused


def fit(margins: list[float], keep: float) -> float | None:
    """The highest threshold keeping at least `keep` of `margins` (just below the last one kept)."""
    ordered = sorted(margins)
    return round(ordered[int(round(len(ordered) * (1 - keep), 6))] - 0.005, 2) if ordered else None


def summary(rows: list[dict], keep: float) -> dict:
    questions = [r for r in rows if r["form"] == "question"]  # the form this threshold is for
    judged = [r for r in questions if "margin" in r]
    kept = [r["margin"] for r in judged if r["condition"] == "filing" and r["filing_in_excerpts"]]
    absent = [r["margin"] for r in judged if r["condition"] == "absent"]
    threshold = judged[0]["threshold"] if judged else None
    fitted = fit(kept, keep)

    def refused(margins: list[float], at: float | None) -> float | None:
        return round(sum(m < at for m in margins) / len(margins), 4) if margins and at is not None else None

    page = [r["margin"] for r in judged if r["condition"] == "filing" and r["page_in_excerpts"]]
    return {
        "questions": {c: sum(r["condition"] == c for r in questions) for c in ("filing", "absent")},
        "refused_before_the_model": {
            c: sum(r["no_model_refused"] for r in questions if r["condition"] == c) for c in ("filing", "absent")
        },
        "judged": {"filing_in_excerpts": len(kept), "absent": len(absent)},
        "filing_page_in_excerpts": sum(r.get("page_in_excerpts", False) for r in judged if r["condition"] == "filing"),
        "auc_filing_vs_absent": auc(kept, absent, digits=3),
        "margin_median": {
            "filing_in_excerpts": sorted(kept)[len(kept) // 2] if kept else None,
            "absent": sorted(absent)[len(absent) // 2] if absent else None,
        },
        "current": {
            "threshold": threshold,
            "refused_filing": refused(kept, threshold),
            "refused_absent": refused(absent, threshold),
        },
        "fitted": {
            "keep": keep,
            "threshold": fitted,
            "refused_filing": refused(kept, fitted),
            "refused_absent": refused(absent, fitted),
        },
        "auc_page_vs_absent": auc(page, absent, digits=3),
        "youden": youden(page, absent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", type=float, default=0.95)
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: the product's rule)")
    parser.add_argument("--questions", type=int, help="the gate's margins for the first N questions (default: all)")
    parser.add_argument("--answer", type=int, default=0, metavar="N", help="also answer the first N questions")
    parser.add_argument("--threshold", type=float, help="the gate's threshold for the answers (default: the setting's)")
    parser.add_argument("--also-threshold", type=float, default=-0.84, help="count what this one would refuse too")
    parser.add_argument(
        "--no-model", action="store_true", help="the gate before the model only (no margins), also through `mem ask`"
    )
    args = parser.parse_args()
    clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gate-documents-"))
    workdir.mkdir(parents=True, exist_ok=True)
    root = args.shared / "data" / "financebench"
    questions = load_questions(root)
    half = halves(questions)
    dbs = [workdir / f"financebench-{i}.db" for i in (0, 1)]
    for i, db in enumerate(dbs):
        names = sorted({q["doc_name"] for q in questions if half[q["company"]] == i})
        build(db, [root / "pdfs" / f"{name}.pdf" for name in names])
    env = {
        "CMRAG_LLM_MODEL_PATH": str(args.model.resolve()),
        "CMRAG_LLM_THREADS": str(args.threads),
        "CMRAG_EMBED_MODEL": "BAAI/bge-small-en-v1.5",  # not on disk offline: lexical, as the memories are
    }
    process_env = {**os.environ, **env}  # the `mem ask` processes read the same settings
    started = time.perf_counter()
    llm = None if args.no_model else load_llm(settings_for(dbs[0], env))
    rows = []
    for number, question in enumerate(questions[: args.questions], 1):
        own = half[question["company"]]
        for condition, db in (("filing", dbs[own]), ("absent", dbs[1 - own])):
            rows.append(judge(settings_for(db, env), llm, question, condition))
        log(f"{number}/{len(questions)}: {[r.get('margin') for r in rows[-2:]]}")
    answers = []
    if args.threshold is not None:
        env["CMRAG_ABSTAIN_MIN_MARGIN"] = str(args.threshold)
    for number, question in enumerate(
        [q for q in questions if query_form(q["question"]) == "question"][: args.answer], 1
    ):
        own = half[question["company"]]
        for condition, db in (("filing", dbs[own]), ("absent", dbs[1 - own])):
            answers.append(answer(settings_for(db, env), llm, question, condition))
        log(f"answered {number}/{args.answer}: {[(r['reason'] or 'answered') for r in answers[-2:]]}")
    result = {
        "benchmark": "gate_documents",
        "model": args.model.name,
        "machine": machine(),
        "source": source_state(),
        **summary(rows, args.keep),
        **({"answers": answered(answers, args.also_threshold)} if answers else {}),
        **({"mem_ask_refused_for_a_name": asked_by_mem(questions, half, dbs, process_env)} if args.no_model else {}),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "rows": rows,
        "answer_rows": answers,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
