#!/usr/bin/env python3
"""LoCoMo dev questions that name a day or a month with its year: turn recall by the date factor.

    python bench/dated_questions.py --workdir DIR [--factors 1.0 1.2 1.3 1.5]

Reads the memories `bench/agent_locomo.py --workdir DIR` built (memory-<n>.db, one per conversation)
and asks each answerable question (categories 1-4) for which retrieval/dates.py finds a named span
through `mem ask`'s retriever (direct, hybrid when the memory has vectors) at top-k 5 and 10, with
retrieval/dates.py's DATE_FACTOR set to each value (1.0: the factor off, the baseline of the same
run). Prints one JSON object: per factor, turn recall@5 and @10 over those questions.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import DEFAULT_SHARED, log, machine, source_state
from locomo import CATEGORIES, load_locomo

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.retrieval import search
from crossmodalrag.retrieval.dates import named_spans
from crossmodalrag.store import open_store


def turn_ids(store) -> dict[int, str]:
    return dict(store.conn.execute("SELECT id, json_extract(metadata, '$.turn_id') FROM chunks").fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, required=True, help="an agent_locomo.py work dir")
    parser.add_argument("--factors", type=float, nargs="+", default=[1.0, 1.2, 1.3, 1.5])
    args = parser.parse_args()
    recall = {factor: {5: 0.0, 10: 0.0} for factor in args.factors}
    asked = 0
    for index, sample in enumerate(load_locomo(args.shared)):
        db = args.workdir / f"memory-{index}.db"
        with open_store(db, create=False) as store:
            ids = turn_ids(store)
            retrievers = {k: open_retriever(store, load_settings({"db_path": db}), k) for k in (5, 10)}
            for question in sample["qa"]:
                if question.get("category") not in CATEGORIES or not question.get("evidence"):
                    continue
                if not named_spans(question["question"]):
                    continue
                asked += 1
                gold = set(question["evidence"])
                for factor in args.factors:
                    search.DATE_FACTOR = factor
                    for k, retriever in retrievers.items():
                        found = {ids.get(hit.chunk_id) for hit in retriever.search(question["question"]).hits}
                        recall[factor][k] += len(gold & found) / len(gold)
        log(f"{db.name}: {asked} dated questions so far")
    print(
        json.dumps(
            {
                "benchmark": "dated_questions",
                "questions": asked,
                "turn_recall": {
                    str(factor): {f"@{k}": round(total / max(asked, 1), 4) for k, total in by_k.items()}
                    for factor, by_k in recall.items()
                },
                "machine": machine(),
                "source": source_state(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
