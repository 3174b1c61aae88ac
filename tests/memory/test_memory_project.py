"""Agent memories (`mem remember`) fall under one readable project in the timeline: each one was its own
episode, labelled by its raw uri (`memory:e6b979b3…`)."""

from __future__ import annotations

from crossmodalrag.agent.memories import memory_document
from crossmodalrag.cli.main import main
from crossmodalrag.memory.episodes import build_episodes, timeline
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output

DAY = 1_735_689_600.0
ATTRIBUTES = {"kind": "fact", "importance": 0.5, "tags": [], "session_id": None, "agent_id": None}


def _remembered(store, db_path) -> None:
    add_docs(
        store,
        memory_document("Prefer uv over pip for quillmark builds.", "e6b979b3" * 4, DAY, ATTRIBUTES),
        memory_document("The staging database is rebuilt every Sunday.", "da7ffaab" * 4, DAY + 3600, ATTRIBUTES),
    )
    llm = ScriptedExtractor(
        events_output(event("Prefer uv over pip for quillmark builds.", kind="fact")),
        events_output(event("The staging database is rebuilt every Sunday.", kind="fact")),
    )
    build(store, db_path, llm=llm, levels=("event", "episode"), event_support_min_cosine=0.0)


def test_memories_of_one_day_are_one_episode_of_agent_memories(store, db_path, capsys) -> None:
    _remembered(store, db_path)
    (episode,) = timeline(store)
    assert episode["title"] == "agent memories: 2025-01-01 (2 events)"
    assert [e["id"] for e in timeline(store, project="agent memories")] == [episode["id"]]
    capsys.readouterr()
    assert main(["timeline", "--db-path", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "agent memories: 2025-01-01 (2 events)" in out and "memory:" not in out


def test_events_extracted_before_are_regrouped_by_the_next_build(store, db_path) -> None:
    _remembered(store, db_path)
    store.conn.execute("UPDATE memory_nodes SET project = 'memory:' || id WHERE level = 'event'")  # as stored before
    build_episodes(store, gap_hours=24)
    (episode,) = timeline(store)
    assert episode["title"].startswith("agent memories: ")
