import sqlite3

import pytest

from crossmodalrag.store import open_store


def add_source(conn: sqlite3.Connection, uri: str) -> None:
    conn.execute("INSERT INTO sources (source_type, uri, fingerprint, ingested_at) VALUES ('note', ?, 'f', 0)", (uri,))


def uris(db_path) -> list[str]:
    """What another process would see right now."""
    reader = sqlite3.connect(db_path)
    try:
        return [r[0] for r in reader.execute("SELECT uri FROM sources ORDER BY uri")]
    finally:
        reader.close()


def test_a_failing_unit_rolls_back_alone_and_finished_units_are_committed(db_path):
    store = open_store(db_path)
    with pytest.raises(RuntimeError):
        with store.batched(max_seconds=60) as batch:
            with batch.unit() as conn:
                add_source(conn, "/a")
            with batch.unit() as conn:
                add_source(conn, "/b")
                raise RuntimeError("crash while writing b")
    assert uris(db_path) == ["/a"]


def test_deferred_actions_of_a_failed_unit_are_dropped(db_path):
    store = open_store(db_path)
    ran = []
    with store.batched(max_seconds=60) as batch:
        with batch.unit():
            batch.defer(lambda conn: ran.append("a"))
        with pytest.raises(ValueError):
            with batch.unit():
                batch.defer(lambda conn: ran.append("b"))
                raise ValueError
    assert ran == ["a"]


def test_units_become_visible_to_readers_once_the_batch_window_passes(db_path):
    store = open_store(db_path)
    with store.batched(max_seconds=0) as batch:
        with batch.unit() as conn:
            add_source(conn, "/a")
        assert uris(db_path) == ["/a"]  # committed without leaving the batch
        with batch.unit() as conn:
            add_source(conn, "/b")
    assert uris(db_path) == ["/a", "/b"]


def test_collected_items_reach_their_flush_once_per_commit_and_a_failed_unit_drops_its_own(db_path):
    store = open_store(db_path)
    flushed = []

    def flush(conn, items):
        flushed.append(list(items))

    with store.batched(max_seconds=60) as batch:
        with batch.unit():
            batch.collect(flush, "a")
        with pytest.raises(ValueError):
            with batch.unit():
                batch.collect(flush, "b")
                raise ValueError
        with batch.unit():
            batch.collect(flush, "c")
            assert batch.collected_items(flush) == ["a", "c"]
    assert flushed == [["a", "c"]]
    with store.batched(max_seconds=60) as batch:  # a new batch starts empty
        with batch.unit():
            batch.collect(flush, "d")
    assert flushed == [["a", "c"], ["d"]]


def test_a_full_disk_is_reported_as_such_not_as_the_rollback_sqlite_already_did(store):
    from crossmodalrag.store.failures import explain
    from tests.retrieval.helpers import add_docs, note

    add_docs(store, note("a", "# A\nsmall"))
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the file cannot grow: as a full disk
    big = [note(f"n{i}", "# N\n" + " ".join(f"w{i}x{j}" for j in range(3000))) for i in range(5)]
    with pytest.raises(sqlite3.OperationalError) as caught:
        add_docs(store, *big)
    message, hint = explain(caught.value)
    assert "disk is full" in message and "free disk space" in hint
    store.conn.execute(f"PRAGMA max_page_count = {pages * 100}")
    add_docs(store, *big)  # the store stays usable once there is room
