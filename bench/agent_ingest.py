#!/usr/bin/env python3
"""Chat ingest speed per format, and peak memory on a 100 MB Claude Code session (issue 13, benchmark 4).

    python bench/agent_ingest.py [--shared DIR] [--workdir DIR] [--big-mb 100]

Speed: each sample format of ../shared/data/conversations (and LoCoMo dev) is ingested into a fresh
lexical store by `ingest_conversations` (the function behind `mem ingest-chat`; embedding, which
dominates and is measured elsewhere, is not included), 3 runs, the best reported as turns/s.
Memory: a synthetic Claude Code session of --big-mb MB (user prompts, each answered by a 50 KB tool
result, as in long agent runs) is ingested by a real `mem ingest-chat` process, whose peak RSS is
compared with the same process on the 15-line `short.jsonl` (the baseline of the same run).
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.store import open_store

FORMATS = {
    "claude-code": "conversations/claude-code",
    "codex": "conversations/codex",
    "chatgpt": "conversations/chatgpt/conversations.json",
    "claude-ai": "conversations/claude-ai/conversations.json",
    "locomo": "locomo/locomo_dev.json",
}


def speed(path: Path, workdir: Path, name: str) -> dict:
    best = None
    for run in range(3):
        db = workdir / f"speed-{name}-{run}.db"
        with open_store(db) as store:
            started = time.perf_counter()
            report = ingest_conversations(store, [path])
            seconds = time.perf_counter() - started
            turns = store.conn.execute("SELECT COUNT(DISTINCT json_extract(metadata, '$.turn') || '/' || source_id)"
                                       " FROM chunks").fetchone()[0]  # fmt: skip
        best = seconds if best is None else min(best, seconds)
    return {"sessions": report.added, "turns": turns, "seconds": round(best, 3), "turns_per_s": round(turns / best)}


def write_big_session(path: Path, megabytes: int) -> int:
    output = "x" * 50_000
    lines, parent, i = 0, None, 0
    with path.open("w") as handle:
        while handle.tell() < megabytes * 1_000_000:
            result = [{"type": "tool_result", "tool_use_id": "t", "content": output}]
            for uuid, content in ((f"u{i}", f"question {i} about the deploy"), (f"r{i}", result)):
                message = {"role": "user", "content": content}
                record = {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "big", "message": message}
                handle.write(json.dumps(record) + "\n")
                parent, lines = uuid, lines + 1
            i += 1
    return lines


def peak_rss(path: Path, db: Path, env: dict) -> dict:
    """Peak RSS (MB) of one `mem ingest-chat` process, measured by the kernel (getrusage of a child)."""
    code = (
        "import resource, subprocess, sys; "
        "r = subprocess.run(sys.argv[1:], capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)"
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "crossmodalrag", "ingest-chat", str(path),
         "--db-path", str(db), "--json"], env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return {
        "peak_rss_mb": round(int(out[0]) / 1024, 1),
        "exit": int(out[1]),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--big-mb", type=int, default=100)
    args = parser.parse_args()
    env = clean_environment()
    # A fresh work dir has no embedding model installed: the RSS is the parser's and the store's.
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-ingest-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data = args.shared / "data"
    speeds = {}
    for name, relative in FORMATS.items():
        speeds[name] = speed(data / relative, workdir, name)
        log(f"{name}: {speeds[name]}")
    big = workdir / "big-session.jsonl"
    lines = write_big_session(big, args.big_mb)
    log(f"wrote {big.stat().st_size >> 20} MB, {lines} lines")
    baseline = peak_rss(data / "conversations/claude-code/short.jsonl", workdir / "rss-small.db", env)
    measured = peak_rss(big, workdir / "rss-big.db", env)
    result = {
        "benchmark": "agent_ingest",
        "machine": machine(),
        "source": source_state(),
        "formats": speeds,
        "big_session": {"megabytes": round(big.stat().st_size / 1e6, 1), "lines": lines, **measured},
        "small_session": baseline,
        "ratio_rss_big_vs_small": round(measured["peak_rss_mb"] / baseline["peak_rss_mb"], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
