"""A chat turn is dated when it was said, not when its conversation started: a session resumed weeks
later is found, cited and filtered by its later turns' own dates (chunks.said_at)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from crossmodalrag.agent.recall import memory_anchor
from crossmodalrag.agent.tools import search_memory
from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.answer.prompt import answer_header, evidence_header
from crossmodalrag.cli.main import main
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.types import Evidence
from tests.agent.chats import claude_record, write_jsonl

STARTED, RESUMED = "2026-03-02T09:00:00Z", "2026-03-24T16:30:00Z"
QUESTION = "orders backup Hetzner storage box"


def unix(day: str) -> float:
    return datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()


def resumed_session(store, tmp_path, reply: str = "Switched the target to the Hetzner storage box."):
    """A Claude Code session started on 2 March and resumed on 24 March."""
    records = [
        claude_record("u1", None, "user", "set up the nightly backup job for the orders database", timestamp=STARTED),
        claude_record("a1", "u1", "assistant", "Added a cron entry running pg_dump at 02:00.", timestamp=STARTED),
        claude_record("u2", "a1", "user", "move the orders backup to the Hetzner storage box", timestamp=RESUMED),
        claude_record("a2", "u2", "assistant", reply, timestamp=RESUMED),
    ]
    ingest_conversations(store, [write_jsonl(tmp_path / "session.jsonl", records)])


def test_a_resumed_sessions_later_turns_carry_their_own_date(any_store, tmp_path):
    resumed_session(any_store, tmp_path)
    hits = search(any_store, QUESTION, SearchOptions(top_k=2)).hits
    assert {h.locator.rsplit(" · ", 1)[1] for h in hits} == {"u2", "a2"}
    assert {h.timestamp for h in hits} == {unix(RESUMED[:-1])}
    header = evidence_header(Evidence("E1", hits[0]))
    assert "24 March 2026" in header and "2 March" not in header
    assert answer_header(Evidence("E1", hits[0])) == "[E1] (24 March 2026)"
    # Recency and relative dates ("last week") count from the newest turn, not the newest source date.
    recency = {h.locator[-2:]: h.components["recency"] for h in search(any_store, "orders", SearchOptions()).hits}
    assert recency["u2"] == 1.0 > recency["u1"]
    assert memory_anchor(Retriever(any_store, SearchOptions(), None)).date().isoformat() == RESUMED[:10]
    # The session itself keeps its start as its date (mem sources lists it there).
    assert any_store.conn.execute("SELECT timestamp FROM sources").fetchone()[0] == unix(STARTED[:-1])


def test_date_filters_read_each_turns_own_date(any_store, tmp_path):
    resumed_session(any_store, tmp_path)
    later = search(any_store, QUESTION, SearchOptions(top_k=5, after=unix("2026-03-20"))).hits
    assert {h.locator.rsplit(" · ", 1)[1] for h in later} == {"u2", "a2"}
    earlier = search(any_store, "nightly backup orders", SearchOptions(top_k=5, before=unix("2026-03-20"))).hits
    assert {h.locator.rsplit(" · ", 1)[1] for h in earlier} == {"u1", "a1"}


def test_mcp_search_and_json_ask_date_a_turn_when_it_was_said(any_store, tmp_path, capsys):
    resumed_session(any_store, tmp_path)
    found = search_memory(Retriever(any_store, SearchOptions(), None), QUESTION, limit=2, after="2026-03-20")
    assert found["count"] == 2 and {r["date"] for r in found["results"]} == {"2026-03-24"}
    assert main(["ask", QUESTION, "--no-llm", "--json", "--after", "2026-03-20"]) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert evidence and {e["timestamp"][:10] for e in evidence} == {"2026-03-24"}


def test_a_rolled_back_or_copied_session_keeps_its_turns_dates(store, tmp_path):
    """Rollback writes chunks from a stored state and `mem migrate` copies them: both keep each turn's time."""
    from crossmodalrag.store import open_store
    from crossmodalrag.store.transfer import copy_memory
    from crossmodalrag.versioning.history import checkpoint, rollback

    resumed_session(store, tmp_path)
    checkpoint(store, "resumed")
    resumed_session(store, tmp_path, reply="Switched it to S3 instead.")  # a rewritten transcript
    assert rollback(store, "resumed").restore  # the whole session written again from its state
    said = [r[0] for r in store.conn.execute("SELECT said_at FROM chunks ORDER BY chunk_index")]
    assert said == [unix(STARTED[:-1])] * 2 + [unix(RESUMED[:-1])] * 2
    with open_store(tmp_path / "copy.db") as copy:
        copy_memory(store, copy)
        later = search(copy, QUESTION, SearchOptions(top_k=5, after=unix("2026-03-20"))).hits
    assert {h.locator.rsplit(" · ", 1)[1] for h in later} == {"u2", "a2"}
