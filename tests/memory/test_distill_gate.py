"""scripts/distill_gate.py on a small built memory: it measures both drill-downs and decides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from crossmodalrag.evals.queries import EvalQuery, upsert_queries
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output, note

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "distill_gate.py"


def test_distill_gate_prints_both_recalls_and_a_verdict(store, db_path) -> None:
    add_docs(
        store,
        note("cache", "# Cache\n\nWe dropped the LRU render cache.\n\n## Why\n\nStale output after config changes."),
    )
    build(store, db_path, llm=ScriptedExtractor(events_output(event("We dropped the LRU render cache.", [1, 2]))))
    upsert_queries(store, [EvalQuery("Why was the LRU render cache dropped?", ["/vault/cache.md"])])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--db-path", str(db_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.rsplit("GATE:", 1)[0])
    assert report["recall_full_nodes"] == report["recall_stand_ins"] == 1.0 and report["recall_loss"] == 0.0
    # One episode of two chunks keeps one: half, not the quarter asked for, so the gate holds.
    assert report["achieved_ratio"] == 0.5 and done.stdout.strip().endswith("GATE: HOLD")
    unmatched = [sys.executable, str(SCRIPT), "--db-path", str(db_path), "--query-prefix", "[nothing]"]
    refused = subprocess.run(unmatched, capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("error: no stored eval query") and not refused.stdout


def test_distill_gate_says_in_one_line_what_is_missing(store, db_path, tmp_path) -> None:
    """No database, or one whose hierarchy is not built: an error line with a hint, exit 1, no traceback."""
    for path in (tmp_path / "nonexistent.db", db_path):  # the store fixture made db_path, with no nodes
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--db-path", str(path)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 1 and not done.stdout
        assert done.stderr.startswith("error: ") and "(hint: " in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
