#!/usr/bin/env python3
"""Cold `mem ask` at ~100k chunks with vectors: process start to answer, and the model's share.

    python bench/cold_query.py [--notes 33000] [--runs 5] [--workdir DIR] [--baseline-src DIR]

Generates a vault with ../shared/tools/make_vault.py (33,000 notes ≈ 99k chunks), ingests it with
`mem ingest-notes`, installs the offline MiniLM, and stores one seeded random unit vector per chunk
under that model's identity (timing does not depend on what the vectors mean; embedding 99k
chunks for real would take hours on 2 cores). Then times `mem ask "…" --no-llm --json` as a whole
process (one warm-up run builds the memory-mapped vector copy), and breaks one in-process query
into imports, model load, vector load and search. Baselines in the same run: the same command on
a copy without vectors (lexical), and `python -c pass`; with `--baseline-src DIR` (e.g. `git archive
HEAD src | tar -x -C /tmp/base`, then `--baseline-src /tmp/base/src`) also the hybrid query and the
in-process breakdown with the package in DIR, over the same memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, machine, source_state

QUESTION = "Why are archived logs compressed with zstandard?"


def timed(command: list[str], env: dict[str, str], runs: int) -> dict:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        times.append((time.perf_counter() - started) * 1000)
    return latency_summary(times)


def store_random_vectors(db_path: Path) -> int:
    import numpy as np

    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import model_row
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.store import open_store

    settings = Settings(db_path=db_path)
    install_offline(settings)
    embedder = load_embedder(settings)
    rng = np.random.default_rng(0)
    with open_store(db_path) as store:
        model_id = model_row(store, embedder.identity)
        ids = [row[0] for row in store.conn.execute("SELECT id FROM chunks ORDER BY id")]
        with store.transaction() as conn:
            for start in range(0, len(ids), 10_000):
                block = ids[start : start + 10_000]
                vectors = rng.standard_normal((len(block), embedder.identity.dim)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                conn.executemany(
                    "INSERT INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector) VALUES (?, ?, 0, 1, ?)",
                    [(chunk, model_id, row.tobytes()) for chunk, row in zip(block, vectors, strict=True)],
                )
    return len(ids)


def in_process_breakdown(env: dict[str, str]) -> dict:
    script = f"""
import json, time
t0 = time.perf_counter()
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_store
from crossmodalrag.answer.evidence import open_retriever, ask_without_llm
t1 = time.perf_counter()
settings = load_settings(); store = open_store(settings.db_path, create=False)
retriever = open_retriever(store, settings)
t2 = time.perf_counter()
retriever.semantic.refresh()
t3 = time.perf_counter()
answer = ask_without_llm(retriever, {QUESTION!r})
t4 = time.perf_counter()
warm = []
for _ in range(9):
    started = time.perf_counter()
    ask_without_llm(retriever, {QUESTION!r})
    warm.append(time.perf_counter() - started)
print(json.dumps({{"imports_s": t1 - t0, "model_load_s": t2 - t1, "vectors_s": t3 - t2, "search_s": t4 - t3,
                  "search_warm_p50_s": sorted(warm)[4], "retrieval": answer.retrieval}}))
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in json.loads(done.stdout).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--notes", type=int, default=33_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--baseline-src", type=Path, help="also time the package in this folder (a baseline)")
    args = parser.parse_args()
    env = clean_environment()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-cold-"))
    mem = str(Path(sys.executable).with_name("mem"))
    log(f"generating {args.notes} notes")
    subprocess.run(
        [
            sys.executable,
            str(args.shared / "tools" / "make_vault.py"),
            "--out",
            str(work / "vault"),
            "--notes",
            str(args.notes),
            "--seed",
            "3",
        ],
        check=True,
        capture_output=True,
    )
    lexical_db, hybrid_db = work / "lexical" / "memory.db", work / "hybrid" / "memory.db"
    log("ingesting")
    subprocess.run(
        [mem, "ingest-notes", str(work / "vault")],
        env={**env, "CMRAG_DB_PATH": str(lexical_db)},
        check=True,
        capture_output=True,
    )
    hybrid_db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(lexical_db, hybrid_db)
    log("storing one vector per chunk")
    chunks = store_random_vectors(hybrid_db)
    ask = [mem, "ask", QUESTION, "--no-llm", "--json"]
    hybrid_env, lexical_env = {**env, "CMRAG_DB_PATH": str(hybrid_db)}, {**env, "CMRAG_DB_PATH": str(lexical_db)}
    log("timing")
    started = time.perf_counter()
    subprocess.run(ask, env=hybrid_env, check=True, capture_output=True)
    first = (time.perf_counter() - started) * 1000
    result = {
        "benchmark": "cold_query",
        "machine": machine(),
        "source": source_state(),
        "chunks": chunks,
        "first_query_after_vectors_changed_ms": round(first, 1),
        "hybrid_cold_query": timed(ask, hybrid_env, args.runs),
        "lexical_cold_query": timed(ask, lexical_env, args.runs),
        "python_start": timed([sys.executable, "-c", "pass"], env, args.runs),
        "in_process": in_process_breakdown(hybrid_env),
        "target_ms": 2000,
    }
    hybrid_p50 = result["hybrid_cold_query"]["ms_p50"]
    result["model_load_share"] = round(result["in_process"]["model_load_s"] * 1000 / hybrid_p50, 3)
    result["ratio_hybrid_vs_lexical_p50"] = round(hybrid_p50 / result["lexical_cold_query"]["ms_p50"], 2)
    result["meets_target"] = hybrid_p50 < 2000
    if args.baseline_src:
        log(f"timing the baseline in {args.baseline_src}")
        baseline_env = {**hybrid_env, "PYTHONPATH": str(args.baseline_src.resolve())}
        result["baseline"] = {
            "hybrid_cold_query": timed(ask, baseline_env, args.runs),
            "in_process": in_process_breakdown(baseline_env),
        }
        result["ratio_search_warm_vs_baseline"] = round(
            result["in_process"]["search_warm_p50_s"] / result["baseline"]["in_process"]["search_warm_p50_s"], 2
        )
    print(json.dumps(result, indent=2))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
