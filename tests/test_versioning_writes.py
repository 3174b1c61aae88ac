"""Versioned memory (issue 14): how writers record changes (batched records at commit) and what rollback
brings back beyond the sources (agent memories, vectors)."""

from __future__ import annotations

from crossmodalrag import versioning
from crossmodalrag.ingest import fingerprint, write_document
from crossmodalrag.store import Store
from crossmodalrag.types import Document
from crossmodalrag.versioning.history import rollback
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
