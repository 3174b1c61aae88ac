"""Restoring a backup: never a half-restored database.

The backup is copied into a temporary file beside the database, verified there (checksum, integrity
check, schema, change log), synced, and renamed over the database in one step. The old database must
not be in use; its WAL is checkpointed first, because a WAL left beside the new file would be replayed
into it and corrupt it. The replaced file is kept in `backups/`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossmodalrag.errors import UPGRADE_HINT, StoreError
from crossmodalrag.store.access import connect_read_only
from crossmodalrag.store.backup import backups_dir
from crossmodalrag.store.connection import is_busy, open_store, refuse_folder, refuse_foreign
from crossmodalrag.store.copies import (
    SIDECARS,
    blocks,
    check_checksum,
    check_integrity,
    copy_mode,
    free_name,
    fsync,
    make_folder,
    remove,
    schema_version,
    staging_file,
    sync_dir,
    unlink,
)
from crossmodalrag.store.id_marks import highest_ids, raise_marks
from crossmodalrag.store.migrations import LATEST_VERSION
from crossmodalrag.store.readonly import remove_idle_side_files
from crossmodalrag.versioning.verify import Problem, verify, what_works
from crossmodalrag.wording import counted

IN_USE_TIMEOUT = 2.0  # how long a restore waits for other connections to let go of the old database


@dataclass
class RestoreReport:
    """What was restored where; `replaced` is the kept copy of the old database, if there was one."""

    path: Path
    source: Path
    sha256: str
    bytes: int
    schema_version: int
    sources: int
    replaced: Path | None
    verified: dict[str, Any] | None = None  # `mem verify` of the restored memory (versioning/verify.py)
    forgotten_since: list[str] = field(default_factory=list)  # forgotten in the replaced database, back now

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "source": str(self.source),
            "sha256": self.sha256,
            "bytes": self.bytes,
            "schema_version": self.schema_version,
            "sources": self.sources,
            "replaced": str(self.replaced) if self.replaced else None,
            "verify": self.verified,
            "forgotten_since": self.forgotten_since,
        }


def restore_database(source: Path, db_path: Path, force: bool = False, unverified: bool = False) -> RestoreReport:
    """Verify a backup, then atomically make it the active database.

    Raises StoreError if the backup is missing, damaged, fails its checksum, is not a memory database or
    is too new; if its change log does not verify against its rows (unless `unverified`); if a database
    exists and `force` is not set; or if the database is in use. On any error the active database is
    left as it was.
    """
    source, given = Path(source).expanduser().absolute(), Path(db_path)
    # A database reached through a symbolic link (kept on another disk) is replaced where it lives:
    # renamed over, the link became a copy and the real file stayed as it was.
    db_path = given.resolve() if given.is_symlink() else given
    refuse_folder(db_path)  # else the copy is made and verified, and the last rename fails "Is a directory"
    _require_backup_file(source, db_path)
    make_folder(db_path.parent)
    staging = staging_file(db_path.parent, db_path.name)
    try:
        digest, size = _copy_and_hash(source, staging)
        check_checksum(source, digest)
        version, sources = _verify_copy(staging, source)
        if db_path.exists() and not force:
            raise _occupied(db_path, f"{source} is a valid backup: schema version {version}, {sources} sources")
        with open_store(staging, create=False) as store:  # migrates an older backup, on the copy
            version = store.schema_version()
            verified = verify(store.conn).to_dict()  # the change log came along: prove it still matches
            forgotten = _forgotten_since(db_path, store.conn) if db_path.exists() else []
            if db_path.exists():
                # the backup's marks are of its day: ids handed out since must not open other text
                raise_marks(store.conn, _highest_ids(db_path))
        if not verified["ok"] and not unverified:
            raise _unverified(source, verified)
        if db_path.exists():
            copy_mode(db_path, staging)
        fsync(staging)
        replaced = _swap_in(staging, db_path)
    except OSError as exc:
        raise StoreError(
            f"cannot restore {source}: {exc}", "check free space and permissions beside the database"
        ) from exc
    finally:
        remove(staging)
    for path in {given, db_path}:  # the vector index beside the link or the file: either is stale now
        shutil.rmtree(path.with_name(path.name + ".vectors"), ignore_errors=True)
    return RestoreReport(db_path, source, digest, size, version, sources, replaced, verified, forgotten)


def _occupied(db_path: Path, valid: str) -> StoreError:
    """The refusal to replace the file at the database path without --force, naming what it holds:
    another application's database is no memory to be told "already exists" about."""
    try:
        conn = connect_read_only(db_path)
        try:
            refuse_foreign(conn, db_path)
        finally:
            conn.close()
    except StoreError as foreign:
        return StoreError(
            f"{foreign.message}; {valid}",
            "point CMRAG_DB_PATH (or --db-path) at a new file for the memory; "
            "--force replaces it (it is kept in backups/)",
        )
    except sqlite3.Error:
        pass  # unreadable: what it is stays unknown, the refusal below holds all the same
    return StoreError(
        f"a memory database already exists at {db_path} ({valid})",
        "pass --force to replace it; the replaced database is kept in backups/",
    )


def _forgotten_since(current: Path, restored: sqlite3.Connection) -> list[str]:
    """The uris the replaced database had forgotten (its last record of them a forget) that the
    backup still holds: restoring brings their text back, which a user who forgot them must hear."""
    try:
        conn = sqlite3.connect(f"file:{current}?mode=ro", uri=True)
        try:
            gone = [
                uri
                for (uri,) in conn.execute(
                    "SELECT target FROM change_log c WHERE kind = 'source' AND op = 'forget'"
                    " AND seq = (SELECT MAX(seq) FROM change_log WHERE kind = 'source' AND target = c.target)"
                )
            ]
        finally:
            conn.close()
    except sqlite3.Error:  # no change log (an old or damaged database): nothing to compare
        return []
    held = {uri for (uri,) in restored.execute("SELECT uri FROM sources")}
    return sorted(uri for uri in gone if uri in held)


