"""Reading a memory that cannot be written: a backup on read-only media, a snapshot, a file without write permission.

SQLite opens such a file read-only by itself, but a WAL database still wants to create its `-shm` beside
it, which a read-only folder refuses ("unable to open database file"). With no `-wal` there is nothing
beyond the main file to read, and on read-only media nobody can change it, so `immutable=1` (no locks,
no side files) reads it exactly as it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from crossmodalrag.errors import StoreError

READ_ONLY_HINT = "copy the database file (and its -wal file, if any) to a writable folder and point CMRAG_DB_PATH there"


def is_writable(path: Path) -> bool:
    """Whether SQLite can write the file and create its side files (`-wal`, `-shm`, `-journal`) beside it."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def read_only_uri(path: Path) -> str:
    """The URI that opens `path` read-only; immutable when its folder is read-only and no -wal exists
    (SQLite could neither create the -shm it wants nor find anything else to read)."""
    uri = f"file:{quote(str(path))}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists():
        uri += "&immutable=1"
    return uri


def read_only_failure(path: Path, error: Exception) -> StoreError:
    """Why a read-only file could not be read: SQLite needed to write beside it."""
    return StoreError(f"cannot read {path}: the file or its folder is read-only ({error})", READ_ONLY_HINT)
