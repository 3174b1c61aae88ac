"""Backups and restores of the memory database: one self-contained file plus a `sha256sum` checksum.

A backup is taken with SQLite's online backup API: a consistent snapshot even while other processes
read and write (WAL), converted to a rollback-journal file so that it needs no `-wal` beside it.

A restore never leaves a half-restored database: the backup is copied into a temporary file beside the
database, verified there (checksum, integrity check, schema), synced, and renamed over the database in
one step. The old database must not be in use; its WAL is checkpointed first, because a WAL left beside
the new file would be replayed into it and corrupt it. The replaced file is kept in `backups/`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.errors import UPGRADE_HINT, StoreError
from crossmodalrag.store.backup_places import remember_backup
from crossmodalrag.store.connection import BUSY_TIMEOUT_SECONDS, is_busy, open_store, refuse_folder
from crossmodalrag.store.failures import explain
from crossmodalrag.store.migrations import LATEST_VERSION
from crossmodalrag.store.readonly import remove_idle_side_files
from crossmodalrag.versioning.verify import Problem, verify, what_works
from crossmodalrag.wording import counted

SIDECARS = ("-wal", "-shm", "-journal")  # SQLite files that belong to one database file, by name
IN_USE_TIMEOUT = 2.0  # how long a restore waits for other connections to let go of the old database


@dataclass
class BackupReport:
    """Where a backup went, and what proves it is intact."""

    path: Path
    sha256: str
    bytes: int
    schema_version: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "bytes": self.bytes,
            "schema_version": self.schema_version,
        }


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


def backups_dir(db_path: Path) -> Path:
    return Path(db_path).parent / "backups"


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


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
    staging = _staging_file(target.parent, target.name)
    try:
        source = sqlite3.connect(db_path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            version = _schema_version(source, db_path)
            copy = sqlite3.connect(staging, isolation_level=None)
            try:
                source.backup(copy)  # one step: a single read snapshot, never blocks the writer (WAL)
                # The copy keeps the WAL flag: closed, it is one file all the same, and a mem command reading
                # it (`mem verify` on a backup) leaves it byte for byte as it is. In rollback mode every
                # open switched it back to WAL, which broke its checksum and so its restore.
                _check_integrity(copy, target)
            finally:
                copy.close()
        finally:
            source.close()
        _copy_mode(db_path, staging)
        digest, size = _sync_and_hash(staging)
        os.replace(staging, target)
        _write_checksum(target, digest)
        _sync_dir(target.parent)
    except sqlite3.DatabaseError as exc:
        raise _sqlite_failure(exc, f"cannot back up {db_path}") from exc
    except OSError as exc:
        raise StoreError(
            f"cannot write the backup {target}: {exc}", "check the folder's free space and permissions"
        ) from exc
    finally:
        _remove(staging)
    return BackupReport(target, digest, size, version)


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
    _make_folder(db_path.parent)
    staging = _staging_file(db_path.parent, db_path.name)
    try:
        digest, size = _copy_and_hash(source, staging)
        _check_checksum(source, digest)
        version, sources = _verify_copy(staging, source)
        if db_path.exists() and not force:
            raise StoreError(
                f"a memory database already exists at {db_path} ({source} is a valid backup: "
                f"schema version {version}, {sources} sources)",
                "pass --force to replace it; the replaced database is kept in backups/",
            )
        with open_store(staging, create=False) as store:  # migrates an older backup, on the copy
            version = store.schema_version()
            verified = verify(store.conn).to_dict()  # the change log came along: prove it still matches
            forgotten = _forgotten_since(db_path, store.conn) if db_path.exists() else []
        if not verified["ok"] and not unverified:
            raise _unverified(source, verified)
        if db_path.exists():
            _copy_mode(db_path, staging)
        _fsync(staging)
        replaced = _swap_in(staging, db_path)
    except OSError as exc:
        raise StoreError(
            f"cannot restore {source}: {exc}", "check free space and permissions beside the database"
        ) from exc
    finally:
        _remove(staging)
    for path in {given, db_path}:  # the vector index beside the link or the file: either is stale now
        shutil.rmtree(path.with_name(path.name + ".vectors"), ignore_errors=True)
    return RestoreReport(db_path, source, digest, size, version, sources, replaced, verified, forgotten)


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
    chosen = backups_dir(db_path) if dest is None else Path(dest).expanduser().absolute()
    if names_a_folder(dest, chosen):
        if chosen.exists() and not chosen.is_dir():
            raise StoreError(f"{chosen} is a file, not a folder", "name a new file, or a folder to put the backup in")
        _make_folder(chosen)
        return _free_name(chosen, f"{db_path.stem}-{time.strftime('%Y%m%d-%H%M%S')}", ".db")
    if side_file := _side_file_named(chosen, db_path):
        # SQLite owns that name: it would delete or overwrite the backup at the next checkpoint or close.
        raise StoreError(f"the backup would be the database's own {side_file} file", "choose another path")
    if chosen.exists():
        raise StoreError(f"{chosen} already exists", "choose another name, or a folder to put a new backup in")
    if chosen.resolve() == db_path.resolve():
        raise StoreError("the backup would overwrite the database itself", "choose another path")
    _make_folder(chosen.parent)
    return chosen


def _side_file_named(path: Path, db_path: Path) -> str | None:
    """The suffix (`-wal`, `-shm`, `-journal`, `-writers`) if `path` is one of the live database's side files."""
    database = str(db_path.resolve())
    return next((s for s in (*SIDECARS, "-writers") if str(path.resolve()) == database + s), None)


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {folder}: {exc}", "choose a folder you can write to") from exc


