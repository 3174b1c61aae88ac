#!/usr/bin/env python3
"""How often would the answer prompt hold a LoCoMo question's gold turn, were each excerpt shown with its
neighbour turns? (No model.)

    python bench/turn_reach.py [--shared DIR] [--workdir DIR]

Each of the 5 dev conversations is ingested as bench/agent_locomo.py does (`mem ingest-chat`, the offline
MiniLM); each answerable question (categories 1-4) is retrieved as `ask_with_llm` retrieves the evidence it
answers from (the default strategy, top-k 5, `answering=True`), and the questions the no-model gate refuses
are left out. Counted: questions with a gold turn among the 5 excerpts; among them or the turns just
before them (the turn each one replies to); or the turns before and after. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from agent_locomo import ingest
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_store


def reach(db: Path, questions: list[dict]) -> dict[str, int]:
    counts = {"answerable_passing_the_gate": 0, "in_the_5": 0, "with_the_turns_before": 0, "with_both_neighbours": 0}
    with open_store(db, create=False) as store:
        retriever = open_retriever(store, load_settings({"db_path": db}))
        turns = {
            chunk: (source, index, turn)
            for chunk, source, index, turn in store.conn.execute(
                "SELECT id, source_id, chunk_index, json_extract(metadata, '$.turn_id') FROM chunks"
            )
        }
        at = {(source, index): turn for source, index, turn in turns.values()}
        for question in questions:
            result = retriever.search(question["question"], answering=True)
            answer = evidence_answer(question["question"], result, retriever.options, 0.0, 0.0)
            if answer.abstained:
                continue
            places = [turns[item.hit.chunk_id] for item in answer.evidence]
            shown = {turn for _, _, turn in places}
            before = shown | {at.get((source, index - 1)) for source, index, _ in places}
            around = before | {at.get((source, index + 1)) for source, index, _ in places}
            gold = set(question["evidence"])
            counts["answerable_passing_the_gate"] += 1
            counts["in_the_5"] += bool(gold & shown)
            counts["with_the_turns_before"] += bool(gold & before)
            counts["with_both_neighbours"] += bool(gold & around)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    env = clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="turn-reach-"))
    workdir.mkdir(parents=True, exist_ok=True)
    total: dict[str, int] = {}
    for index, sample in enumerate(load_locomo(args.shared)):
        db, _ = ingest(sample, index, workdir, env, lexical_only=False)
        asked = [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        counts = reach(db, asked)
        log(f"conversation {index}: {counts}")
        total = {key: total.get(key, 0) + value for key, value in counts.items()}
    print(json.dumps({"benchmark": "turn_reach", "machine": machine(), "source": source_state(), **total}, indent=2))


if __name__ == "__main__":
    main()
