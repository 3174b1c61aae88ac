"""Versioned memory (issue 14): how writers record changes (batched records at commit) and what rollback
brings back beyond the sources (agent memories, vectors)."""

from __future__ import annotations

import json

import pytest

from crossmodalrag import versioning
from crossmodalrag.agent.edits import update_memory
from crossmodalrag.agent.memories import memory_record, remember
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import Store, open_store
from crossmodalrag.store.documents import fingerprint, write_document
from crossmodalrag.types import Document
from crossmodalrag.versioning.history import checkpoint, rollback
from crossmodalrag.versioning.log import load_state
from crossmodalrag.versioning.verify import verify


def note(uri: str, text: str) -> Document:
    return Document(uri=uri, source_type="note", title=uri, text=text, format="markdown", locator=uri)


def write(batch, doc: Document) -> None:
    write_document(batch, doc, fingerprint(doc))


def log(store: Store) -> list[tuple]:
    return [tuple(r) for r in store.conn.execute("SELECT seq, op, target, content_hash FROM change_log ORDER BY seq")]


def test_a_batch_writes_its_records_at_commit_chained_in_order(store: Store) -> None:
    with store.batched(max_seconds=60) as batch:
        write(batch, note("/v/a.md", "# A\n\none\n"))
        write(batch, note("/v/b.md", "# B\n\nbee\n"))
        if store.backend == "sqlite":  # PostgreSQL's batch commits each unit: writers run side by side there
            assert log(store) == []  # held by the batch until its commit
    assert [(seq, op, target) for seq, op, target, _ in log(store)] == [
        (1, "insert", "/v/a.md"),
        (2, "insert", "/v/b.md"),
    ]
    assert verify(store.conn).ok


def test_a_source_changed_twice_in_one_batch_is_logged_in_order_and_keeps_its_first_version(store: Store) -> None:
    with store.batched(max_seconds=60) as batch:
        write(batch, note("/v/a.md", "# A\n\none\n"))
        with batch.unit() as conn:  # a direct update inside the same batch sees the record not written yet
            source_id = conn.execute("SELECT id FROM sources WHERE uri = '/v/a.md'").fetchone()[0]
            with versioning.changing_source(conn, source_id, reason="retitled"):
                conn.execute("UPDATE sources SET title = 'Aardvark' WHERE id = ?", (source_id,))
    (_, first_op, _, first), (_, second_op, _, _) = log(store)
    assert (first_op, second_op) == ("insert", "update")
    assert load_state(store.conn, first)["title"] == "/v/a.md"  # superseded inside the batch, kept for rollback
    assert verify(store.conn).ok
    rollback(store, "1")
    assert store.conn.execute("SELECT title FROM sources").fetchone()[0] == "/v/a.md"
    assert verify(store.conn).ok


# --- what rollback brings back besides the source -------------------------------------------


def test_rollback_of_an_updated_agent_memory_restores_its_attributes(store: Store) -> None:
    stored = remember(store, "The deploy window is Friday.", tags=["ops"], importance=0.4, kind="fact", agent_id="a1")
    checkpoint(store, "before-edit")
    update_memory(store, stored.id, content="The deploy window is Monday.", tags=["ops", "changed"], importance=0.9)
    rollback(store, "before-edit")
    record = memory_record(store.conn, stored.id)
    assert (record["tags"], record["importance"], record["kind"]) == (["ops"], 0.4, "fact")
    assert remember(store, "The deploy window is Friday.").status == "duplicate"  # its content hash is back too
    assert verify(store.conn).ok


def test_an_agent_memory_removed_by_a_rollback_comes_back_whole_with_the_next(store: Store) -> None:
    checkpoint(store, "empty")
    remember(store, "Staging runs on port 8443.", tags=["infra"], importance=0.7, kind="fact", agent_id="a2")
    checkpoint(store, "with-memory")
    rollback(store, "empty")
    assert store.conn.execute("SELECT COUNT(*) FROM agent_memories").fetchone()[0] == 0
    rollback(store, "with-memory")
    (source_id,) = store.conn.execute("SELECT id FROM sources WHERE source_type = 'memory'").fetchone()
    record = memory_record(store.conn, source_id)
    assert record is not None and (record["tags"], record["kind"], record["agent_id"]) == (["infra"], "fact", "a2")
    assert verify(store.conn).ok


