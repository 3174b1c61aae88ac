"""`mem backup` and `mem restore`: call the store's backup functions and render their reports."""

from __future__ import annotations

import argparse
import sys

from crossmodalrag.cli.render import print_json
from crossmodalrag.config import load_settings
from crossmodalrag.store.backup import backup_database
from crossmodalrag.store.copies import checksum_path
from crossmodalrag.store.restore import restore_database, unverified_note
from crossmodalrag.wording import counted


def human_size(size: int) -> str:
    value, unit = float(size), "bytes"
    for bigger in ("KB", "MB", "GB", "TB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"


def backup(args: argparse.Namespace) -> int:
    settings = load_settings({"db_path": args.db_path})
    if settings.db_url:  # PostgreSQL: pg_dump, else a logical export
        from crossmodalrag.store.postgres.dump import backup_postgres

        report = backup_postgres(settings, args.dest, export=args.export)
    else:
        report = backup_database(settings.db_path, args.dest)
    if args.json:
        print_json(report.to_dict())
    else:
        sys.stderr.write(
            f"backup written to {report.path} ({human_size(report.bytes)}, schema version {report.schema_version})\n"
        )
        if report.only_rows_of:  # row-level security: the other owners' rows are not in it
            sys.stderr.write(
                f"checksum in {checksum_path(report.path)}\n"
                f"note: this backup holds only the rows {report.only_rows_of} can see: "
                f"{counted(report.sources or 0, 'source')}; `mem restore --force` of it would replace every "
                "owner's rows with these, and pg_restore needs a superuser: restore it into a database of its "
                "own as one. A backup of the whole shared memory is taken by a superuser or a role with "
                "BYPASSRLS (docs/scaling.md)\n"
            )
        else:
            sys.stderr.write(
                f"checksum in {checksum_path(report.path)}; restore with: mem restore {report.path} --force\n"
            )
    return 0


def restore(args: argparse.Namespace) -> int:
    settings = load_settings({"db_path": args.db_path})
    if settings.db_url:
        return _restore_postgres(args, settings)
    report = restore_database(args.source, settings.db_path, force=args.force, unverified=args.unverified)
    if args.json:
        print_json(report.to_dict())
    else:
        sys.stderr.write(
            f"restored {report.source} ({human_size(report.bytes)}, {report.sources} sources, "
            f"schema version {report.schema_version}) into {report.path}\n"
        )
        if report.replaced:
            sys.stderr.write(f"the replaced database is kept at {report.replaced}\n")
    if not report.verified["ok"]:  # restored with --unverified
        sys.stderr.write(f"note: {unverified_note(report.verified)}\n")
    if report.forgotten_since:
        shown = ", ".join(report.forgotten_since[:3]) + (", …" if len(report.forgotten_since) > 3 else "")
        sys.stderr.write(
            f"note: this backup holds {counted(len(report.forgotten_since), 'source')} the replaced memory had "
            f"forgotten ({shown}); their text is back: `mem forget` them again (`mem restore --json` lists them)\n"
        )
    return 0


def _verified(verified: dict | None) -> int:
    """0, or 1 with an error line when the restored memory's change log does not verify."""
    if not (verified or {}).get("ok", True):
        sys.stderr.write(
            f"error: the restored memory does not verify ({counted(len(verified['problems']), 'problem')}; "  # type: ignore[index]
            "hint: run `mem verify` to see them)\n"
        )
        return 1
    return 0


def _restore_postgres(args: argparse.Namespace, settings) -> int:
    from crossmodalrag.store.postgres.dump import restore_postgres

    report = restore_postgres(settings, args.source, force=args.force)
    if args.json:
        print_json(report)
    else:
        sys.stderr.write(
            f"restored {report['source']} ({human_size(report['bytes'])}, {report['sources']} sources, "
            f"schema version {report['schema_version']}) into {report['target']} with {report['method']}\n"
        )
    return _verified(report["verify"])
