"""The bundled sample through the hierarchy without a model: git commits become events, the
levels that can run do, and the sample's synth and drift slices evaluate at every level."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

from crossmodalrag.cli.main import main


def run(*argv: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def test_sample_builds_and_evaluates_at_a_level(db_path, monkeypatch) -> None:
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    seeded = run("seed-sample", "--db-path", str(db_path))
    assert seeded["queries"] >= 18
    built = run("build-memory", "--db-path", str(db_path))
    assert built["levels"]["event"]["from_git"] == 11 and built["levels"]["event"]["waiting"] >= 10
    assert "skipped" in built["levels"]["concept"]  # no vectors in a fresh test memory
    for prefix in ("[sample-synth]", "[sample-drift]"):
        plain = run("eval", "--db-path", str(db_path), "--query-prefix", prefix)
        fused = run("eval", "--db-path", str(db_path), "--query-prefix", prefix, "--level", "event")
        assert plain["overall"]["answerable"] == fused["overall"]["answerable"] >= 2
        assert all(len(q["retrieved_source_uris"]) <= plain["top_k"] for q in fused["per_query"])
    stats = run("memory-stats", "--db-path", str(db_path))
    assert stats["nodes"]["event"] == 11 and stats["sources"]["pending"] >= 10
