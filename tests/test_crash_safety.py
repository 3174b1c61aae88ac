"""kill -9 at random moments: after every kill the database is sound and each source whole or absent.

Each scenario builds a reference database without kills, then runs the real `mem` command in a child
process and SIGKILLs it after a random delay (seeded), many times, resuming on the damaged-or-not result.
After each kill: SQLite's integrity check and FTS5's pass, every source equals its state before the run
or after it (never a mix), the FTS index and the vectors agree with the chunks. Rerunning the command
always ends at the reference. The first kills land in start-up (creating and migrating the file), the
rest between the end of start-up and the command's full duration, both measured here, so most land
while it writes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import crossmodalrag
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store
from crossmodalrag.versioning.verify import verify

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX kill -9"),
]

KILLS = 12
SEED = 20250706
EARLY_KILLS = 2
RERUN_EVERY = 4  # every few kills, prove that one plain rerun completes the work, then start over


def mem(*args: str) -> list[str]:
    return [sys.executable, "-m", "crossmodalrag", *args]


def child_env() -> dict[str, str]:
    src = str(Path(crossmodalrag.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}


def run_to_end(args: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run(mem(*args), env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return time.monotonic() - started


def run_and_kill(args: list[str], delay: float) -> bool:
    """Start the command and SIGKILL it after `delay` seconds; True if it was killed before it finished."""
    child = subprocess.Popen(mem(*args), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGKILL)
        child.wait()
        return True


@dataclass
class State:
    """What a database holds, by source uri: (fingerprint, title, chunks) and each chunk's vector pieces."""

    sources: dict[str, tuple] = field(default_factory=dict)
    vectors: dict[tuple[str, int], list[tuple[int, int, bytes]]] = field(default_factory=dict)


def inspect(db: Path) -> State:
    """Check the database is sound (raises AssertionError if not) and read what it holds."""
    if not db.exists():
        return State()
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "chunks" not in tables:
            return State()  # killed before the first migration committed
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        if "change_log" in tables:  # the change log stays consistent with the tables (issue 14)
            verified = verify(conn)
            assert verified.ok, f"mem verify after a kill: {[p.describe() for p in verified.problems[:3]]}"
        chunk_ids = [row[0] for row in conn.execute("SELECT id FROM chunks ORDER BY id")]
        assert [row[0] for row in conn.execute("SELECT rowid FROM chunks_fts ORDER BY rowid")] == chunk_ids
        state = State()
        for uri, fingerprint, title in conn.execute("SELECT uri, fingerprint, title FROM sources"):
            state.sources[uri] = (fingerprint, title, [])
        for uri, index, locator, text in conn.execute(
            "SELECT s.uri, c.chunk_index, c.locator, c.text FROM chunks c JOIN sources s ON s.id = c.source_id "
            "ORDER BY s.uri, c.chunk_index"
        ):
            state.sources[uri][2].append((index, locator, text))
        if "chunk_vectors" in tables:
            for uri, index, piece, pieces, vector in conn.execute(
                "SELECT s.uri, c.chunk_index, v.piece, v.pieces, v.vector FROM chunk_vectors v "
                "JOIN chunks c ON c.id = v.chunk_id JOIN sources s ON s.id = c.source_id ORDER BY v.piece"
            ):
                state.vectors.setdefault((uri, index), []).append((piece, pieces, vector))
        return state
    finally:
        conn.close()


def assert_between(state: State, before: State, after: State, when: str) -> None:
    """Every source as it was before the run or as the run leaves it; every chunk's vectors all or none."""
    for uri in set(state.sources) | set(before.sources) | set(after.sources):
        now = state.sources.get(uri)
        assert now in (before.sources.get(uri), after.sources.get(uri)), f"{when}: {uri} is half-written: {now}"
    for key, pieces in state.vectors.items():
        expected = after.vectors.get(key) or before.vectors.get(key)
        assert expected is not None, f"{when}: vectors for a chunk the reference has none for: {key}"
        assert [p[:2] for p in pieces] == [p[:2] for p in expected], f"{when}: incomplete vectors for {key}"
        assert all(close(a[2], b[2]) for a, b in zip(pieces, expected, strict=True)), f"{when}: wrong vector for {key}"


def close(a: bytes, b: bytes) -> bool:
    """Same vector up to float noise (a resumed run batches chunks differently)."""
    import numpy as np

    x, y = np.frombuffer(a, np.float32), np.frombuffer(b, np.float32)
    return x.shape == y.shape and float(x @ y) > 0.999 * float(np.linalg.norm(x) * np.linalg.norm(y))


def same(state: State, reference: State) -> bool:
    return state.sources == reference.sources and state.vectors.keys() == reference.vectors.keys()


def reset(db: Path, base: Path | None) -> None:
    for path in (db, *(Path(f"{db}{s}") for s in ("-wal", "-shm", "-journal"))):
        path.unlink(missing_ok=True)
    if base is not None:
        shutil.copyfile(base, db)


def timings(args: list[str], db: Path, base: Path | None, final: Path, after: "State") -> tuple[float, float]:
    """(seconds of a run with nothing to write: start-up plus reading, seconds of the whole run) now;
    leaves `db` as `base`."""
    reset(db, final)
    noop = run_to_end(args)
    reset(db, base)
    full = run_to_end(args)
    assert same(inspect(db), after), "a clean run must reach the reference"
    reset(db, base)
    return noop, full


