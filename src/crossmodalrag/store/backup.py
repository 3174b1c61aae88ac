"""Backups of the memory database: one self-contained file plus a `sha256sum` checksum (restores:
store/restore.py).

A backup is taken with SQLite's online backup API: a consistent snapshot even while other processes
read and write (WAL), converted to a rollback-journal file so that it needs no `-wal` beside it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossmodalrag.errors import StoreError
from crossmodalrag.store.access import connect_read_only, is_writable, read_only_failure
from crossmodalrag.store.backup_places import remember_backup
from crossmodalrag.store.connection import BUSY_TIMEOUT_SECONDS
from crossmodalrag.store.copies import (
    SIDECARS,
    check_integrity,
    copy_mode,
    free_name,
    make_folder,
    remove,
    schema_version,
    staging_file,
    sync_and_hash,
    sync_dir,
    write_checksum,
)
from crossmodalrag.store.failures import explain, is_disk_full
from crossmodalrag.store.turns import LOCK_FILES


@dataclass
class BackupReport:
    """Where a backup went, and what proves it is intact."""

    path: Path
    sha256: str
    bytes: int
    schema_version: int
    sources: int | None = None  # PostgreSQL: the sources it holds (those its role could see)
    only_rows_of: str | None = None  # PostgreSQL under row-level security: the role whose rows it holds

    def to_dict(self) -> dict[str, Any]:
        shown = {
            "path": str(self.path),
            "sha256": self.sha256,
            "bytes": self.bytes,
            "schema_version": self.schema_version,
        }
        if self.sources is not None:
            shown |= {"sources": self.sources, "only_rows_of": self.only_rows_of}
        return shown


def backups_dir(db_path: Path) -> Path:
    return Path(db_path).parent / "backups"


def backup_database(db_path: Path, dest: str | Path | None = None) -> BackupReport:
    """Copy the live database to `dest` (a file or folder; a path ending in `/` is a folder, created if
    need be) with a checksum beside it.

    Raises StoreError if the database is missing or not a memory database, or `dest` exists or is unusable.
    """
    db_path = Path(db_path)
    if not db_path.is_file():
        raise StoreError(f"no memory database at {db_path}", "check CMRAG_DB_PATH or --db-path")
    target = _backup_target(db_path, dest)
    if target.parent.resolve() != backups_dir(db_path).resolve():  # forget looks in backups/ anyway
        remember_backup(db_path, target.absolute())
    staging = staging_file(target.parent, target.name)
    try:
        source = _open_source(db_path)
        try:
            version = schema_version(source, db_path)
            copy = sqlite3.connect(staging, isolation_level=None)
            try:
                source.backup(copy)  # one step: a single read snapshot, never blocks the writer (WAL)
                # The copy keeps the WAL flag: closed, it is one file all the same, and a mem command reading
                # it (`mem verify` on a backup) leaves it byte for byte as it is. In rollback mode every
                # open switched it back to WAL, which broke its checksum and so its restore.
                check_integrity(copy, target)
            finally:
                copy.close()
        finally:
            source.close()
        copy_mode(db_path, staging)
        digest, size = sync_and_hash(staging)
        os.replace(staging, target)
        write_checksum(target, digest)
        sync_dir(target.parent)
    except sqlite3.DatabaseError as exc:
        if is_disk_full(exc):  # the source is only read: the copy is what filled its disk
            raise StoreError(
                f"cannot write the backup {target}: its disk is full ({exc})",
                f"free space on the disk of {target.parent} or back up to another place; "
                "the unfinished copy was removed and the database is as it was",
            ) from exc
        if isinstance(exc, sqlite3.OperationalError) and not is_writable(db_path):
            raise read_only_failure(db_path, exc) from exc
        raise _sqlite_failure(exc, f"cannot back up {db_path}") from exc
    except OSError as exc:
        raise StoreError(
            f"cannot write the backup {target}: {exc}", "check the folder's free space and permissions"
        ) from exc
    finally:
        remove(staging)
    return BackupReport(target, digest, size, version)


def _open_source(db_path: Path) -> sqlite3.Connection:
    """The database to copy. One that cannot be written (a snapshot, read-only media) is read as the read
    commands read it: a plain connection would have to create its -shm beside it, which the folder refuses.
    A writable one keeps a read-write connection, which tidies the -wal and -shm if it closes last."""
    if is_writable(db_path):
        return sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    return connect_read_only(db_path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)


def names_a_folder(dest: str | Path | None, chosen: Path) -> bool:
    """Does the backup destination name a folder to put a timestamped backup in? None (backups/), an
    existing folder, or a path ending in a separator: `backups/new/` is a folder to create, not a file
    named `new`. Raises StoreError for an empty path, which would otherwise mean the current folder."""
    if dest is None:
        return True
    raw = os.fspath(dest)
    if not raw.strip():
        raise StoreError(
            "the backup path is empty", "leave it out for backups/ beside the database, or name a file or folder"
        )
    return raw.endswith(("/", os.sep)) or chosen.is_dir()


def _backup_target(db_path: Path, dest: str | Path | None) -> Path:
    """The file a backup goes to: `dest`, or a timestamped name in `dest` or in `backups/` beside the database."""
    # Resolved: `main/../elsewhere` and the real path name one file, recorded and shown once, as it is.
    chosen = backups_dir(db_path) if dest is None else Path(dest).expanduser().resolve()
    if names_a_folder(dest, chosen):
        if chosen.exists() and not chosen.is_dir():
            raise StoreError(f"{chosen} is a file, not a folder", "name a new file, or a folder to put the backup in")
        make_folder(chosen)
        return free_name(chosen, f"{db_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}", ".db")
    if side_file := _side_file_named(chosen, db_path):
        # SQLite owns that name: it would delete or overwrite the backup at the next checkpoint or close.
        raise StoreError(f"the backup would be the database's own {side_file} file", "choose another path")
    if chosen.exists():
        raise StoreError(f"{chosen} already exists", "choose another name, or a folder to put a new backup in")
    if chosen.resolve() == db_path.resolve():
        raise StoreError("the backup would overwrite the database itself", "choose another path")
    make_folder(chosen.parent)
    return chosen


def _side_file_named(path: Path, db_path: Path) -> str | None:
    """The suffix (SQLite's `-wal`, `-shm`, `-journal`, or a lock file of ours) if `path` is a side file of
    the live database."""
    database = str(db_path.resolve())
    return next((s for s in (*SIDECARS, *LOCK_FILES) if str(path.resolve()) == database + s), None)


def _sqlite_failure(exc: sqlite3.DatabaseError, what: str) -> StoreError:
    message, hint = explain(exc)
    return StoreError(f"{what}: {message}", hint)
