#!/usr/bin/env python3
"""Versioning overhead (issue 14): the same vault ingested with the change log on and off, in one run.

    python bench/versioning.py [--notes 10000] [--changed 1000] [--rounds 2] [--shared DIR] [--workdir DIR]

Generates a vault with shared/tools/make_vault.py, then, alternating off/on for `--rounds` rounds (the
fastest round of each counts, which damps a busy neighbour): a first ingest into a new database. On
the last databases: the database size (WAL checkpointed), `mem ask --no-llm` latency in process
(lexical, the vault's 20 gold queries, 5 passes), `mem verify` time, then `--changed` notes rewritten
and re-ingested (update overhead), `--as-of` the checkpoint before the change (set-up time and query
p50), and the rollback of the changed notes to that checkpoint (then verify again).

Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, latency_summary, log, machine

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import Store, open_store
from crossmodalrag.versioning.asof import as_of
from crossmodalrag.versioning.history import checkpoint, rollback
from crossmodalrag.versioning.verify import verify

PASSES = 5


def open_mode(path: Path, versioned: bool) -> Store:
    store = open_store(path)
    store.conn.versioning = versioned  # the setting CMRAG_VERSIONING decides this for `mem`
    return store


def db_mb(store: Store) -> float:
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return round(store.path.stat().st_size / 2**20, 2)


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def ask_latency(store: Store, queries: list[str], point: str | None = None) -> dict:
    settings = Settings(db_path=store.path)
    retriever = open_retriever(store, settings, lexical_only=True)
    setup = 0.0
    if point:
        setup, retriever = timed(lambda: as_of(retriever, point))
    times = []
    for _ in range(PASSES):
        for query in queries:
            seconds, _ = timed(lambda q=query: ask_without_llm(retriever, q))
            times.append(seconds * 1000)
    return {**latency_summary(times), **({"setup_ms": round(setup * 1000, 1)} if point else {})}


def rewrite(vault: Path, count: int, seed: int) -> list[Path]:
    notes = sorted(vault.rglob("*.md"))
    chosen = random.Random(seed).sample(notes, min(count, len(notes)))
    for path in chosen:
        path.write_text(path.read_text(encoding="utf-8") + "\n\nRevised: the parser now streams its input.\n")
    return chosen


def run(args: argparse.Namespace) -> dict:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cmrag-versioning-"))
    vault = work / "vault"
    if not vault.is_dir():
        log(f"generating {args.notes} notes in {vault}")
        command = [sys.executable, str(args.shared / "tools" / "make_vault.py"), "--out", str(vault)]
        subprocess.run([*command, "--notes", str(args.notes)], check=True, capture_output=True)
    queries = [q["query_text"].removeprefix("[synth] ") for q in json.loads((work / "vault_queries.json").read_text())]
    ingest: dict = {"off": [], "on": []}
    cpu: dict = {"off": [], "on": []}
    for round_ in range(args.rounds):
        for mode in ("off", "on") if round_ % 2 == 0 else ("on", "off"):  # alternate which goes first
            path = work / f"{mode}.db"
            for suffix in ("", "-wal", "-shm", "-writers"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            with open_mode(path, mode == "on") as store:
                started_cpu = time.process_time()
                seconds, report = timed(lambda s=store: ingest_notes(s, [vault]))
                cpu[mode].append(time.process_time() - started_cpu)
            ingest[mode].append(seconds)
            log(f"round {round_ + 1} ingest {mode}: {seconds:.2f} s, cpu {cpu[mode][-1]:.2f} s ({report.summary()})")
    result: dict = {"notes": args.notes, "machine": machine(), "ingest_seconds": ingest, "ingest_cpu_seconds": cpu}
    # Fastest round against fastest round, in wall time and in this process's CPU time (which a busy
    # neighbour on a shared machine disturbs much less).
    for name, times in (("ingest_overhead", ingest), ("ingest_cpu_overhead", cpu)):
        result[name] = round(min(times["on"]) / min(times["off"]) - 1, 4)
    with open_mode(work / "off.db", False) as off, open_mode(work / "on.db", True) as on:
        result["db_mb"] = {"off": db_mb(off), "on": db_mb(on)}
        result["db_ratio"] = round(result["db_mb"]["on"] / result["db_mb"]["off"], 4)
        result["ask_no_llm"] = {"off": ask_latency(off, queries), "on": ask_latency(on, queries)}
        seconds, report = timed(lambda: verify(on.conn))
        result["verify"] = {"seconds": round(seconds, 3), "ok": report.ok, "records": report.records}
        log(f"verify: {seconds:.2f} s, ok={report.ok}")
        checkpoint(on, "before-change")
        rewrite(vault, args.changed, args.seed)
        update = {}
        for mode, store in (("off", off), ("on", on)):
            update[mode], _ = timed(lambda s=store: ingest_notes(s, [vault]))
        result["update_seconds"] = {mode: round(value, 3) for mode, value in update.items()}
        result["as_of"] = ask_latency(on, queries, "before-change")
        result["ask_no_llm_after_change"] = ask_latency(on, queries)
        seconds, plan = timed(lambda: rollback(on, "before-change"))
        result["rollback"] = {"seconds": round(seconds, 3), "restored": len(plan.restore), "removed": len(plan.remove)}
        seconds, report = timed(lambda: verify(on.conn))
        result["verify_after_rollback"] = {"seconds": round(seconds, 3), "ok": report.ok, "records": report.records}
        result["db_mb_after_rollback"] = db_mb(on)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=10000)
    parser.add_argument("--changed", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    print(json.dumps(run(parser.parse_args()), indent=1))


if __name__ == "__main__":
    main()
