"""Opening the database: WAL, a busy timeout, foreign keys, migrations; write transactions that wait their turn.

Any number of readers run beside one writer (WAL). A second writer waits for the write lock: SQLite's busy
timeout first, then a bounded retry for the cases where SQLite answers SQLITE_BUSY without waiting (WAL
recovery, a snapshot that went stale). Writers also take turns (see WriterTurns), so a long ingest cannot
starve a short command for longer than one batch.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from crossmodalrag.errors import UPGRADE_HINT, StoreError, WriteConflict
from crossmodalrag.store.access import READ_ONLY_HINT, connect_read_only, is_writable, read_only_failure
from crossmodalrag.store.failures import DAMAGED_HINT, explain, is_busy  # noqa: F401 - re-exported
from crossmodalrag.store.migrations import LATEST_VERSION, Progress, applied_version, migrate
from crossmodalrag.store.writers import lock_source, retrying

try:
    import fcntl
except ImportError:  # Windows: writers still wait for each other, only without taking turns
    fcntl = None  # type: ignore[assignment]

BUSY_TIMEOUT_SECONDS = 30.0
HANDOFF_SECONDS = 0.15  # longer than SQLite's longest sleep between two tries of a waiting writer (100 ms)
RETRY_SLEEP_CAP = 0.1  # our own retries poll at least as often, for the same reason
T = TypeVar("T")


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


def damage(conn) -> str | None:
    """The first problem SQLite's quick check finds in the database file, or None (and None on
    PostgreSQL, whose server checks its own pages). It reads every page once: for the commands that
    vouch for the file (`init-db`, `verify`), not for every open."""
    if getattr(conn, "backend", None) == "postgresql":
        return None
    try:
        found = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as error:
        return str(error)
    if found == "ok":
        return None
    return "; ".join(line for line in found.splitlines() if not line.startswith("***")) or found  # one line


def begin_immediate(conn: sqlite3.Connection, turns: WriterTurns | None, patience: float) -> None:
    """BEGIN IMMEDIATE, retried with backoff for up to `patience` seconds. Raises StoreError if it stays locked."""
    started = time.monotonic()
    delay = 0.005
    with turns.waiting() if turns else nullcontext():
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as error:
                if not is_busy(error):
                    raise
                waited = time.monotonic() - started
                if waited + delay > patience:
                    raise StoreError(
                        f"the database stayed locked for {waited:.0f} s: {error}",
                        "another mem process is writing; retry when it finishes",
                    ) from error
            time.sleep(delay * random.uniform(0.5, 1.0))  # jitter: two waiters do not retry in lockstep
            delay = min(delay * 2, RETRY_SLEEP_CAP)


def still_open(conn) -> bool:
    """Whether a transaction is open: SQLite ends one itself on some errors (a full disk, out of
    memory), and a ROLLBACK then fails with "no transaction is active", hiding the error that matters."""
    return getattr(conn, "in_transaction", True)  # PostgreSQL's connection says nothing: assume open


def rollback(conn) -> None:
    if still_open(conn):
        conn.execute("ROLLBACK")


class MemoryConnection(sqlite3.Connection):
    """A connection that carries who is writing (`actor`: cli, sync, mcp:<agent id>), whether changes
    are versioned (None: ask the settings on first write) and the write batch whose transaction is open
    on it (its log records wait there until it commits); the change log reads all three (versioning/)."""

    actor: str = "cli"
    versioning: bool | None = None
    has_change_log: bool = False
    batch: "WriteBatch | None" = None


class Store:
    """A connection to the memory database. Writers use `transaction()` or `batched()`; reads run directly.
    PostgreSQL's Store (store/postgres/) has the same interface."""

    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection, path: Path, patience: float = BUSY_TIMEOUT_SECONDS) -> None:
        self.conn = conn
        self.path = path
        self.patience = patience  # how long a writer retries beyond SQLite's own busy timeout
        self.turns = WriterTurns(Path(path))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT; any exception rolls the whole unit back. Raises StoreError if locked."""
        begin_immediate(self.conn, self.turns, self.patience)
        try:
            yield self.conn
        except BaseException:
            rollback(self.conn)
            raise
        self.conn.execute("COMMIT")

    def batched(self, max_seconds: float = 0.25, replayable: bool = False) -> "WriteBatch":
        """Group many small units into one commit every `max_seconds` (see WriteBatch). `replayable`
        promises that every unit runs inside `batch.run(write)`: PostgreSQL then groups units too
        (here they always are: a savepoint each)."""
        return WriteBatch(self.conn, max_seconds, self.turns, self.patience)

    def schema_version(self) -> int:
        return applied_version(self.conn)

    @property
    def location(self) -> str:
        """Where the memory lives, for messages: a file path here, a server url on PostgreSQL."""
        return str(self.path)

    def encode_vector(self, vector) -> bytes:
        """A chunk vector as the chunk_vectors.vector column stores it (float32 bytes here)."""
        return vector.astype("float32").tobytes()

    def decode_vector(self, stored):
        """The float32 array of a stored chunk_vectors.vector value."""
        import numpy as np

        return np.frombuffer(stored, dtype=np.float32)

    def recover(self) -> bool:
        """After an error, make the store usable again if its connection was lost; whether it did.
        A SQLite file never loses its connection."""
        return False

    def close(self) -> None:
        self.conn.close()
        self.turns.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    path: Path, create: bool = True, busy_timeout: float = BUSY_TIMEOUT_SECONDS, progress: Progress | None = None
) -> Store:
    """Open (and migrate) the database; `progress` hears from a long migration (re-tokenizing).
    Raises StoreError if it is missing, corrupt, too new or stays locked."""
    path = Path(path)
    refuse_folder(path)
    if not path.exists():
        if not create:
            raise StoreError(f"no memory database at {path}", "run `mem init-db` or `mem seed-sample` first")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a part of the path is a file, or the place is read-only
            blocking = next((p for p in path.parents if p.exists()), None)
            why = f"{blocking} is a file" if blocking and not blocking.is_dir() else exc.strerror or str(exc)
            raise StoreError(
                f"cannot create the database's folder {path.parent}: {why}",
                "choose a database path (CMRAG_DB_PATH or --db-path) in a folder you can write to",
            ) from exc
    patience = max(busy_timeout, BUSY_TIMEOUT_SECONDS)
    # Read-only media or permissions: readers still read it; a write says the file is read-only.
    read_only = path.exists() and path.name != ":memory:" and not is_writable(path)
    started, delay = time.monotonic(), 0.005
    while True:
        conn = None
        try:
            conn = _connect(path, busy_timeout, read_only)
            _prepare(conn, path, busy_timeout, progress, read_only)
            break
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            busy = isinstance(exc, sqlite3.OperationalError) and is_busy(exc)
            # Two processes opening a new WAL file at once: SQLite can answer BUSY without waiting.
            if busy and time.monotonic() - started + delay < patience:
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, RETRY_SLEEP_CAP)
                continue
            if busy:
                raise StoreError(
                    f"{path} stayed locked while opening: {exc}",
                    "another mem process is writing; retry when it finishes",
                ) from exc
            if read_only and isinstance(exc, sqlite3.OperationalError):
                raise read_only_failure(path, exc) from exc
            raise StoreError(f"cannot open {path} as a memory database: {exc}", explain(exc)[1]) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
    conn.row_factory = sqlite3.Row
    return Store(conn, path, patience)


def refuse_folder(path: Path) -> None:
    """Raises StoreError when the database path names a folder (SQLite said "disk I/O error" or
    "unable to open", and other commands "no memory database", whose hint, init-db, failed too)."""
    if path.is_dir():
        raise StoreError(
            f"{path} is a folder, not a database file",
            f"point CMRAG_DB_PATH or --db-path at a file, e.g. {path / 'memory.db'}",
        )


def _connect(path: Path, busy_timeout: float, read_only: bool) -> sqlite3.Connection:
    options = {"timeout": busy_timeout, "isolation_level": None, "factory": MemoryConnection}
    return connect_read_only(path, **options) if read_only else sqlite3.connect(path, **options)


def _prepare(
    conn: sqlite3.Connection,
    path: Path,
    busy_timeout: float,
    progress: Progress | None = None,
    read_only: bool = False,
) -> None:
    """Pragmas every connection needs, then the schema check. Raises StoreError if the file is too new,
    another application's, or too old to read and read-only."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    if not read_only:  # a read-only file keeps the journal mode it has (changing it is a write)
        conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL is durable in WAL mode except for the last commits before a power cut.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    refuse_foreign(conn, path)
    version = applied_version(conn)
    if version > LATEST_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this program's {LATEST_VERSION}",
            UPGRADE_HINT,
        )
    if version < LATEST_VERSION and read_only:
        raise StoreError(
            f"{path} has schema version {version}, older than this program's {LATEST_VERSION}, and is read-only",
            READ_ONLY_HINT + ", then run `mem init-db` to upgrade the copy",
        )
    if version < LATEST_VERSION:
        _migrate_once(conn, progress)


