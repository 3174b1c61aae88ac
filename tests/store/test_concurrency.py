"""Readers beside a writer, writers beside each other: real processes on one database file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import crossmodalrag
from crossmodalrag.errors import StoreError
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store
from crossmodalrag.store.backup import backup_database

pytestmark = pytest.mark.slow

BIG = 8000  # notes: an ingest of several seconds on a 2-core machine
CHUNKS_PER_NOTE = 2


def mem(*args: str) -> list[str]:
    return [sys.executable, "-m", "crossmodalrag", *args]


def child_env() -> dict[str, str]:
    """The environment of a `mem` child: the same crossmodalrag as this test, never a model hub."""
    src = str(Path(crossmodalrag.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(mem(*args), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def make_vault(root: Path, count: int, tag: str = "") -> Path:
    """`count` short notes, each two chunks (a heading section and a sub-section)."""
    for i in range(count):
        path = root / f"d{i % 40}" / f"note{tag}-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# Note {tag}{i}\n\nalpha beta {i} gamma delta parser cache {tag}\n\n"
            f"## Details\n\nindex vector {i} memory\n",
            encoding="utf-8",
        )
    return root


@pytest.fixture(scope="module")
def big_vault(tmp_path_factory) -> Path:
    return make_vault(tmp_path_factory.mktemp("big") / "vault", BIG)


def snapshot(db_path: Path) -> tuple[int, int, int, int]:
    """(sources, chunks, FTS rows, sources not exactly whole) as one read transaction sees them."""
    with open_store(db_path, create=False) as reader:
        conn = reader.conn
        conn.execute("BEGIN")
        sources = conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        fts = conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        broken = conn.execute(
            "SELECT COUNT(*) FROM sources s WHERE (SELECT COUNT(*) FROM chunks c WHERE c.source_id = s.id) != ?",
            (CHUNKS_PER_NOTE,),
        ).fetchone()[0]
        conn.execute("COMMIT")
    return sources, chunks, fts, broken


def test_readers_see_each_commit_while_a_long_ingest_runs(big_vault, db_path):
    open_store(db_path).close()
    writer = start("ingest-notes", str(big_vault), "--db-path", str(db_path))
    seen, cli_reads = [], []
    while writer.poll() is None:
        sources, chunks, fts, broken = snapshot(db_path)
        assert fts == chunks == sources * CHUNKS_PER_NOTE and broken == 0
        seen.append(sources)
        if 0 < sources < BIG and not cli_reads:  # a whole `mem` reader process too, mid-ingest
            cli_reads.append(
                subprocess.run(
                    mem("ask", "alpha parser", "--no-llm", "--json", "--db-path", str(db_path)),
                    env=child_env(),
                    capture_output=True,
                )
            )
        time.sleep(0.01)
    assert writer.returncode == 0, writer.stderr.read()
    assert seen == sorted(seen), "a reader saw the count go down"
    partial = {count for count in seen if 0 < count < BIG}
    assert len(partial) >= 3, f"expected sources to appear batch by batch, saw {sorted(partial)}"
    assert snapshot(db_path)[0] == BIG
    assert cli_reads and cli_reads[0].returncode == 0, cli_reads[0].stderr if cli_reads else "no reader ran mid-ingest"


def test_backups_taken_during_an_ingest_are_consistent_snapshots(big_vault, tmp_path, db_path):
    open_store(db_path).close()
    writer = start("ingest-notes", str(big_vault), "--db-path", str(db_path))
    copies = []
    while writer.poll() is None and len(copies) < 3:
        if snapshot(db_path)[0] > 0:
            copies.append(backup_database(db_path, tmp_path / f"copy{len(copies)}.db"))
        time.sleep(0.2)
    assert writer.wait(timeout=120) == 0, writer.stderr.read()
    assert copies, "the ingest finished before a backup could be taken"
    for report in copies:
        assert not Path(f"{report.path}-wal").exists()  # standalone: nothing beside it
        sources, chunks, fts, broken = snapshot(report.path)
        assert fts == chunks == sources * CHUNKS_PER_NOTE and broken == 0 and sources > 0


def test_two_writers_on_a_new_database_both_finish(tmp_path, db_path):
    """Both also race to create and migrate the file: the loser waits and sees the winner's schema."""
    vaults = [make_vault(tmp_path / f"vault{n}", 1500, tag=str(n)) for n in (1, 2)]
    writers = [start("ingest-notes", str(vault), "--db-path", str(db_path)) for vault in vaults]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read()
    sources, chunks, fts, broken = snapshot(db_path)
    assert sources == 3000 and fts == chunks == 6000 and broken == 0