def test_rollback_works_after_a_schema_migration(store: Store) -> None:
    """States are stored by column name, so a later migration that adds columns (here by hand, as
    migration 8+ would) leaves older checkpoints restorable."""
    with store.batched() as batch:
        write(batch, note("/v/a.md", "# A\n\nbefore the migration\n"))
    checkpoint(store, "old-schema")
    with store.batched() as batch:
        write(batch, note("/v/a.md", "# A\n\nafter the migration\n"))
    with store.transaction() as conn:
        conn.execute("ALTER TABLE sources ADD COLUMN language TEXT NOT NULL DEFAULT ''")
        conn.execute("ALTER TABLE chunks ADD COLUMN language TEXT NOT NULL DEFAULT ''")
    plan = rollback(store, "old-schema")
    assert len(plan.restore) == 1
    assert "before the migration" in store.conn.execute("SELECT text FROM chunks").fetchone()[0]
    [hit] = search(store, "migration", SearchOptions()).hits  # the restored chunk is in the lexical index
    assert "before the migration" in hit.text
    assert verify(store.conn).ok


def test_the_cli_rollback_embeds_the_restored_chunks_when_a_model_is_at_hand(capsys, monkeypatch, tmp_path) -> None:
    from crossmodalrag.cli.main import main
    from crossmodalrag.index import embed
    from crossmodalrag.index.embeddings import vector_status
    from crossmodalrag.retrieval import semantic
    from tests.conftest import write_note
    from tests.fakes import HashingEmbedder

    embedder = HashingEmbedder()
    monkeypatch.setattr(semantic, "embeddings_installed", lambda: True)
    monkeypatch.setattr(embed, "load_embedder", lambda settings: embedder)
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\n\nthe first version\n")
    assert main(["ingest-notes", str(vault)]) == 0 and main(["checkpoint", "cp"]) == 0
    write_note(vault, "a.md", "# A\n\nthe second version\n")
    assert main(["ingest-notes", str(vault)]) == 0
    capsys.readouterr()
    assert main(["rollback", "cp", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["embedded"] == 1
    with open_store(tmp_path / "memory.db") as store:
        assert vector_status(store, embedder.identity)["missing"] == 0


# --- as-of with vectors ---------------------------------------------------------------------


def test_as_of_uses_the_live_vectors_when_every_source_of_then_is_unchanged(store: Store, tmp_path) -> None:
    from crossmodalrag.answer.evidence import Retriever
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.retrieval.search import SearchOptions
    from crossmodalrag.retrieval.semantic import semantic_index
    from crossmodalrag.versioning.asof import as_of
    from tests.fakes import HashingEmbedder

    embedder = HashingEmbedder(synonyms={"automobile": "car", "acquire": "buy"})
    with store.batched() as batch:
        write(batch, note("/v/car.md", "# Car\n\nWe decided to buy a car in spring.\n"))
    embed_missing(store, embedder)
    checkpoint(store, "spring")
    with store.batched() as batch:  # added since: left out of the past
        write(batch, note("/v/van.md", "# Van\n\nWe decided to buy a van in autumn.\n"))
    embed_missing(store, embedder)
    live = Retriever(store, SearchOptions(), semantic_index(store, embedder, Settings(db_path=tmp_path / "m.db")))
    past = as_of(live, "spring")
    result = past.search("acquire an automobile")  # no shared word: only the vectors find it
    assert result.hybrid and [hit.source_uri for hit in result.hits] == ["/v/car.md"]
    with store.batched() as batch:  # now a source of then changed: its older version has no vectors
        write(batch, note("/v/car.md", "# Car\n\nWe sold the car.\n"))
    past = as_of(live, "spring")
    assert (
        past.semantic is None
        and "ranked lexically: 1 source changed or went since, and its older versions have no vectors" in past.notices
    )
    assert "buy a car" in past.search("car spring").hits[0].text


@pytest.fixture
def store(any_store):  # the tests taking a store run on SQLite and on PostgreSQL (issue 16)
    return any_store
