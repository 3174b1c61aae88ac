"""Reading a memory that cannot be written: a backup on read-only media, a snapshot, a file without write permission.

SQLite opens such a file read-only (`mode=ro`), but a WAL database still wants to create its `-shm`
beside it, which a read-only folder refuses: "unable to open database file" on read-only media, "attempt
to write a readonly database" (SQLITE_READONLY_DIRECTORY) in a folder the user may not write. Only then,
and only with no `-wal` beside it (nothing beyond the main file to read), is it opened `immutable=1` (no
locks, no side files): a writer would need those side files too, which the folder refuses it as well. Not
before: a reader that assumes a file immutable while another user's writer changes it can read torn pages,
and plain `mode=ro` takes the locks that prevent it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from crossmodalrag.errors import StoreError

READ_ONLY_HINT = "copy the database file (and its -wal file, if any) to a writable folder and point CMRAG_DB_PATH there"


def is_writable(path: Path) -> bool:
    """Whether SQLite can write the file and create its side files (`-wal`, `-shm`, `-journal`) beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def connect_read_only(path: Path, **options) -> sqlite3.Connection:
    """A read-only connection to `path`, immutable if nothing else can read it (see above). Raises
    sqlite3.OperationalError if SQLite cannot read it either way."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, **options)
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # opening is lazy: read to know
        return conn
    except sqlite3.DatabaseError as error:
        conn.close()
        if not isinstance(error, sqlite3.OperationalError) or not _folder_refused_side_files(error):
            raise
        if Path(f"{path}-wal").exists():
            raise
    return sqlite3.connect(f"file:{quote(str(path))}?mode=ro&immutable=1", uri=True, **options)


def _folder_refused_side_files(error: sqlite3.OperationalError) -> bool:
    """Did SQLite fail to read because it could not create a side file beside the database?"""
    name = getattr(error, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_CANTOPEN") or name == "SQLITE_READONLY_DIRECTORY"


def read_only_failure(path: Path, error: Exception) -> StoreError:
    """Why a read-only file could not be read: SQLite needed to write beside it."""
    return StoreError(f"cannot read {path}: the file or its folder is read-only ({error})", READ_ONLY_HINT)
