"""`mem backup` / `mem restore` on PostgreSQL: pg_dump's custom format when its tools are on PATH,
else a logical export (the memory copied into a SQLite file, as `mem migrate` copies it).

A pg_dump archive restores with `pg_restore --clean --if-exists --single-transaction`: the database
is replaced whole or left as it was. Run as a role under row-level security (every role but a
superuser or one with BYPASSRLS: it is forced on the tables' owner too), pg_dump dumps only the rows
that role may see (`--enable-row-security`), and the report says whose; the whole shared memory is a
DBA's backup. An export holds the caller's rows too, restores into an empty
database (the rows then belong to the restoring role), and is also a working SQLite memory by itself.
Both get a `.sha256` beside them, checked before anything is restored.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from crossmodalrag.config import Settings
from crossmodalrag.errors import StoreError
from crossmodalrag.store.backup import BackupReport, backups_dir, names_a_folder
from crossmodalrag.store.backup_places import remember_backup
from crossmodalrag.store.connection import open_store
from crossmodalrag.store.copies import (
    check_checksum,
    free_name,
    make_folder,
    remove,
    staging_file,
    sync_and_hash,
    write_checksum,
)
from crossmodalrag.store.id_marks import highest_ids, raise_marks
from crossmodalrag.store.postgres import PgStore, open_postgres_store
from crossmodalrag.versioning.verify import verify

ARCHIVE_MAGIC = b"PGDMP"  # the first bytes of a pg_dump custom-format archive
TOOL_HINT = "install the PostgreSQL client tools (pg_dump, pg_restore) of the server's major version or newer"


def _open(settings: Settings, create: bool = False) -> PgStore:
    return open_postgres_store(settings.db_url, settings.db_owner, create, settings.db_statement_timeout)


def backup_postgres(settings: Settings, dest: str | Path | None, export: bool = False) -> BackupReport:
    """Write a backup of the configured PostgreSQL memory to `dest` (a file or folder; default
    backups/ beside CMRAG_DB_PATH). `export` (or no pg_dump on PATH): a SQLite export. Raises StoreError."""
    pg_dump = None if export else shutil.which("pg_dump")
    with _open(settings) as store:
        target = _target(settings, dest, ".dump" if pg_dump else ".db")
        if target.parent.resolve() != backups_dir(settings.db_path).resolve():  # forget looks in backups/ anyway
            remember_backup(settings.db_path, target.absolute())
        only_rows_of = _row_security_role(store)
        sources = store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        staging = staging_file(target.parent, target.name)
        try:
            if pg_dump:
                version = store.schema_version()
                seen = ["--enable-row-security"] if only_rows_of else []
                _run([pg_dump, "--format=custom", "--file", str(staging), *seen], settings.db_url)
            else:
                version = _export(store, staging)
            digest, size = sync_and_hash(staging)
            os.replace(staging, target)
            write_checksum(target, digest)
        finally:
            remove(staging)
    return BackupReport(target, digest, size, version, sources, only_rows_of)


def restore_postgres(settings: Settings, source: Path, force: bool = False) -> dict:
    """Make the backup `source` the configured PostgreSQL memory; {source, method, sha256, bytes,
    schema_version, sources, verify}. Raises StoreError (a damaged file, a non-empty database without
    `force`, an export into a non-empty database, a failed pg_restore: the database is then unchanged).
    The id sequences never go back: an id handed out after the backup is not handed out again."""
    source = Path(source).expanduser().absolute()
    if not source.is_file():
        raise StoreError(f"no backup at {source}", "give a file written by `mem backup`")
    digest, size = sync_and_hash(source)
    check_checksum(source, digest)
    with source.open("rb") as handle:
        archive = handle.read(len(ARCHIVE_MAGIC)) == ARCHIVE_MAGIC
    with _open(settings, create=True) as store:
        held = store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        if held and (not force or not archive):
            raise StoreError(
                f"{store.location} already holds a memory ({held} sources)",
                "pass --force to replace it with a pg_dump archive"
                if archive
                else "restore an export into an empty database",
            )
        if not archive:
            _import(source, store)
        # pg_restore sets the sequences back to the backup's: ids given since would be given again
        handed_out = highest_ids(store.conn)
    if archive:
        pg_restore = shutil.which("pg_restore") or _missing("pg_restore")
        _run(
            [
                pg_restore,
                "--clean",
                "--if-exists",
                "--no-owner",
                "--single-transaction",
                str(source),
            ],
            settings.db_url,
        )
    with _open(settings) as store:
        with store.transaction() as conn:
            raise_marks(conn, handed_out)
        sources = store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        version = store.schema_version()
        verified = verify(store.conn).to_dict()  # the owner's change log came along: prove it still matches
    method = "pg_restore" if archive else "import"
    return {"source": str(source), "target": store.location, "method": method, "sha256": digest,
            "bytes": size, "schema_version": version, "sources": sources, "verify": verified}  # fmt: skip


def _target(settings: Settings, dest: str | Path | None, suffix: str) -> Path:
    chosen = backups_dir(settings.db_path) if dest is None else Path(dest).expanduser()
    if names_a_folder(dest, chosen):
        make_folder(chosen)
        return free_name(chosen, f"memory-postgresql-{time.strftime('%Y%m%d-%H%M%S')}", suffix)
    if chosen.exists():
        raise StoreError(f"{chosen} already exists", "choose another name, or a folder to put a new backup in")
    make_folder(chosen.parent)
    return chosen


def _row_security_role(store: PgStore) -> str | None:
    """The role whose rows alone a backup holds, or None when it holds every owner's (a superuser or a
    role with BYPASSRLS). Row-level security is forced on the tables' owner too, and pg_dump refuses
    such tables unless asked to dump what the role sees."""
    role, bypass = store.conn.execute(
        "SELECT current_user, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    return None if bypass else role


def _export(store: PgStore, staging: Path) -> int:
    """Copy the memory into a new SQLite file at `staging`; its schema version (SQLite's numbering,
    which `mem stats` on the file shows, not PostgreSQL's)."""
    from crossmodalrag.store.transfer import copy_memory

    remove(staging)  # copy_memory makes a new SQLite memory there
    with open_store(staging) as target:
        report = copy_memory(store, target)
        version = target.schema_version()
    if not report.identical:
        raise StoreError("the export does not match the memory (checksums differ)", "run the backup again")
    return version


def _import(source: Path, store: PgStore) -> None:
    from crossmodalrag.store.transfer import copy_memory

    with open_store(source, create=False) as exported:
        report = copy_memory(exported, store)
    if not report.identical:
        raise StoreError(f"{source} was not restored whole (checksums differ)", "restore into an empty database again")


def _run(command: list[str], url: str) -> None:
    """Run a client tool on the database at `url`; its password goes in the environment (PGPASSWORD),
    not on the command line, where other users of the machine could read it."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    env = dict(os.environ)
    if parts.password:
        env["PGPASSWORD"] = unquote(parts.password)
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", "@"))
    done = subprocess.run([*command, "--dbname", urlunsplit(parts)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise _tool_failure(Path(command[0]).name, (done.stderr or done.stdout).strip().splitlines() or ["no output"])


def _tool_failure(tool: str, lines: list[str]) -> StoreError:
    """One line: the tool's first, then the server's own ERROR when the tool only reported that a query
    failed ("PQgetResult() failed"), which alone tells nobody why."""
    # An older client refuses a newer server: the tools, not the server, need fixing.
    mismatch = "version mismatch" in lines[0] or "unsupported version" in lines[0]
    hint = f"{TOOL_HINT}, or `mem backup --export` (a SQLite file)" if mismatch else "see the server log"
    said = next((line.split("ERROR:", 1)[1].strip() for line in lines if "ERROR:" in line), "")
    reason = lines[0] if not said or said in lines[0] else f"{lines[0].rstrip('.')}: the server said: {said}"
    return StoreError(f"{tool} failed: {reason}", f"{hint}; nothing was replaced")


def _missing(tool: str) -> str:
    raise StoreError(f"{tool} is not on PATH", TOOL_HINT)
