"""Read-only connections, for servers that must never change the memory (the web console and API).

SQLite enforces it (`mode=ro`), so no code path behind a request can write the file, however it was
reached. (`PRAGMA query_only` would also forbid the TEMP tables the FTS query analyser uses as scratch.)
Migrations cannot run on such a connection: an old database is an error with a hint.
"""

from __future__ import annotations

import queue
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator
from urllib.parse import quote

from crossmodalrag.errors import UPGRADE_HINT, StoreError
from crossmodalrag.store.access import connect_read_only, is_writable, read_only_failure
from crossmodalrag.store.connection import Store, is_busy, refuse_folder, refuse_foreign
from crossmodalrag.store.failures import explain
from crossmodalrag.store.migrations import LATEST_VERSION

if TYPE_CHECKING:
    from crossmodalrag.config import Settings


def open_reader(path: Path, busy_timeout: float = 5.0) -> Store:
    """Open the database read-only. Raises StoreError if it is missing, not a memory database, or
    at another schema version than this program's."""
    path = Path(path).expanduser().resolve()
    refuse_folder(path)
    if not path.is_file():
        raise StoreError(f"no memory database at {path}", "run `mem init-db` or `mem seed-sample` first")
    try:
        conn = connect_read_only(  # immutable on read-only media, where SQLite could not create its -shm
            path,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,  # one request = one thread at a time; FastAPI may hop threads
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        version = _schema_version(conn, path)
    except sqlite3.DatabaseError as error:
        if isinstance(error, sqlite3.OperationalError) and is_busy(error):
            raise _locked(path) from error
        if isinstance(error, sqlite3.OperationalError) and not is_writable(path):
            raise read_only_failure(path, error) from error
        raise StoreError(f"cannot open {path} read-only: {error}", explain(error)[1]) from error
    if version != LATEST_VERSION:
        conn.close()
        newer = version > LATEST_VERSION
        raise StoreError(
            f"{path} has schema version {version}, this program's is {LATEST_VERSION}",
            UPGRADE_HINT if newer else "run `mem init-db` once to upgrade it (the server opens it read-only)",
        )
    conn.row_factory = sqlite3.Row
    return ReaderStore(conn, path)


class ReaderStore(Store):
    """A read-only Store that leaves no empty `-wal` and `-shm` beside the file when it closes last."""

    def close(self) -> None:
        super().close()
        remove_idle_side_files(self.path)


def remove_idle_side_files(path: Path) -> None:
    """Let SQLite delete the empty `-wal` and `-shm` of a WAL database nobody has open.

    A read-only connection creates them to read a WAL database but, unable to checkpoint, leaves them
    when it closes: a backup read with `mem stats` then looked to `mem restore` like a file in use. A
    read-write connection that closes last deletes them, and one that is not last leaves them to the
    others. Only an empty WAL is handed to one: checkpointing it writes nothing into the file, while a
    WAL holding frames is its writers' (or, left by a crash, the user's) to checkpoint."""
    wal = Path(f"{path}-wal")
    try:
        if wal.stat().st_size != 0:
            return
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=rw", uri=True, timeout=0)  # rw never creates the file
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # opens the WAL, so closing tidies it
        finally:
            conn.close()
    except (OSError, sqlite3.Error):
        pass  # gone already, busy, or not ours to write: the files stay, as they would have


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The file's schema version. Raises StoreError if it is locked or not a memory database, and
    sqlite3.OperationalError for what else kept SQLite from reading it (a read-only folder, say)."""
    try:
        refuse_foreign(conn, path)
        row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    except sqlite3.OperationalError as error:
        if is_busy(error):  # another process holds it exclusively: not a question of what the file is
            conn.close()
            raise _locked(path) from error
        if "no such table" not in str(error):
            conn.close()
            raise
        conn.close()
        raise StoreError(f"{path} is not a memory database yet ({error})", "run `mem init-db` on it first") from error
    except StoreError:
        conn.close()
        raise
    return row[0] or 0


def _locked(path: Path) -> StoreError:
    return StoreError(
        f"{path} stayed locked by another process", "wait for the other mem command to finish, then retry"
    )


def open_configured_reader(settings: "Settings") -> Store:
    """The configured memory, read-only: the SQLite file (mode=ro), or a PostgreSQL session whose
    transactions the server keeps read-only. Raises StoreError as open_reader / open_postgres_store."""
    if settings.db_url:
        from crossmodalrag.store.postgres import open_postgres_store

        return open_postgres_store(
            settings.db_url, settings.db_owner, False, settings.db_statement_timeout, read_only=True
        )
    return open_reader(settings.db_path)


class ReaderPool:
    """Read-only connections kept between requests: a new connection starts with a cold page cache,
    which at 10k notes made each question ~70 ms slower (bench/serve.py). One request holds a
    connection at a time; at most `size` idle ones are kept."""

    def __init__(self, settings: "Settings", size: int = 4) -> None:
        self.settings = settings
        self.size = size
        self.idle: queue.SimpleQueue[Store] = queue.SimpleQueue()

    @contextmanager
    def reader(self) -> Iterator[Store]:
        """A connection for the duration of the block. Raises StoreError as open_reader does."""
        try:
            store = self.idle.get_nowait()
        except queue.Empty:
            store = open_configured_reader(self.settings)
        try:
            yield store
        except BaseException:
            store.close()  # whatever went wrong, do not hand this connection to the next request
            raise
        if self.idle.qsize() < self.size:
            self.idle.put(store)
        else:
            store.close()

    def close(self) -> None:
        while True:
            try:
                self.idle.get_nowait().close()
            except queue.Empty:
                return
