"""PostgreSQL's write batches: units that each commit alone, or several units in one transaction.

SQLite's WriteBatch groups units as savepoints of one transaction. On PostgreSQL a transaction the
server aborts (a serialization failure, a deadlock between two writers) takes every unit in it, so a
batch may only group units it can write again: GroupBatch keeps each unit's write and redoes the
lost ones in a new transaction.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from crossmodalrag.errors import WriteConflict
from crossmodalrag.store.batch import WriteBatch
from crossmodalrag.store.writers import lock_source, retrying

T = TypeVar("T")


class UnitBatch(WriteBatch):
    """A write batch whose units commit one by one without waiting for the WAL flush
    (`synchronous_commit = off` for these transactions only): the durability SQLite's ingest has with
    synchronous=NORMAL in WAL mode. A crash of the server's machine can lose the last fraction of a
    second of units, never half of one (the next ingest redoes them: fingerprints). Measured: 8 ms
    per note of flushing on this machine, a third of PostgreSQL's ingest time. A unit being the whole
    transaction, it needs no savepoint, and the transaction opens in the same round trip as the setting."""

    savepoints = False

    def _begin(self) -> None:
        self.conn.execute("BEGIN; SET LOCAL synchronous_commit = off")


class GroupBatch(UnitBatch):
    """Units committed together at most every `max_seconds` (an ingest's notes: one BEGIN, one lock of
    the change log's chain and one COMMIT for dozens of notes instead of each), each unit's
    statements sent in one pipeline. Every unit must run inside `run(write)`: a transaction the
    server aborts, or that a failing unit rolls back, loses the units before it, and `run` writes
    them again (their writes re-read what they depend on). A unit stays whole or absent, a kill
    loses only the open transaction's units, which the next ingest redoes (fingerprints)."""

    def __init__(self, conn, max_seconds: float, patience: float) -> None:
        super().__init__(conn, max_seconds, None, patience)
        self.kept: list[Callable[[], object]] = []  # the writes in the open transaction, to redo if it is lost
        self.running = False
        self.unit_ended: float | None = None
        self.slow_reads = False  # the caller took longer than a batch lasts between its last two units

    def run(self, write: Callable[[], T]) -> T:
        """Run `write` (units of this batch), again while the server aborts its transaction as
        colliding (with the units lost with it written again first). Raises what `write` raises, the
        units before it kept; WriteConflict after `retrying`'s tries."""
        outer, self.running = self.running, True
        try:
            return retrying(lambda: self._run_once(write))
        finally:
            self.running = outer

    def _run_once(self, write: Callable[[], T]) -> T:
        self._redo_lost()
        try:
            result = write()
        except WriteConflict:
            raise  # `retrying` runs it again, after the units lost with it
        except BaseException:
            self._redo_lost()  # it failed alone: the units before it go back into a transaction
            raise
        if self.opened_at is not None:  # still in the open transaction (not committed by its unit)
            self.kept.append(write)
        return result

    def _redo_lost(self) -> None:
        """Write again the units of a transaction that ended without committing."""
        if self.opened_at is not None or not self.kept:
            return
        lost, self.kept = self.kept, []
        for i, write in enumerate(lost):
            try:
                write()
            except BaseException:
                self.kept += lost[i:]  # with those redone so far, all in the aborted transaction
                raise
            if self.opened_at is not None:
                self.kept.append(write)

    @contextmanager
    def unit(self) -> Iterator:
        """One all-or-nothing unit, its statements pipelined (the source lock too: the first result
        the unit reads waits for it). Raises AssertionError outside `run`."""
        if not self.running:
            raise AssertionError("a GroupBatch unit must run inside batch.run(write)")
        claiming, self.claiming = self.claiming, None
        started = time.monotonic()
        self.slow_reads = self.unit_ended is not None and started - self.unit_ended > self.max_seconds
        with super().unit() as conn, conn.pipeline():
            if claiming is not None:
                lock_source(conn, claiming)
            yield conn
        self.unit_ended = time.monotonic()

    def due(self) -> bool:
        """Commit every `max_seconds`, or at once when the caller reads slowly between units (OCR of a
        PDF or an image): its transaction, and the source locks in it, then stay open for no gain."""
        return self.slow_reads or super().due()

    def commit(self) -> None:
        """Write what the units deferred (index rows, change-log records) in one pipeline, then COMMIT.
        Raises WriteConflict (everything rolled back) if the server aborts the transaction."""
        if self.opened_at is None:
            return
        try:
            with self.conn.pipeline():
                for action in self.before_commit:
                    action(self.conn)
                for flush, items in self.collected.items():
                    flush(self.conn, items)
            self.conn.execute("COMMIT")
        except BaseException:
            self._abort()
            raise
        self._forget_pending()
        self.kept = []

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self.commit)
        except BaseException:
            if self.opened_at is not None:  # redone units whose commit failed: not kept half-open
                self._abort()
            raise
