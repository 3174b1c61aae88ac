"""Opening the database: WAL, a busy timeout, foreign keys, migrations; the Store its callers write through.

Any number of readers run beside one writer (WAL). A second writer waits for the write lock: SQLite's busy
timeout first, then a bounded retry for the cases where SQLite answers SQLITE_BUSY without waiting (WAL
recovery, a snapshot that went stale; store/batch.py). Writers also take turns (store/turns.py), so a long
ingest cannot starve a short command for longer than one batch.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from crossmodalrag.errors import UPGRADE_HINT, StoreError
from crossmodalrag.store.access import READ_ONLY_HINT, connect_read_only, is_writable, read_only_failure
from crossmodalrag.store.batch import RETRY_SLEEP_CAP, WriteBatch, begin_immediate, rollback
from crossmodalrag.store.failures import DAMAGED_HINT, explain, is_busy  # noqa: F401 - re-exported
from crossmodalrag.store.migrations import LATEST_VERSION, Progress, applied_version, migrate
from crossmodalrag.store.turns import WriterTurns

BUSY_TIMEOUT_SECONDS = 30.0


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

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: every read inside sees the memory as its first read found it, whatever
        other processes commit meanwhile (a WAL reader keeps its snapshot). For a reader whose reads
        must agree with each other (`mem migrate` copying while an agent stores). Nothing may be
        written inside."""
        self.conn.execute("BEGIN")
        try:
            yield self.conn
        finally:
            rollback(self.conn)  # it only read

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
    if not create and path.exists() and path.is_file() and path.stat().st_size == 0:
        # An empty file (`: > memory.db`) is no memory yet: a reading command must not write a schema
        # into it (`mem log` did, `mem sources` refused), whatever the file was meant for.
        raise StoreError(f"{path} is not a memory database yet (it is empty)", "run `mem init-db` on it first")
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
        if path.name != ":memory:" and not os.access(path.parent, os.W_OK):
            # SQLite only says "unable to open database file", and the folder is there and readable.
            raise StoreError(
                f"cannot create {path}: its folder {path.parent} is not writable",
                "choose a database path (CMRAG_DB_PATH or --db-path) in a folder you can write to",
            )
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
