#!/usr/bin/env python3
"""Re-syncing a vault that barely changed: what `mem sync` and every save under `mem sync --watch` cost.

    python bench/resync.py [--notes 5000] [--shared DIR] [--workdir DIR] [--reps 3]

Generates a vault (shared/tools/make_vault.py), ingests it once with `mem ingest-notes` (the baseline:
a first ingest reads every note), then times, as whole processes, the same command again with nothing
changed and after one note was edited (what a watch applies per save). The database lies in the
workdir, where no embedding model is installed: this measures reading and storing, not embedding.
Run it on two trees (PYTHONPATH=OTHER/src) to compare them. Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, make_vault, print_result


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:5])} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return time.perf_counter() - started


def measure(vault: Path, database: Path, reps: int) -> dict:
    env = clean_environment() | {"CMRAG_DB_PATH": str(database)}
    ingest = [sys.executable, "-m", "crossmodalrag", "ingest-notes", str(vault)]
    first = timed(ingest, env)
    log(f"first ingest: {first:.2f} s")
    unchanged = [timed(ingest, env) * 1000 for _ in range(reps)]
    edited = []
    note = sorted(vault.rglob("*.md"))[len(list(vault.rglob("*.md"))) // 2]
    for rep in range(reps):
        with note.open("a", encoding="utf-8") as handle:
            handle.write(f"\nEdited in round {rep}.\n")
        edited.append(timed(ingest, env) * 1000)
    unchanged_ms, edited_ms = latency_summary(unchanged), latency_summary(edited)
    return {
        "first_ingest_seconds": round(first, 2),
        "unchanged": unchanged_ms,
        "one_note_edited": edited_ms,
        "unchanged_vs_first_ingest": round(unchanged_ms["ms_p50"] / 1000 / first, 3),
        "edited_vs_first_ingest": round(edited_ms["ms_p50"] / 1000 / first, 3),
    }


def package_folder() -> str:
    """Which tree the `mem` processes ran (PYTHONPATH picks one; source_state names this file's)."""
    command = [sys.executable, "-c", "import crossmodalrag, os; print(os.path.dirname(crossmodalrag.__file__))"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=5000, help="vault size (default 5000)")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (tools/make_vault.py)")
    parser.add_argument("--workdir", type=Path, help="where the vault and database go (default: a temp dir)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each re-sync (default 3)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cmrag-resync-"))
    vault = workdir / f"vault-{args.notes}"
    if not vault.is_dir():
        make_vault(args.shared, vault, args.notes)
    database = workdir / f"resync-{os.getpid()}.db"
    result = {
        "benchmark": "resync",
        "notes": args.notes,
        "package": package_folder(),
        **measure(vault, database, args.reps),
    }
    return print_result(result)


if __name__ == "__main__":
    raise SystemExit(main())