def _highest_ids(current: Path) -> dict[str, int]:
    """The highest source and chunk ids the replaced database handed out (its rows' and its marks');
    empty when it cannot be read (damaged, or not a memory): there is nothing to keep then."""
    try:
        conn = sqlite3.connect(f"file:{current}?mode=ro", uri=True)
        try:
            return highest_ids(conn)
        finally:
            conn.close()
    except (sqlite3.Error, TypeError, ValueError):
        return {}


def _unverified(source: Path, verified: dict) -> StoreError:
    problems = [Problem(**problem) for problem in verified["problems"]]
    shown = problems[0].describe() if problems else "see `mem verify`"
    if any(problem.problem == "chain_broken" for problem in problems):
        # `mem verify --accept` refuses a rewritten log: pointing at it after the restore led nowhere
        hint = f"{what_works(problems)}; `--unverified` restores this one anyway, and `mem verify` keeps reporting it"
    else:
        hint = (
            "it may be damaged or altered; a backup made with CMRAG_VERSIONING=off is restored with "
            f"`--unverified`, then: {what_works(problems)}"
        )
    return StoreError(
        f"{source}: its change log does not match its rows ({counted(len(problems), 'problem')}, e.g. {shown}); "
        "nothing was restored",
        hint,
    )


def unverified_note(verified: dict) -> str:
    """What `mem restore --unverified` says after restoring a backup whose log does not match its rows."""
    problems = [Problem(**problem) for problem in verified["problems"]]
    return (
        f"its change log does not match its rows ({counted(len(problems), 'problem')}; `mem verify` lists them): "
        f"{what_works(problems)}"
    )


def _require_backup_file(source: Path, db_path: Path) -> None:
    if not source.is_file():
        raise StoreError(f"no backup file at {source}", "pass a file written by `mem backup` (see backups/)")
    if db_path.exists() and source.resolve() == db_path.resolve():
        raise StoreError(f"{source} is the active database itself", "pass a backup file")
    if Path(f"{source}-wal").exists():
        remove_idle_side_files(source)  # an empty WAL a reader left behind, that no process has open
    if Path(f"{source}-wal").exists():
        # Only the main file would be copied: commits in its WAL would be lost, a checkpoint could tear it.
        raise StoreError(
            f"{source} has a write-ahead log beside it ({source}-wal): it is in use or was not closed cleanly",
            f"make a consistent copy with `mem backup --db-path {source}` and restore that",
        )


def _copy_and_hash(source: Path, target: Path) -> tuple[str, int]:
    """Copy a file, hashing what was copied (so the checksum covers exactly the bytes that get verified)."""
    digest, size = hashlib.sha256(), 0
    with source.open("rb") as reader, target.open("wb") as writer:
        for block in blocks(reader):
            digest.update(block)
            writer.write(block)
            size += len(block)
    return digest.hexdigest(), size


def _verify_copy(staging: Path, source: Path) -> tuple[int, int]:
    """Integrity, memory schema and version of the copied backup; returns (schema version, sources)."""
    try:
        conn = sqlite3.connect(staging, isolation_level=None)
        try:
            # A raw copy of a WAL-mode file would make its own -wal beside the staging file; keep it standalone.
            conn.execute("PRAGMA journal_mode = DELETE")
            check_integrity(conn, source)
            version = schema_version(conn, source)
            sources = conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{source} is not a readable SQLite database: {exc}", "use another backup") from exc
    if not 1 <= version <= LATEST_VERSION:
        newer = version > LATEST_VERSION
        raise StoreError(
            f"{source} has schema version {version}; this program understands 1 to {LATEST_VERSION}",
            UPGRADE_HINT if newer else "use another backup",
        )
    return version, sources


def _swap_in(staging: Path, db_path: Path) -> Path | None:
    """Replace the database by the staged file in one rename; returns where the old one was kept."""
    kept = None
    if db_path.exists():
        healthy = _release_old(db_path)
        kept = _keep_old(db_path, healthy)
    for suffix in SIDECARS:  # only stale ones remain: a checkpointed or damaged database's, or orphans
        unlink(Path(f"{db_path}{suffix}"))
    os.replace(staging, db_path)
    sync_dir(db_path.parent)
    return kept


def _release_old(db_path: Path) -> bool:
    """Checkpoint the old database's WAL into it and leave rollback mode on; False if it is damaged.

    Leaving WAL mode needs the only connection to the file, so this doubles as the "nobody else has it
    open" check. Raises StoreError if another process uses the database.
    """
    try:
        conn = sqlite3.connect(db_path, timeout=IN_USE_TIMEOUT, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = DELETE")
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            raise StoreError(
                f"{db_path} is in use by another process",
                "stop other mem processes (web console, MCP server, a running ingest or sync) and retry",
            ) from exc
        return False
    return True


def _keep_old(db_path: Path, healthy: bool) -> Path:
    """Keep the replaced database in backups/ (a hard link when possible: no copy, same bytes)."""
    folder = backups_dir(db_path)
    folder.mkdir(parents=True, exist_ok=True)
    kept = free_name(folder, f"replaced-{time.strftime('%Y%m%d-%H%M%S')}-{db_path.stem}", db_path.suffix)
    try:
        os.link(db_path, kept)
    except OSError:
        shutil.copy2(db_path, kept)
    if not healthy and Path(f"{db_path}-wal").exists():
        # A damaged database's WAL may hold its last commits: it goes with the kept copy, not away.
        os.replace(f"{db_path}-wal", f"{kept}-wal")
    return kept