def test_many_processes_creating_the_same_database_all_succeed(db_path):
    processes = [start("init-db", "--db-path", str(db_path)) for _ in range(6)]
    for process in processes:
        assert process.wait(timeout=60) == 0, process.stderr.read()


def test_a_short_writer_gets_its_turn_during_a_long_ingest(big_vault, tmp_path, db_path):
    """SQLite alone lets a writer that commits and re-begins keep the lock; WriterTurns hands it over."""
    small = make_vault(tmp_path / "small", 20, tag="s")
    open_store(db_path).close()
    big = start("ingest-notes", str(big_vault), "--db-path", str(db_path))
    while snapshot(db_path)[0] == 0:
        assert big.poll() is None, big.stderr.read()
        time.sleep(0.01)
    started = time.monotonic()
    short = start("ingest-notes", str(small), "--db-path", str(db_path))
    assert short.wait(timeout=120) == 0, short.stderr.read()
    waited = time.monotonic() - started
    big_sources_then = snapshot(db_path)[0] - 20
    assert big.wait(timeout=120) == 0, big.stderr.read()
    assert big_sources_then < BIG, f"the short writer only got in after the long one finished ({waited:.1f} s)"
    assert snapshot(db_path)[0] == BIG + 20


def test_a_writer_with_a_short_busy_timeout_retries_until_it_gets_the_lock(big_vault, tmp_path, db_path):
    small = make_vault(tmp_path / "small", 200, tag="s")
    open_store(db_path).close()
    big = start("ingest-notes", str(big_vault), "--db-path", str(db_path))
    while snapshot(db_path)[0] == 0:
        time.sleep(0.01)
    with open_store(db_path, busy_timeout=0.001) as store:  # SQLite's own waiting all but off
        report = ingest_notes(store, [small])
    assert report.added == 200 and not report.failures
    assert big.wait(timeout=120) == 0, big.stderr.read()
    assert snapshot(db_path) == (BIG + 200, 2 * (BIG + 200), 2 * (BIG + 200), 0)


def hold_write_lock(db_path: Path, seconds: float, ready: threading.Event) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    ready.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def test_begin_retries_past_the_busy_timeout(db_path):
    open_store(db_path).close()
    ready = threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(db_path, 0.6, ready))
    holder.start()
    ready.wait()
    bare = sqlite3.connect(db_path, timeout=0.01, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        bare.execute("BEGIN IMMEDIATE")  # what a writer without the retry would have done
    bare.close()
    started = time.monotonic()
    with open_store(db_path, busy_timeout=0.01) as store, store.transaction() as conn:
        conn.execute("INSERT INTO sources (source_type, uri, fingerprint, ingested_at) VALUES ('note', '/a', 'f', 0)")
    assert time.monotonic() - started > 0.3
    holder.join()


def hold_exclusive(db_path: Path, seconds: float, ready: threading.Event) -> None:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")  # in WAL mode this also shuts out readers
    ready.set()
    time.sleep(seconds)
    conn.execute("COMMIT")
    conn.close()


def test_opening_retries_while_the_file_is_locked_for_a_moment(db_path):
    open_store(db_path).close()
    ready = threading.Event()
    holder = threading.Thread(target=hold_exclusive, args=(db_path, 0.5, ready))
    holder.start()
    ready.wait()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite3.connect(db_path, timeout=0.01).execute("SELECT COUNT(*) FROM sources").fetchone()
    with open_store(db_path, busy_timeout=0.01) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0
    holder.join()


def test_a_lock_held_longer_than_the_patience_is_a_store_error_with_a_hint(db_path):
    open_store(db_path).close()
    ready = threading.Event()
    holder = threading.Thread(target=hold_write_lock, args=(db_path, 1.0, ready))
    holder.start()
    ready.wait()
    try:
        with open_store(db_path, busy_timeout=0.01) as store:
            store.patience = 0.2
            with pytest.raises(StoreError, match="stayed locked") as caught:
                with store.transaction():
                    pass
            assert "another mem process is writing" in caught.value.hint
    finally:
        holder.join()


def test_writer_turns_see_a_waiting_writer_in_another_connection(db_path):
    with open_store(db_path) as first, open_store(db_path) as second:
        assert not first.turns.others_waiting()
        with second.turns.waiting():
            assert first.turns.others_waiting()
        assert not first.turns.others_waiting()
