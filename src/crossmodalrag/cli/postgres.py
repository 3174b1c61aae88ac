"""The CLI's side of the PostgreSQL backend: which commands run there so far, and `mem migrate`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from crossmodalrag.cli.progress import is_live, redraw
from crossmodalrag.cli.render import print_json
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import StoreError
from crossmodalrag.store import Store, open_configured_store, open_store

# Commands whose whole code path runs on PostgreSQL (tests/store/test_postgres*.py, and the tests that
# run on both backends). A command missing here is refused rather than silently run against the
# SQLite file.
HIERARCHY = {"build-memory", "events", "timeline", "concepts", "drift", "forgetting", "recall", "distill", "usage"}
PORTED = HIERARCHY | {
    *("log", "history", "checkpoint", "rollback", "diff", "verify"),  # versioning: PostgreSQL schema 4
    "eval-generation",
    "seed-sample",
    "memory-stats",
    "models",  # touches no memory
    "chat",
    "remember",
    "memories",
    "sync",
    "ingest-chat",
    "backup",
    "restore",
    "serve",
    "mcp",
    "sources",
    "source",
    "stats",
    "init-db",
    "ingest-notes",
    "ingest-git",
    "ingest-pdf",
    "ingest-images",
    "ask",
    "eval",
    "reindex-embeddings",
    "forget",
    "doctor",
    "migrate",
}


UNPORTED_OPTIONS: dict[str, str] = {}  # options of ported commands that do not run there yet (none now)


def refuse_unported(command: str, options: dict | None = None) -> None:
    """Raise StoreError if CMRAG_DB_URL selects PostgreSQL and `command` (or one of its `options`)
    does not run there yet."""
    used = [flag for key, flag in UNPORTED_OPTIONS.items() if (options or {}).get(key)]
    if (command in PORTED and not used) or not _postgres_selected((options or {}).get("db_path")):
        return
    what = f"mem {command} {used[0]}" if command in PORTED else f"mem {command}"
    raise StoreError(
        f"`{what}` does not run on PostgreSQL yet (CMRAG_DB_URL is set)",
        "unset CMRAG_DB_URL to use the SQLite memory; docs/scaling.md lists what PostgreSQL runs so far",
    )


def _postgres_selected(db_path: str | None) -> bool:
    """Whether the command runs on PostgreSQL, as its settings resolve (a --db-path file wins)."""
    return bool(load_settings({"db_path": db_path}).db_url)


def register(sub, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "migrate", parents=[common, as_json], help="copy the memory to PostgreSQL or a SQLite file, with checksums"
    )
    p.add_argument("--to", required=True, metavar="URL|PATH", help="postgresql://... or a new SQLite file")
    p.add_argument("--from", dest="source", metavar="URL|PATH", help="the memory to copy (default: the configured one)")
    p.set_defaults(run=migrate)


def migrate(args: argparse.Namespace) -> int:
    from crossmodalrag.store.postgres import is_postgres_url
    from crossmodalrag.store.transfer import NOT_COPIED, copy_into_new_file, copy_memory

    settings = load_settings({"db_path": args.db_path})
    source = (
        _open(args.source, settings, create=False) if args.source else open_configured_store(settings, create=False)
    )
    target_file = None if is_postgres_url(args.to) else _sqlite_path(args.to)
    new_file = target_file if target_file is not None and not target_file.exists() else None

    drawn, live = False, is_live(sys.stderr)  # a log gets the closing report, not a line per batch

    def progress(done: int, total: int) -> None:
        nonlocal drawn
        if live:
            drawn = True
            redraw(sys.stderr, f"copied {done}/{total} sources")

    try:
        with source:
            if new_file is not None:
                report = copy_into_new_file(source, new_file, progress)
            else:
                with _open(args.to, settings, create=True) as target:
                    report = copy_memory(source, target, progress)
    finally:
        if drawn:
            sys.stderr.write("\n")  # and an error goes on a line of its own
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"{report.source} -> {report.target} in {report.seconds:.1f} s")
        for name, table in report.tables.items():
            same = "identical" if table["source_checksum"] == table["target_checksum"] else "DIFFERENT"
            rows = f"{table['source_rows']} -> {table['target_rows']} rows"
            print(f"  {name}: {rows}, sha256 {table['target_checksum'][:16]} {same}")
        for name, rows in report.left_behind.items():
            print(f"  {name}: {rows} rows not copied ({NOT_COPIED[name]})")
        if not report.ids_kept:
            print("  ids: the target's own (it had handed out ids before): `mem source ID` and mem://source/ID change")
    if not report.identical:
        raise _differs(report, new_file)
    return 0


def _differs(report, new_file: Path | None) -> StoreError:
    """The error of a copy whose checksums differ from the memory's (the tables printed say which)."""
    tables = ", ".join(name for name, t in report.tables.items() if t["source_checksum"] != t["target_checksum"])
    if new_file is not None:
        return StoreError(
            f"the copy differs from the memory in {tables}: {new_file} was not written",
            "run `mem migrate` again; if it differs again, run `mem doctor` on the memory",
        )
    from crossmodalrag.store.postgres import is_postgres_url

    if is_postgres_url(report.target):  # perhaps a team's database: never tell a member to empty it
        hint = "the copied rows stay there, yours alone; to copy again, `mem forget` them first or use a new database"
    else:
        hint = "empty that file (or use a new one) and run `mem migrate` again"
    return StoreError(f"the copy in {report.target} differs from the memory in {tables}", hint)


def _open(location: str, settings: Settings, create: bool) -> Store:
    """A memory named by a postgresql:// url or a SQLite file path."""
    from crossmodalrag.store.postgres import is_postgres_url, open_postgres_store

    if is_postgres_url(location):
        try:
            return open_postgres_store(location, settings.db_owner, create, settings.db_statement_timeout)
        except StoreError as error:
            if not error.message.startswith("cannot reach PostgreSQL"):
                raise
            # The url came from --to/--from, not CMRAG_DB_URL, which the store's own hint names.
            hint = "check that the server in the url given is running and its database exists (createdb NAME)"
            raise StoreError(error.message, hint) from error
    return open_store(_sqlite_path(location), create=create)


def _sqlite_path(location: str) -> Path:
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", location):  # mysql://... became a SQLite file of that name
        raise StoreError(f"{location[:60]!r} is neither a postgresql:// url nor a file", "give one of those")
    return Path(location).expanduser()
