"""kill -9 in the middle of event extraction loses at most the source in flight: every source the
build finished keeps its events and its done mark, no other source has events, and the next build
extracts only what is left."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossmodalrag.memory.events import Extraction, build_events
from tests.memory.helpers import ScriptedExtractor, add_docs, event, events_output, note

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX kill -9")

ROOT = Path(__file__).resolve().parents[2]
SOURCES = 6
# The child extracts with a scripted model that hangs on its third call: the kill lands mid-source.
CHILD = """
import sys, time
from crossmodalrag.memory.events import Extraction, build_events
from crossmodalrag.store import open_store
from tests.memory.helpers import ScriptedExtractor, event, events_output

class Hanging(ScriptedExtractor):
    def stream(self, messages, generation):
        if len(self.calls) == 2:
            time.sleep(120)
        yield from super().stream(messages, generation)

with open_store(sys.argv[1]) as store:
    build_events(store, Extraction(Hanging(events_output(event("We shipped the release to users."))), None))
"""


def done_sources(db_path: Path) -> int:
    with sqlite3.connect(db_path, timeout=30) as conn:
        return conn.execute("SELECT COUNT(*) FROM memory_extractions WHERE status = 'done'").fetchone()[0]


def test_a_killed_build_loses_at_most_the_source_in_flight(store, db_path) -> None:
    add_docs(store, *[note(f"n{i}", f"# Note {i}\n\nWe shipped release {i} to users.", days=i) for i in range(SOURCES)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db_path)], cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 120
        while done_sources(db_path) < 2 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, "the child ended before the kill"
        time.sleep(0.3)  # into the third source's hanging call
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    conn = store.conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = dict(conn.execute("SELECT source_id, events FROM memory_extractions WHERE status = 'done'").fetchall())
    assert len(done) == 2
    events = dict(conn.execute("SELECT source_id, COUNT(*) FROM memory_nodes GROUP BY source_id").fetchall())
    assert events == done  # the finished sources whole, nothing of the one in flight
    rerun = build_events(store, Extraction(ScriptedExtractor(events_output(event("We shipped it."))), None))
    assert (rerun.extracted, rerun.unchanged, rerun.llm_calls) == (SOURCES - 2, 2, SOURCES - 2)
