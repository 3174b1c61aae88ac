"""Writers side by side on PostgreSQL (issue 16): per-source locks, retried conflicts, readers never blocked,
and the change log's chain appended by all of them at once stays whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crossmodalrag.errors import StoreError, WriteConflict
from crossmodalrag.store.documents import fingerprint
from crossmodalrag.store.postgres import open_postgres_store
from crossmodalrag.store.writers import retrying
from crossmodalrag.versioning.verify import verify
from tests.retrieval.helpers import add_docs, note
from tests.store import pg_workers
from tests.test_crash_safety import child_env

WRITERS, ROUNDS = 4, 3


def _spawn(*args: str) -> subprocess.Popen:
    root = Path(__file__).resolve().parents[2]
    env = {**child_env(), "PYTHONPATH": os.pathsep.join([str(root), child_env()["PYTHONPATH"]])}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.pg_workers", *args],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("isolation", ["read committed", "serializable"])
def test_writer_processes_lose_no_update_and_readers_keep_reading(postgres_url, tmp_path, isolation):
    """Four writer processes each write five shared and five own notes, three rounds, while a reader
    searches. Serializable isolation (a DBA's choice) makes the server abort colliding writes: they are retried."""
    import psycopg

    with open_postgres_store(postgres_url) as store:
        add_docs(store, note("seed", "# Seed\nzebras paragraph to read from the start"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        database = admin.execute("SELECT current_database()").fetchone()[0]
        admin.execute(f"ALTER DATABASE \"{database}\" SET default_transaction_isolation = '{isolation}'")
    stop = tmp_path / "stop"
    reader = _spawn("reader", postgres_url, str(stop))
    writers = [_spawn("writer", postgres_url, str(w), str(ROUNDS)) for w in range(WRITERS)]
    try:
        results = [_finish(w) for w in writers]
        stop.touch()
        reads = _finish(reader)
    finally:  # a failed writer must not leave the reader (or the other writers) running
        stop.touch()
        for process in (reader, *writers):
            if process.poll() is None:
                process.kill()
                process.wait()

    assert all(r["written"] == ROUNDS * (pg_workers.SHARED + pg_workers.OWN) for r in results)  # none refused
    assert reads["errors"] == []
    first_start, last_end = min(r["started"] for r in results), max(r["ended"] for r in results)
    assert any(first_start < t < last_end for t in reads["reads"])  # the reader was not locked out
    with open_postgres_store(postgres_url) as store:
        _assert_every_source_whole(store)
        report = verify(store.conn)  # one chain, appended by four writers at once: unbroken, one record per write
        assert report.ok and report.records == 1 + sum(r["written"] for r in results), report.problems[:3]


def _assert_every_source_whole(store) -> None:
    """Each note holds exactly one writer's last-round version: its source row and all its chunks."""
    rows = store.conn.execute("SELECT id, uri, fingerprint FROM sources WHERE uri <> '/vault/seed.md'").fetchall()
    expected = {u for w in range(WRITERS) for u in pg_workers.uris(w)}
    assert sorted(r[1] for r in rows) == sorted(expected)  # one row per note: no note lost, none doubled
    for source_id, uri, digest in rows:
        chunks = store.conn.execute(
            "SELECT chunk_index, text FROM chunks WHERE source_id = ? ORDER BY chunk_index", (source_id,)
        ).fetchall()
        tags = {word for _, text in chunks for word in text.split() if word.startswith("writer")}
        assert len(tags) == 1, f"{uri} mixes versions {tags}"
        writer, round_ = (int(x) for x in tags.pop()[len("writer") :].split("round"))
        assert round_ == ROUNDS - 1, f"{uri}: an older round won"  # every writer's last write came last for it
        if "/w" in uri:
            assert uri.startswith(f"/vault/w{writer}-")
        doc = note(uri[len("/vault/") : -len(".md")], pg_workers.version(uri, writer, round_))
        assert digest == fingerprint(doc)  # the source row belongs to the same version as its chunks
        assert [c[0] for c in chunks] == list(range(len(chunks)))
    counts = store.conn.execute(
        "SELECT (SELECT COUNT(*) FROM chunks), (SELECT COUNT(*) FROM chunk_terms),"
        " (SELECT COUNT(DISTINCT chunk_id) FROM chunk_postings)"
    ).fetchone()
    assert counts[0] == counts[1] == counts[2]  # every chunk indexed once, no index row left over


def test_writers_of_different_sources_do_not_wait_for_each_other(postgres_url):
    """A transaction holding one note does not hold up a writer of another; a writer of the same note waits."""
    with open_postgres_store(postgres_url) as holder, open_postgres_store(postgres_url, statement_timeout=0.5) as other:
        add_docs(holder, note("a", "# A\nfirst"), note("b", "# B\nfirst"))
        with holder.transaction() as conn:
            conn.lock_source("/vault/a.md")
            add_docs(other, note("b", "# B\nsecond"))  # not blocked
            with pytest.raises(StoreError, match="gave up waiting"):
                add_docs(other, note("a", "# A\nsecond"))  # waits for the holder, up to lock_timeout
        add_docs(other, note("a", "# A\nsecond"))
        texts = dict(holder.conn.execute("SELECT s.uri, c.text FROM chunks c JOIN sources s ON s.id = c.source_id"))
        assert "second" in texts["/vault/a.md"] and "second" in texts["/vault/b.md"]


def test_a_real_deadlock_is_a_write_conflict_and_retrying_resolves_it(postgres_url):
    """Two transactions lock two notes in opposite orders: the server aborts one (40P01), which runs again."""
    stores = [open_postgres_store(postgres_url), open_postgres_store(postgres_url)]
    both_hold_one = threading.Barrier(2)
    attempts, conflicts = [0, 0], []

    def cross(i: int) -> None:
        def work() -> None:
            attempts[i] += 1
            try:
                with stores[i].transaction() as conn:
                    conn.lock_source(f"/vault/{'ab'[i]}.md")
                    if attempts[i] == 1:
                        both_hold_one.wait(timeout=10)
                    conn.lock_source(f"/vault/{'ba'[i]}.md")
            except WriteConflict as error:
                conflicts.append(error)
                raise

        retrying(work)

    threads = [threading.Thread(target=cross, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for store in stores:
        store.close()
    assert len(conflicts) == 1 and "deadlock" in str(conflicts[0])
    assert sorted(attempts) == [1, 2]


def test_retrying_gives_up_after_its_attempts():
    calls = []

    def always_conflicts() -> None:
        calls.append(1)
        raise WriteConflict("collided", "run it again")

    with pytest.raises(WriteConflict):
        retrying(always_conflicts, attempts=3)
    assert len(calls) == 3


def test_forget_and_reindex_run_a_write_the_server_aborted_again(postgres_url, monkeypatch):
    """A collision aborts the whole transaction (serializable, deadlock): forget and embed_missing redo it."""
    from crossmodalrag.forget import find_sources, forget_sources
    from crossmodalrag.index import embeddings
    from crossmodalrag.store.postgres import erase
    from tests.fakes import HashingEmbedder

    def collides_once(real):
        calls = []

        def wrapped(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise WriteConflict("PostgreSQL aborted a write that collided", "run it again")
            return real(*args, **kwargs)

        return wrapped, calls

    with open_postgres_store(postgres_url) as store:
        add_docs(store, note("a", "# A\nalpha paragraph"), note("b", "# B\nbeta paragraph"))
        store_vectors, stored = collides_once(embeddings.store_vectors)
        monkeypatch.setattr(embeddings, "store_vectors", store_vectors)
        assert embeddings.embed_missing(store, HashingEmbedder()).chunks == 2 and len(stored) == 2
        derived, forgot = collides_once(erase.forget_derived)
        monkeypatch.setattr(erase, "forget_derived", derived)
        report = forget_sources(store, find_sources(store, uri="/vault/a.md"))
        assert len(forgot) == 2 and report.chunks == 1
        assert [r[0] for r in store.conn.execute("SELECT uri FROM sources")] == ["/vault/b.md"]
        assert store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 1
