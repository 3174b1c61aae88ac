"""Writer processes taking turns at SQLite's write lock (store/connection.py opens one per database)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows: writers still wait for each other, only without taking turns
    fcntl = None  # type: ignore[assignment]

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
        self.path = real.with_name(real.name + "-writers")
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
