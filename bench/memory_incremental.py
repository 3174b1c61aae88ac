#!/usr/bin/env python3
"""Incremental event extraction at vault scale: how many model calls a rebuild makes, and how long
the build takes when nothing (or one note) changed.

    nice -n 5 python bench/memory_incremental.py [--notes 2000]

A synthetic vault from ../shared/tools/make_vault.py is ingested through `mem`'s own path, then
`build_memory` runs three times: the first build, a rerun on unchanged data, and a rerun after
editing one note. The extractor here is a STUB that answers every call at once with one valid event
(it counts calls; its speed is not a model's): what is measured is the bookkeeping around the
model (which sources need a call, the upper levels, the writes). A real model's cost per call is
in bench/memory_events.py. Targets: unchanged rerun 0 calls and under 5 s at 2,000 notes; one
edited note <= 3 calls.
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

from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.memory.build import build_memory
from crossmodalrag.store import open_store

ANSWER = json.dumps(
    {
        "events": [
            {
                "type": "fact",
                "statement": "A stub event for this note.",
                "when": "",
                "project": "",
                "people": [],
                "evidence": [1],
            }
        ]
    }  # fmt: skip
)


class CountingStub:
    """Not a model: answers every extraction with one valid event and counts the calls."""

    provider, model = "stub", "counting"

    def __init__(self) -> None:
        self.calls, self.usage = 0, {}

    def stream(self, messages, generation):
        self.calls += 1
        yield ANSWER


def timed_build(store, settings: Settings, stub: CountingStub) -> dict:
    before, started = stub.calls, time.perf_counter()
    report = build_memory(store, settings, llm=stub, semantic=None)
    events, episodes = report.levels["event"], report.levels["episode"]
    return {"llm_calls": stub.calls - before, "seconds": round(time.perf_counter() - started, 2),
            "events": events["events"], "episode_changed": episodes["changed"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-incremental-"))
    vault = workdir / "vault"
    tool = args.shared / "tools" / "make_vault.py"
    subprocess.run([sys.executable, str(tool), "--out", str(vault), "--notes", str(args.notes)], check=True,
                   capture_output=True)  # fmt: skip
    settings = Settings(db_path=workdir / "memory.db", llm_provider="none")
    stub = CountingStub()
    with open_store(settings.db_path) as store:
        ingest_notes(store, [vault])
        first = timed_build(store, settings, stub)
        log(f"first build: {first}")
        unchanged = timed_build(store, settings, stub)
        log(f"unchanged rerun: {unchanged}")
        note = sorted(vault.rglob("*.md"))[len(list(vault.rglob("*.md"))) // 2]
        note.write_text(note.read_text(encoding="utf-8") + "\n\nAn edit made by the benchmark.\n", encoding="utf-8")
        ingest_notes(store, [vault])
        edited = timed_build(store, settings, stub)
        log(f"one note edited: {edited}")
    print(json.dumps({"benchmark": "memory_incremental", "notes": args.notes, "machine": machine(),
                      "source": source_state(), "first_build": first, "unchanged_rerun": unchanged,
                      "one_note_edited": edited}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
