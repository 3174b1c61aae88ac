"""Copies of the database file: staged beside their target under this process's id (removed once the
process is gone), checked (integrity, memory schema), hashed, synced and renamed into place. Backups,
restores, `mem migrate` and PostgreSQL dumps all write their files this way."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from crossmodalrag.errors import StoreError
from crossmodalrag.store.turns import LOCK_FILES

SIDECARS = ("-wal", "-shm", "-journal")  # SQLite files that belong to one database file, by name


def checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {folder}: {exc}", "choose a folder you can write to") from exc


def free_name(folder: Path, stem: str, suffix: str) -> Path:
    """`folder/stem.suffix`, or `stem-2.suffix`… when two backups land in the same second."""
    target, n = folder / f"{stem}{suffix}", 1
    while target.exists() or checksum_path(target).exists():
        n += 1
        target = folder / f"{stem}-{n}{suffix}"
    return target


def staging_file(folder: Path, name: str) -> Path:
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
            remove(path)


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


def schema_version(conn: sqlite3.Connection, path: Path) -> int:
    """The schema version of a memory database. Raises StoreError if it is not one."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not {"schema_migrations", "sources", "chunks"} <= tables:
        raise StoreError(f"{path} is not a memory database", "point at a file written by `mem backup`")
    return conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]


def check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
    if problems != ["ok"]:
        # SQLite's report runs over several lines ("*** in database main ***\nPage 50: …"): one line here
        first = " ".join(problems[0].replace("*** in database main ***", "").split())
        raise StoreError(f"{path} fails SQLite's integrity check: {first}", "use another backup")


def blocks(handle) -> Iterator[bytes]:
    return iter(lambda: handle.read(1 << 20), b"")


def copy_mode(origin: Path, target: Path) -> None:
    """Give the copy the permissions of the database it copies (a memory is private)."""
    os.chmod(target, stat.S_IMODE(origin.stat().st_mode))


def sync_and_hash(path: Path) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        for block in blocks(handle):
            digest.update(block)
            size += len(block)
        os.fsync(handle.fileno())
    return digest.hexdigest(), size


def fsync(path: Path) -> None:
    with path.open("rb") as handle:
        os.fsync(handle.fileno())


def write_checksum(target: Path, digest: str) -> None:
    """`<hash>  <name>`, what `sha256sum -c` reads in the backup's folder; written atomically."""
    recorded = checksum_path(target)
    staging = recorded.with_name(f".{recorded.name}.partial")
    staging.write_text(f"{digest}  {target.name}\n", encoding="utf-8")
    os.replace(staging, recorded)


def check_checksum(source: Path, digest: str) -> None:
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


def sync_dir(folder: Path) -> None:
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


def remove(path: Path) -> None:
    """A staging file and whatever SQLite (or a store opened on it: its writers' lock) left beside it."""
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in (*SIDECARS, *LOCK_FILES))):
        unlink(candidate)


def unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
