"""Several units in one PostgreSQL transaction (GroupBatch, issue 16): committed together, written
again when the server aborts their transaction, a failing unit lost alone, and a kill loses nothing
that was committed."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from crossmodalrag.store.postgres import open_postgres_store
from tests.conftest import write_note
from tests.test_crash_safety import child_env, mem, run_to_end

pytestmark = pytest.mark.integration
INSERT = "INSERT INTO sources (source_type, uri, fingerprint, ingested_at) VALUES ('note', ?, 'f', 0)"
COLLIDE = "DO $$ BEGIN RAISE EXCEPTION 'collided' USING ERRCODE = '40001'; END $$"  # a serialization failure


def visible(url: str) -> list[str]:
    """The sources another client sees now (what is committed)."""
    import psycopg

    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT uri FROM sources ORDER BY uri")]


def add(batch, uri: str, runs: list[str] | None = None) -> None:
    """One unit writing one source (recorded in `runs` each time it runs)."""
    if runs is not None:
        runs.append(uri)
    with batch.unit() as conn:
        conn.execute(INSERT, (uri,))


def test_units_of_a_replayable_batch_commit_together(postgres_url):
    with open_postgres_store(postgres_url) as store:
        with store.batched(max_seconds=60, replayable=True) as batch:
            for uri in ("/a", "/b", "/c"):
                batch.run(lambda uri=uri: add(batch, uri))
                assert visible(postgres_url) == []  # one transaction, still open
        assert visible(postgres_url) == ["/a", "/b", "/c"]


def test_units_lost_with_a_transaction_the_server_aborts_are_written_again(postgres_url):
    runs: list[str] = []
    flushes: list[list[str]] = []

    def flush(conn, items: list[str]) -> None:  # the first commit collides with another writer
        flushes.append(list(items))
        if len(flushes) == 1:
            conn.execute(COLLIDE)

    def write(batch, uri: str) -> None:
        add(batch, uri, runs)
        batch.collect(flush, uri)

    with open_postgres_store(postgres_url) as store:
        with store.batched(max_seconds=60, replayable=True) as batch:
            for uri in ("/a", "/b"):
                batch.run(lambda uri=uri: write(batch, uri))
    assert visible(postgres_url) == ["/a", "/b"]
    assert runs == ["/a", "/b", "/a", "/b"]  # both redone in a new transaction, once
    assert flushes == [["/a", "/b"], ["/a", "/b"]]


def test_a_unit_the_server_aborts_midway_is_run_again_after_the_units_before_it(postgres_url):
    runs: list[str] = []

    def collide_once(batch) -> None:
        runs.append("/b")
        with batch.unit() as conn:
            conn.execute(INSERT, ("/b",))
            if runs.count("/b") == 1:
                conn.execute(COLLIDE)

    with open_postgres_store(postgres_url) as store:
        with store.batched(max_seconds=60, replayable=True) as batch:
            batch.run(lambda: add(batch, "/a", runs))
            batch.run(lambda: collide_once(batch))
            batch.run(lambda: add(batch, "/c", runs))
    assert visible(postgres_url) == ["/a", "/b", "/c"]
    assert runs == ["/a", "/b", "/a", "/b", "/c"]


def test_a_failing_unit_is_lost_alone_and_the_units_before_it_are_committed(postgres_url):
    def fail(batch) -> None:
        with batch.unit() as conn:
            conn.execute(INSERT, ("/b",))
            raise RuntimeError("crash while writing b")  # on PostgreSQL this ends the whole transaction

    with open_postgres_store(postgres_url) as store:
        with pytest.raises(RuntimeError):
            with store.batched(max_seconds=60, replayable=True) as batch:
                batch.run(lambda: add(batch, "/a"))
                batch.run(lambda: fail(batch))
        assert visible(postgres_url) == ["/a"]
        with store.batched(max_seconds=60, replayable=True) as batch:  # the connection is fit for more
            with pytest.raises(AssertionError):  # a unit the batch could not write again is refused
                add(batch, "/x")
            batch.run(lambda: add(batch, "/c"))
    assert visible(postgres_url) == ["/a", "/c"]


def test_a_caller_reading_slowly_between_units_gets_each_unit_committed_as_it_ends(postgres_url):
    """OCR of the next PDF takes longer than a batch lasts: the transaction (and its source locks)
    is not held open through it."""
    with open_postgres_store(postgres_url) as store:
        with store.batched(max_seconds=0.5, replayable=True) as batch:
            batch.run(lambda: add(batch, "/a"))
            batch.run(lambda: add(batch, "/b"))  # quick: shares /a's transaction
            assert visible(postgres_url) == []
            time.sleep(0.7)  # reading the next document
            batch.run(lambda: add(batch, "/c"))
            assert visible(postgres_url) == ["/a", "/b", "/c"]
            time.sleep(0.7)
            batch.run(lambda: add(batch, "/d"))
            assert visible(postgres_url) == ["/a", "/b", "/c", "/d"]  # committed alone, before the next read


def _whole(url: str) -> dict[str, int]:
    """uri -> chunks of every stored note, asserting each one is whole: indexed and in the change log."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.uri, (SELECT COUNT(*) FROM chunks c WHERE c.source_id = s.id),"
            " (SELECT COUNT(*) FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id WHERE c.source_id = s.id),"
            " (SELECT COUNT(DISTINCT p.chunk_id) FROM chunk_postings p JOIN chunks c ON c.id = p.chunk_id"
            "  WHERE c.source_id = s.id),"
            " (SELECT COUNT(*) FROM owner_change_log l WHERE l.target = s.uri) FROM sources s"
        ).fetchall()
    for uri, chunks, terms, posted, logged in rows:
        assert chunks == terms == posted > 0 and logged == 1, f"{uri} is half-written: {chunks, terms, posted, logged}"
    return {row[0]: row[1] for row in rows}


@pytest.mark.slow
def test_a_kill_mid_batch_loses_no_committed_note(postgres_url, monkeypatch, tmp_path):
    """Several notes share a transaction now; a killed ingest still keeps every note another client
    already saw, and leaves none half-written."""
    vault = tmp_path / "vault"
    for i in range(300):
        write_note(vault, f"n{i:03}.md", f"# Note {i}\n\n" + f"Paragraph about topic {i} and zebras.\n\n" * 12)
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    run_to_end(["init-db"])
    landed = 0
    for _ in range(3):
        child = subprocess.Popen(
            mem("ingest-notes", str(vault)), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        seen = set(visible(postgres_url))
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline:  # until this run committed something
            now = set(visible(postgres_url))
            if now - seen:
                seen = now
                break
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        landed += child.wait() == -signal.SIGKILL
        assert seen <= set(_whole(postgres_url)), "a note another client saw was lost"
    assert landed >= 1  # at least one kill hit a running ingest
    run_to_end(["ingest-notes", str(vault)])
    assert len(_whole(postgres_url)) == 300