def kill_repeatedly(
    args: list[str], db: Path, base: Path | None, final: Path, seed: int, partial_wanted: int = 0
) -> dict[str, int]:
    """The kill loop of one scenario; returns how many kills left the work part-done, done, or not begun.
    On a busy machine the run's timing drifts and the kills can all miss the writing: then it goes on
    (timed again, at most KILLS more) until `partial_wanted` kills have landed mid-write."""
    before, after = inspect(base) if base else State(), inspect(final)
    noop, full = timings(args, db, base, final, after)
    rng, counts = random.Random(seed), {"partial": 0, "done": 0, "untouched": 0}
    attempt = 0
    while attempt < KILLS or (counts["partial"] < partial_wanted and attempt < 2 * KILLS):
        attempt += 1
        if attempt > KILLS and attempt % RERUN_EVERY == 1:
            noop, full = timings(args, db, base, final, after)
        # The first kills hit start-up (creating and migrating a new file); the rest, the writing.
        delay = rng.uniform(0.05, noop) if attempt <= EARLY_KILLS else rng.uniform(0.8 * noop, 1.02 * full)
        when = f"kill {attempt} after {delay:.2f} s (seed {seed}, {' '.join(args[:1])})"
        killed = run_and_kill(args, delay)
        state = inspect(db)
        assert_between(state, before, after, when)
        if same(state, after):
            counts["done"] += 1
        elif state.sources == before.sources and state.vectors.keys() == before.vectors.keys():
            counts["untouched"] += 1
        else:
            counts["partial"] += 1
        assert killed or same(state, after), f"{when}: finished without reaching the reference"
        if attempt % RERUN_EVERY == 0 and not same(state, after):
            run_to_end(args)
            assert same(inspect(db), after), f"{when}: rerunning did not complete the work"
        if attempt % RERUN_EVERY == 0 or same(state, after):
            reset(db, base)
    run_to_end(args)
    final_state = inspect(db)
    assert_between(final_state, before, after, "the last rerun")
    assert same(final_state, after)
    return counts


def write_notes(root: Path, count: int, version: int) -> None:
    """Version 2 of the vault rewrites half of the notes (one more chunk each), deletes a sixth, adds a fifth."""
    for i in range(count + (count // 5 if version == 2 else 0)):
        path = root / f"d{i % 30}" / f"note-{i}.md"
        if version == 2 and i < count and i % 6 == 0:
            path.unlink()
            continue
        changed = version == 2 and i % 6 in (1, 2, 3)
        body = "".join(
            f"\n\n## Part {s}\n\nalpha beta {i} gamma {'v2' if changed else 'v1'} parser cache {s}"
            for s in range(3 if changed else 2)
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {i}{body}\n", encoding="utf-8")


def test_kill_ingest_notes_mid_update(tmp_path):
    vault, base, final, db = tmp_path / "vault", tmp_path / "base.db", tmp_path / "final.db", tmp_path / "work.db"
    write_notes(vault, 5000, version=1)
    with open_store(base) as store:
        ingest_notes(store, [vault])
    write_notes(vault, 5000, version=2)
    shutil.copyfile(base, final)
    with open_store(final) as store:
        report = ingest_notes(store, [vault])
    assert (report.updated, report.removed, report.added) == (2500, 834, 1000)
    args = ["ingest-notes", str(vault), "--db-path", str(db)]
    counts = kill_repeatedly(args, db, base, final, SEED, partial_wanted=3)
    assert counts["partial"] >= 3, counts


def make_history(repo: Path, commits: int) -> None:
    """A repository with many small commits, written in one `git fast-import` (seconds faster than commits)."""
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    stream = []
    for i in range(commits):
        name = f"src/mod{i % 25}.py"
        data = f"import math\n\n\ndef step(x):\n    return x * {i}  # tuned in step {i}\n".encode()
        message = f"Tune mod{i % 25}: step {i}\n".encode()
        stream += [
            b"commit refs/heads/main\n",
            f"committer Ada <ada@example.com> {1_700_000_000 + 60 * i} +0000\n".encode(),
            b"data %d\n%s" % (len(message), message),
            b"M 644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data),
        ]
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=b"".join(stream), check=True)
    subprocess.run(["git", "-C", str(repo), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)


def test_kill_ingest_git(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo, final, db = tmp_path / "repo", tmp_path / "final.db", tmp_path / "work.db"
    make_history(repo, 10000)
    args = ["ingest-git", str(repo), "--max-commits", "0", "--db-path"]
    run_to_end([*args, str(final)])
    assert len(inspect(final).sources) == 10000
    counts = kill_repeatedly([*args, str(db)], db, None, final, SEED + 1, partial_wanted=3)
    assert counts["partial"] >= 3, counts


def test_kill_reindex_embeddings_with_the_real_model(tmp_path):
    pytest.importorskip("fastembed")
    from crossmodalrag.index.models import install_offline

    vault, base, final, db = tmp_path / "vault", tmp_path / "base.db", tmp_path / "final.db", tmp_path / "work.db"
    install_offline(Settings(db_path=db))  # into tmp_path/models, where `mem` looks beside the database
    for i in range(48):
        path = vault / f"topic-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# Topic {i}\n\nWe changed parser {i} to a tokenizer and cached its results.\n\n"
            f"## Follow-up\n\nThe index rebuild {i} finished overnight without errors.\n",
            encoding="utf-8",
        )
    with open_store(base) as store:
        ingest_notes(store, [vault])
    shutil.copyfile(base, final)
    args = ["reindex-embeddings", "--batch-size", "2", "--db-path"]  # 16 chunks per commit: several commits
    run_to_end([*args, str(final)])
    assert len(inspect(final).vectors) == 96
    counts = kill_repeatedly([*args, str(db)], db, base, final, SEED + 2, partial_wanted=2)
    assert counts["partial"] >= 2, counts
