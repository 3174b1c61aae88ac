#!/usr/bin/env python3
"""FinanceBench dev answered by the model, for the questions whose gold page `mem ask` retrieves.

    PYTHONPATH=TREE/src python bench/financebench_answers.py --db DB --model GGUF [--shared DIR] > rows.jsonl

DB is a memory of the 74 PDFs (bench/excerpt_reach.py leaves one in its work dir). Each question is
asked through `mem ask --json --no-llm` (no model) first; those whose gold page is among the
excerpts are asked again through `mem ask --json` with the model. One row per such question on stdout
(abstained, reason, token F1 of `short_answer` against the gold answer, whether a citation is a gold
page, the answer); the totals on stderr. The tree measured is the one PYTHONPATH names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from benchlib import DEFAULT_SHARED

WORD = re.compile(r"\w+")


def token_f1(answer: str, gold: str) -> float:
    a, b = WORD.findall(answer.lower()), WORD.findall(gold.lower())
    common = sum(min(a.count(t), b.count(t)) for t in set(a))
    return 0.0 if not common else 2 * common / (len(a) + len(b))


def ask(question: str, env: dict, *flags: str) -> dict:
    command = [sys.executable, "-m", "crossmodalrag", "ask", question, "--json", *flags]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CMRAG_")}
    env.update(CMRAG_DB_PATH=str(args.db), CMRAG_LLM_MODEL_PATH=str(args.model.resolve()), HF_HUB_OFFLINE="1")
    root = args.shared / "data" / "financebench"
    questions = [json.loads(line) for line in (root / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    rows = []
    for question in questions:
        pages = {(question["doc_name"], e["evidence_page_num"] + 1) for e in question["evidence"]}
        found = ask(question["question"], env, "--no-llm")
        retrieved = {(Path(e["source_uri"]).stem, e.get("page")) for e in found["evidence"]}
        if found["abstained"] or not retrieved & pages:
            continue
        answer = ask(question["question"], env, "--no-stream")
        row = {
            "question": question["question"],
            "abstained": answer["abstained"],
            "reason": answer["abstention_reason"],
            "f1": 0.0 if answer["abstained"] else token_f1(answer["short_answer"] or answer["answer"], question["answer"]),
            "cited_gold_page": any((Path(c["source_uri"]).stem, c.get("page")) in pages for c in answer["citations"]),
            "answer": answer["answer"],
            "gold": question["answer"],
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    answered = sum(not row["abstained"] for row in rows)
    f1 = sum(row["f1"] for row in rows) / len(rows) if rows else 0.0
    cited = sum(row["cited_gold_page"] for row in rows)
    print(f"{len(rows)} questions, {answered} answered, short-answer F1 {f1:.3f}, {cited} cite a gold page",
          file=sys.stderr)  # fmt: skip


if __name__ == "__main__":
    main()
