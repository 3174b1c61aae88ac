"""Processes taking turns beside one SQLite file: writers at its write lock (store/connection.py opens
one per database), and embedders at the backlog of chunks without vectors."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: writers still wait for each other, only without taking turns
    fcntl = None  # type: ignore[assignment]

LOCK_FILES = ("-writers", "-embedding")  # beside a database, ours, by name (SQLite's are copies.SIDECARS)
HANDOFF_SECONDS = 0.15  # longer than SQLite's longest sleep between two tries of a waiting writer (100 ms)


class WriterTurns:
    """Lets writer processes take turns at the write lock.

    SQLite's busy handler polls: a writer that commits and begins again within microseconds (a long
    ingest, one batch after another) wins every race, and a second writer times out however long it waits
    (measured: 7 s of waiting behind a 7 s ingest). A writer about to wait holds a shared `flock` on
    `<db>-writers`; a writer that just committed checks for such locks and, if any, pauses until the
    waiter got in. Locks die with their process, so a killed writer never leaves a turn behind.
    """

    def __init__(self, db_path: Path) -> None:
        real = Path(os.path.realpath(db_path))  # one lock per file, however each writer reaches it
        self.path = real.with_name(real.name + LOCK_FILES[0])
        self.fd: int | None = None
        # An in-memory database (as-of queries build one) has no other writers and no folder to lock in.
        self.disabled = fcntl is None or db_path.name == ":memory:"

    def _handle(self) -> int | None:
        if self.fd is None and not self.disabled:
            try:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                self.disabled = True  # a read-only folder: writers still wait, only less fairly
        return self.fd

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Announce a writer that wants the lock, for as long as it waits."""
        fd = self._handle()
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def others_waiting(self) -> bool:
        fd = self._handle()
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def hand_over(self) -> None:
        """After a commit: if another writer waits, pause until it has the lock (at most HANDOFF_SECONDS)."""
        deadline = time.monotonic() + HANDOFF_SECONDS
        while self.others_waiting() and time.monotonic() < deadline:
            time.sleep(0.005)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@contextmanager
def embedding_turn(db_path: Path | None, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """One process at a time embeds a database's chunks without vectors.

    Two processes (`mem sync --watch` and an ingest, two syncs) each read the same backlog and embedded
    all of it, the same work twice on a shared CPU. A second embedder waits here (`on_wait` says so) and
    then finds only what the first left. An exclusive `flock` on `<db>-embedding`: it dies with its
    process. No lock (an in-memory database, a read-only folder, PostgreSQL, Windows): both embed."""
    if fcntl is None or db_path is None or db_path.name == ":memory:":
        yield
        return
    real = Path(os.path.realpath(db_path))
    try:
        fd = os.open(real.with_name(real.name + "-embedding"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
