"""memory_context: what an agent loads at the start of a session, within a token budget."""

from __future__ import annotations

from crossmodalrag.agent.memories import remember
from crossmodalrag.agent.tools import context_for
from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.retrieval.search import SearchOptions
from tests.agent.chats import claude_record, write_jsonl
from tests.agent.mcp_calls import COMPACT_KEYS


def session(path, key: str, prompt: str, times: list[str]):
    records = [
        claude_record(f"{key}u{i}", f"{key}u{i - 1}" if i else None, "user", f"{prompt} ({i})", sessionId=key,
                      timestamp=when)
        for i, when in enumerate(times)
    ]  # fmt: skip
    return write_jsonl(path / f"{key}.jsonl", records)


def test_relevant_items_are_compact_and_sessions_are_ordered_by_their_last_turn(any_store, tmp_path):
    store = any_store
    # `relevant` held full evidence (scoring components, offsets, both uris: ~70 tokens an item the
    # agent pays for), and a session resumed today ranked by the day it began.
    session(tmp_path, "resumed", "tune the cache eviction", ["2026-01-05T10:00:00Z", "2026-03-20T10:00:00Z"])
    session(tmp_path, "recent", "write the release notes", ["2026-03-01T10:00:00Z"])
    ingest_conversations(store, [tmp_path])
    remember(store, "The cache evicts least recently used keys first")
    found = context_for(Retriever(store, SearchOptions(), None), topic="cache eviction")
    assert found["relevant"] and all(set(item) <= COMPACT_KEYS | {"superseded_by"} for item in found["relevant"])
    assert [(s["date"], s["last_active"]) for s in found["recent_sessions"]] == [
        ("2026-01-05", "2026-03-20"),
        ("2026-03-01", "2026-03-01"),
    ]