def refuse_foreign(conn: sqlite3.Connection, path: Path) -> None:
    """Raises StoreError if the file holds tables but no schema version: another application's SQLite
    database (a browser's history, say), which migrating would fill with mem's tables beside its own.
    (Every memory records its schema version before it creates any other table.)"""
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    if tables and "schema_migrations" not in tables:
        raise StoreError(
            f"{path} is another application's SQLite database, not a memory (its tables: {', '.join(tables[:3])}"
            + (", ..." if len(tables) > 3 else "")
            + ")",
            "mem leaves it alone: point CMRAG_DB_PATH (or --db-path) at a new file for the memory",
        )


def _migrate_once(conn: sqlite3.Connection, progress: Progress | None = None) -> None:
    """Migrate, tolerating another process that migrates the same new database at the same moment.

    Both read version 0, the loser's CREATE TABLE fails once the winner committed; each migration
    is its own transaction, so the loser rolled back cleanly and just re-reads where the winner got.
    """
    for _ in range(LATEST_VERSION + 1):
        before = applied_version(conn)
        try:
            migrate(conn, progress=progress)
            return
        except sqlite3.OperationalError:
            if applied_version(conn) <= before:
                raise


class WriteBatch:
    """All-or-nothing units (savepoints) committed together at most every `max_seconds`.

    Committing each source alone costs FTS5 a segment flush per source (~0.5 ms, most of ingest
    time at scale). Grouping keeps every guarantee that matters: a unit is whole or absent, an
    exception rolls back only its own unit and the finished ones are committed on the way out,
    readers see new sources within `max_seconds`, and a kill -9 loses at most that much work,
    which the next run redoes (fingerprints make it idempotent).
    """

    savepoints = True  # False: each unit is a transaction of its own (store/postgres UnitBatch)

    def __init__(
        self,
        conn: sqlite3.Connection,
        max_seconds: float,
        turns: WriterTurns | None = None,
        patience: float = BUSY_TIMEOUT_SECONDS,
    ) -> None:
        self.conn = conn
        self.max_seconds = max_seconds
        self.turns = turns
        self.patience = patience
        self.opened_at: float | None = None
        self.before_commit: list[Callable[[sqlite3.Connection], None]] = []
        self.collected: dict[Callable[[sqlite3.Connection, list], None], list] = {}
        self.written: set[str] = set()  # the sources written since the last commit
        self.claiming: str | None = None  # the source the next unit writes: locked when it opens
        self.inside_unit = False  # a unit opened within a unit is part of it (see unit)

    def writes(self, uri: str) -> None:
        """Say that the next unit writes this source. One already written in this batch (a chat export
        holding a session id twice) is committed first: its deferred index rows must go in before
        the rewrite deletes its chunks, or they would land afterwards under reused chunk ids."""
        if uri in self.written:
            self.commit()
        self.written.add(uri)
        self.claiming = uri

    def run(self, write: Callable[[], T]) -> T:
        """Run `write` (one or more units of this batch), again while the server aborts it as colliding
        (`retrying`; never on SQLite, whose writers queue). PostgreSQL's GroupBatch also redoes there
        the units the aborted transaction took with it."""
        return retrying(write)

    def defer(self, action: Callable[[sqlite3.Connection], None]) -> None:
        """Run `action` inside the transaction just before it commits.

        FTS5 flushes its pending index on every savepoint; deferring the FTS inserts to the end
        of the batch makes one flush per batch instead of one per source (2x ingest speed at 10k notes).
        """
        self.before_commit.append(action)

    def collect(self, flush: Callable[[sqlite3.Connection, list], None], item: Any) -> None:
        """Hand `item` to `flush(conn, items)`, which runs once at commit, after the deferred actions,
        with every item collected since the last commit in order (one executemany instead of a
        statement per unit: the change log's records). A unit that fails drops the items it collected."""
        self.collected.setdefault(flush, []).append(item)

    def collected_items(self, flush: Callable[[sqlite3.Connection, list], None]) -> list:
        """The items waiting for `flush` (read-only: a unit may need to see what it has not written yet)."""
        return self.collected.get(flush, [])

    def _attach(self, batch: "WriteBatch | None") -> None:
        """Mark the connection as writing inside this batch's transaction (None: no longer)."""
        if hasattr(self.conn, "batch"):  # a plain sqlite3 connection takes no attributes
            self.conn.batch = batch

    @contextmanager
    def unit(self) -> Iterator[sqlite3.Connection]:
        """One all-or-nothing unit; actions it defers are dropped with it if it fails. Raises StoreError if locked.
        A unit opened inside another is part of it (whole or absent with it, committed with it): a
        check and the writes it decides stay in one transaction (agent/memories.py)."""
        if self.inside_unit:
            yield from self._part_of_unit()
            return
        pending, self.before_commit = self.before_commit, []
        counts = {flush: len(items) for flush, items in self.collected.items()}
        if self.opened_at is None:
            self._begin()
            self.opened_at = time.monotonic()
            self._attach(self)
        claiming, self.claiming = self.claiming, None
        try:
            if claiming is not None:
                lock_source(self.conn, claiming)
            if self.savepoints:
                self.conn.execute("SAVEPOINT unit")
        except StoreError:  # a conflict or a lock wait given up: the server aborted the transaction
            self._abort()
            raise
        try:
            self.inside_unit = True
            try:
                yield self.conn
            finally:
                self.inside_unit = False
        except WriteConflict:
            self._abort()  # the server aborted the whole transaction, not only this unit
            raise
        except BaseException:
            if not self.savepoints:  # the transaction holds this unit alone
                self._abort()
                raise
            self.before_commit = pending
            for flush, items in self.collected.items():
                del items[counts.get(flush, 0) :]
            if still_open(self.conn):
                self.conn.execute("ROLLBACK TO unit")
                self.conn.execute("RELEASE unit")
            raise
        if self.savepoints:
            self.conn.execute("RELEASE unit")
        self.before_commit = pending + self.before_commit
        if self.due():
            self.commit()

    def _part_of_unit(self) -> Iterator[sqlite3.Connection]:
        claiming, self.claiming = self.claiming, None
        if claiming is not None:
            lock_source(self.conn, claiming)
        yield self.conn  # an error goes up to the enclosing unit, which rolls back the whole

    def due(self) -> bool:
        """At the end of a unit: is it time to commit the open transaction?"""
        return time.monotonic() - self.opened_at >= self.max_seconds

    def _begin(self) -> None:
        begin_immediate(self.conn, self.turns, self.patience)

    def commit(self) -> None:
        if self.opened_at is None:
            return
        try:
            for action in self.before_commit:
                action(self.conn)
            for flush, items in self.collected.items():
                flush(self.conn, items)
        except BaseException:
            rollback(self.conn)
            raise
        finally:
            self._forget_pending()
        try:
            self.conn.execute("COMMIT")
        except WriteConflict:  # PostgreSQL's serializable check runs at commit too; the work is rolled back
            rollback(self.conn)
            raise
        if self.turns:
            self.turns.hand_over()

    def _abort(self) -> None:
        """Roll the whole transaction back, with everything deferred or collected for it."""
        rollback(self.conn)
        self._forget_pending()

    def _forget_pending(self) -> None:
        self.before_commit = []
        self.collected = {}
        self.written = set()
        self.opened_at = None
        self._attach(None)

    def __enter__(self) -> "WriteBatch":
        return self

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if kind is not None and self.opened_at is not None and not still_open(self.conn):
            self._forget_pending()  # SQLite ended the transaction on that error: it is the one to report
            return
        self.commit()
