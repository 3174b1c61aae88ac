"""What every `mem` command shares (settings, the store, notices), init-db and doctor; the rest have a module each."""

from __future__ import annotations

import argparse
import sys
import time

from crossmodalrag.cli.progress import ReindexProgress
from crossmodalrag.cli.render import print_json, render_doctor
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import CMRAGError, StoreError
from crossmodalrag.store import Store, open_configured_store
from crossmodalrag.store.connection import DAMAGED_HINT, damage


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings({"db_path": getattr(args, "db_path", None), "match": getattr(args, "match", None)})


def _open(settings: Settings, create: bool = True) -> Store:
    return open_configured_store(settings, create=create, progress=ReindexProgress())


def notice(message: str) -> None:
    sys.stderr.write(message + "\n")


def init_db(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with _open(settings) as store:
        if args.rebuild_index:
            if settings.db_url:
                raise CMRAGError(
                    "on PostgreSQL the text index is a column the server keeps", "a DBA can `REINDEX TABLE chunks`"
                )
            from crossmodalrag.index import fts

            started = time.monotonic()
            with store.transaction() as conn:
                indexed = fts.recreate(conn)
            notice(f"text index rebuilt from the stored chunks: {indexed:,} in {time.monotonic() - started:.1f} s")
        if problem := damage(store.conn):  # a file whose schema reads fine can still have broken pages
            raise StoreError(f"the database at {store.location} is damaged: {problem}", DAMAGED_HINT)
        notice(f"memory database ready at {store.location} (schema version {store.schema_version()})")
    return 0


def doctor(args: argparse.Namespace) -> int:
    from crossmodalrag.cli.progress import StageLine
    from crossmodalrag.doctor import diagnose

    stage = StageLine("doctor")
    try:
        report = diagnose(_settings(args), stage)
    finally:
        stage.finish()
    if args.json:
        print_json(report.to_dict())
    else:
        print(render_doctor(report.to_dict()))
    return 1 if report.problems else 0