def _free_name(folder: Path, stem: str, suffix: str) -> Path:
    """`folder/stem.suffix`, or `stem-2.suffix`… when two backups land in the same second."""
    target, n = folder / f"{stem}{suffix}", 1
    while target.exists() or checksum_path(target).exists():
        n += 1
        target = folder / f"{stem}-{n}{suffix}"
    return target


def _staging_file(folder: Path, name: str) -> Path:
    """An empty temporary file in `folder` (same filesystem as the target, so the final rename is atomic),
    named with this process's id. Staging files of a process no longer running (a backup or restore
    killed midway: a database-sized copy, perhaps of forgotten text) are removed first."""
    _remove_abandoned(folder)
    try:
        handle, path = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".partial", dir=folder)
    except OSError as exc:
        raise StoreError(f"cannot write in {folder}: {exc}", "check the folder's permissions and free space") from exc
    os.close(handle)
    return Path(path)


def _remove_abandoned(folder: Path) -> None:
    for path in folder.glob(".*.partial*"):  # the copy and its -journal, -wal or -shm
        pid = _staging_pid(path)
        if pid is not None and not _running(pid):
            _remove(path)


def _staging_pid(path: Path) -> int | None:
    """The process id in a staging file's name (`.NAME.PID.RANDOM.partial`), None if it is not one."""
    pid = path.name.split(".partial")[0].rsplit(".", 2)[-2]
    return int(pid) if pid.isdigit() else None


def unfinished_copies(folder: Path) -> list[Path]:
    """Remove the staging copies a killed backup or restore left in `folder` (whole copies of the
    database, hidden), as the next backup or restore would; return those a running process still
    writes. Safe at any time: a copy is removed only when the process named in it is gone."""
    if not folder.is_dir():
        return []
    _remove_abandoned(folder)
    return sorted(path for path in folder.glob(".*.partial") if _staging_pid(path) is not None)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of a memory database. Raises StoreError if it is not one."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"schema_migrations", "sources", "chunks"} <= tables:
        raise StoreError(f"{path} is not a memory database", "point at a file written by `mem backup`")
    return conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]


def _check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        raise StoreError(f"{path} fails SQLite's integrity check: {problems[0]}", "use another backup")


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
        for block in _blocks(reader):
            digest.update(block)
            writer.write(block)
            size += len(block)
    return digest.hexdigest(), size


def _blocks(handle) -> Iterator[bytes]:
    return iter(lambda: handle.read(1 << 20), b"")


def _check_checksum(source: Path, digest: str) -> None:
    """Compare with `<source>.sha256` when there is one. Raises StoreError on a mismatch or unreadable file."""
    recorded = checksum_path(source)
    if not recorded.exists():
        return
    try:
        expected = recorded.read_text(encoding="utf-8").split()[0].lower()
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        raise StoreError(f"cannot read the checksum file {recorded}", "fix or delete it to restore anyway") from exc
    if expected != digest:
        raise StoreError(
            f"{source} fails its checksum (sha256 {digest[:12]}… instead of {expected[:12]}…)",
            "the file was changed or damaged since the backup; use another backup",
        )


def _verify_copy(staging: Path, source: Path) -> tuple[int, int]:
    """Integrity, memory schema and version of the copied backup; returns (schema version, sources)."""
    try:
        conn = sqlite3.connect(staging, isolation_level=None)
        try:
            # A raw copy of a WAL-mode file would make its own -wal beside the staging file; keep it standalone.
            conn.execute("PRAGMA journal_mode = DELETE")
            _check_integrity(conn, source)
            version = _schema_version(conn, source)
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
        _unlink(Path(f"{db_path}{suffix}"))
    os.replace(staging, db_path)
    _sync_dir(db_path.parent)
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
    kept = _free_name(folder, f"replaced-{time.strftime('%Y%m%d-%H%M%S')}-{db_path.stem}", db_path.suffix)
    try:
        os.link(db_path, kept)
    except OSError:
        shutil.copy2(db_path, kept)
    if not healthy and Path(f"{db_path}-wal").exists():
        # A damaged database's WAL may hold its last commits: it goes with the kept copy, not away.
        os.replace(f"{db_path}-wal", f"{kept}-wal")
    return kept


def _copy_mode(origin: Path, target: Path) -> None:
    """Give the copy the permissions of the database it copies (a memory is private)."""
    os.chmod(target, stat.S_IMODE(origin.stat().st_mode))


def _sync_and_hash(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for block in _blocks(handle):
            digest.update(block)
            size += len(block)
        os.fsync(handle.fileno())
    return digest.hexdigest(), size


def _fsync(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def _write_checksum(target: Path, digest: str) -> None:
    """`<hash>  <name>`, what `sha256sum -c` reads in the backup's folder; written atomically."""
    recorded = checksum_path(target)
    staging = recorded.with_name(f".{recorded.name}.partial")
    staging.write_text(f"{digest}  {target.name}\n", encoding="utf-8")
    os.replace(staging, recorded)


def _sync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where folders cannot be opened, e.g. Windows)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _remove(path: Path) -> None:
    """A staging file and whatever SQLite (or a store opened on it: its writers' lock) left beside it."""
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in (*SIDECARS, "-writers"))):
        _unlink(candidate)


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _sqlite_failure(exc: sqlite3.DatabaseError, what: str) -> StoreError:
    message, hint = explain(exc)
    return StoreError(f"{what}: {message}", hint)
