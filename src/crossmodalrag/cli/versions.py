"""Versioning commands (issue 14): `mem log`, `history`, `checkpoint`, `rollback`, `diff`, `verify`."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossmodalrag.cli.arguments import positive
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.ingest import embed_new_chunks
from crossmodalrag.cli.render import print_json
from crossmodalrag.errors import StoreError
from crossmodalrag.store.connection import DAMAGED_HINT, damage
from crossmodalrag.wording import counted


def register(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser
) -> None:
    """Add this module's commands to `mem`'s parser."""
    p = sub.add_parser("log", parents=[common, as_json], help="the change log, newest first")
    p.add_argument("--limit", type=positive, default=50, help="how many records (default 50)")
    p.add_argument("--source", metavar="SOURCE", help="only this source's records (its uri, path or id)")
    p.set_defaults(run=show_log)

    p = sub.add_parser("history", parents=[common, as_json], help="one source's recorded versions")
    p.add_argument("source", metavar="SOURCE_URI_OR_ID", help="a stored uri or path, or a source id")
    p.set_defaults(run=show_history)

    p = sub.add_parser("checkpoint", parents=[common, as_json], help="name the current state as a restore point")
    p.add_argument("name", help="the checkpoint's name, for `mem rollback NAME` and `mem diff NAME`")
    p.set_defaults(run=make_checkpoint)

    p = sub.add_parser("rollback", parents=[common, as_json], help="restore a checkpoint's state as new versions")
    p.add_argument("point", metavar="CHECKPOINT_OR_SEQ_OR_TIME", help="a checkpoint, seq or time to go back to")
    p.add_argument("--dry-run", action="store_true", help="only say what would change")
    p.set_defaults(run=do_rollback)

    p = sub.add_parser("diff", parents=[common, as_json], help="sources added, removed and changed between points")
    p.add_argument("since", metavar="FROM", help="a checkpoint, seq or time")
    p.add_argument("until", metavar="TO", nargs="?", default="now", help="a checkpoint, seq, time or now (default)")
    p.set_defaults(run=show_diff)

    p = sub.add_parser("verify", parents=[common, as_json], help="check the change log's chain and the live rows")
    p.add_argument(
        "--accept", action="store_true", help="record rows changed outside mem as new versions (after a check)"
    )
    p.set_defaults(run=run_verify)


def show_log(args: argparse.Namespace) -> int:
    from crossmodalrag.versioning.history import recent_changes

    with _open(_settings(args), create=False) as store:
        changes = recent_changes(store.conn, args.limit, args.source)
    if args.json:
        print_json({"changes": [c.to_dict() for c in changes]})
    elif not changes:
        notice(f"no changes logged for {args.source}" if args.source else "no changes logged yet")
    for change in changes if not args.json else []:
        row = change.to_dict()
        reason = f"  ({change.reason})" if change.reason else ""
        print(f"{change.seq:>7}  {row['at']}  {change.op:<10} {change.actor:<10} {change.target}{reason}")
    return 0


def show_history(args: argparse.Namespace) -> int:
    from crossmodalrag.versioning.history import source_history

    with _open(_settings(args), create=False) as store:
        changes = source_history(store.conn, args.source)
    if args.json:
        print_json({"source": changes[0].target, "versions": [c.to_dict() for c in changes]})
        return 0
    print(changes[0].target)
    for change in changes:
        row = change.to_dict()
        digest = (change.content_hash or "-")[:12]
        path = f"(at {change.target})" if change.target != changes[0].target else ""  # before a move
        notes = "  ".join(part for part in (change.reason, path) if part)
        print(f"{change.seq:>7}  {row['at']}  {change.op:<8} {change.actor:<10} {digest}  {notes}".rstrip())
    return 0


def make_checkpoint(args: argparse.Namespace) -> int:
    from crossmodalrag.versioning.history import checkpoint

    with _open(_settings(args), create=False) as store:
        seq = checkpoint(store, args.name)
    if args.json:
        print_json({"name": args.name, "seq": seq})
    else:
        notice(f"checkpoint {args.name} at seq {seq}")
    return 0


def do_rollback(args: argparse.Namespace) -> int:
    from crossmodalrag.memory.anchors import EventsBack, give_events_back
    from crossmodalrag.versioning.history import rollback

    settings = _settings(args)
    with _open(settings, create=False) as store:
        plan = rollback(store, args.point, args.dry_run)
        # Restored chunks are new rows: embed them as an ingest would, when a model is at hand.
        embedded = embed_new_chunks(store, settings) if plan.restore and not plan.dry_run else None
        fileless = [] if plan.dry_run else _restored_without_file(store, plan.restore)
        events = EventsBack(0, [])
        if not plan.dry_run:
            _relink_restored_memories(store, settings, plan.restore)
            events = give_events_back(store, [target for kind, target in plan.restore if kind == "source"])
    if args.json:
        print_json(
            {
                **plan.to_dict(),
                "embedded": embedded.chunks if embedded else 0,
                "events_given_back": events.sources,
                "without_events": events.without,
            }
        )
        return 0
    verb = "would" if plan.dry_run else "did"
    for kind, target in plan.restore:
        print(f"restore  {kind} {target}")
    for kind, target in plan.remove:
        print(f"remove   {kind} {target}")
    notice(f"rollback to {args.point} (seq {plan.seq}) {verb} restore {len(plan.restore)}, remove {len(plan.remove)}")
    if plan.restore and not plan.dry_run and embedded is None:
        notice(
            "restored text is searchable by its words now; `mem reindex-embeddings` embeds it once a model is installed"
        )
    if plan.skipped_forgotten:
        notice(_forgotten_notice([target for _, target in plan.skipped_forgotten], plan.dry_run))
    if plan.rebuild:
        notice(f"{', '.join(plan.rebuild)} rows are derived, not rolled back: run `mem build-memory` to re-derive them")
    if events.sources:
        notice(f"{counted(events.sources, 'restored source')} got {_its(events.sources)} events back")
    if events.without:
        notice(
            f"{counted(len(events.without), 'restored source')} {_has(len(events.without))} no events:"
            " `mem build-memory` draws them"
        )
    if _from_files(plan.restore + plan.remove) and not plan.dry_run:
        notice(
            "the files on disk are as they were: the next `mem sync` or ingest of their folders reads them again "
            "and undoes this (leave those folders out, or change the files)"
        )
    if fileless:
        notice(_files_gone_notice(fileless))
    return 0


def _forgotten_notice(targets: list[str], dry_run: bool) -> str:
    shown = ", ".join(targets[:3]) + (", …" if len(targets) > 3 else "")
    return (
        f"note: {counted(len(targets), 'source')} held then, forgotten since, {'would be ' if dry_run else ''}left out"
        f" ({shown}): forgotten text never comes back"
    )


def _its(count: int) -> str:
    return "its" if count == 1 else "their"


def _has(count: int) -> str:
    return "has" if count == 1 else "have"


def _from_files(keys: list[tuple[str, str]]) -> bool:
    """Did the rollback change a source an ingest or sync reads again (not an agent's memory)?"""
    return any(kind == "source" and not target.startswith("memory:") for kind, target in keys)


def _relink_restored_memories(store, settings, restored: list[tuple[str, str]]) -> None:
    """Links and supersession marks are derived, not versioned: the restored agent memories get theirs
    again by the store's rule, with the model a store compares by (after embedding, so the vectors are there)."""
    uris = [target for kind, target in restored if kind == "source" and target.startswith("memory:")]
    if not uris:
        return
    from crossmodalrag.agent.memories import load_memory_embedder
    from crossmodalrag.agent.relink import relink_restored

    relink_restored(store, uris, load_memory_embedder(settings)[0])


def _files_gone_notice(paths: list[str]) -> str:
    shown = ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")
    if len(paths) == 1:
        return (
            f"the file of 1 restored source is gone ({shown}): the next `mem sync` or ingest of its folder removes it "
            "again; put the file back to keep it"
        )
    return (
        f"the files of {len(paths):,} restored sources are gone ({shown}): the next `mem sync` or ingest of their "
        "folders removes them again; put the files back to keep them"
    )


# Sources read each from one file of their own: with the file gone, a sync of its folder removes them.
FILE_SOURCE_TYPES = ("note", "pdf", "image")


def _restored_without_file(store, restored: list[tuple[str, str]]) -> list[str]:
    """The paths of restored file sources whose file is no longer on disk."""
    missing = [target for kind, target in restored if kind == "source" and not Path(target).exists()]
    return [
        uri
        for uri in missing
        if (row := store.conn.execute("SELECT source_type FROM sources WHERE uri = ?", (uri,)).fetchone())
        and row[0] in FILE_SOURCE_TYPES
    ]


def show_diff(args: argparse.Namespace) -> int:
    from crossmodalrag.versioning.history import diff

    with _open(_settings(args), create=False) as store:
        result = diff(store.conn, args.since, args.until)
    if args.json:
        print_json(result.to_dict())
        return 0
    for sign, keys in (("+", result.added), ("-", result.removed), ("~", result.changed)):
        for kind, target in keys:
            print(f"{sign} {kind} {target}")
    notice(
        f"seq {result.since} -> {result.until}: {len(result.added)} added, {len(result.removed)} removed, "
        f"{len(result.changed)} changed"
    )
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from crossmodalrag.versioning.verify import accept, verify, what_works

    with _open(_settings(args), create=False) as store:
        # Rows on broken pages cannot be checked, so nothing would be proven. (Here, not in verify():
        # restore has already run SQLite's integrity check on the copy it verifies.)
        if problem := damage(store.conn):
            raise StoreError(f"the database file is damaged: {problem}", DAMAGED_HINT)
        if args.accept:
            accepted = accept(store)
            notice(f"accepted {accepted.recorded} change(s) made outside mem as new versions")
            if accepted.refusal():
                notice(f"note: {accepted.refusal()}")
        report = verify(store.conn)
    if args.json:
        print_json(report.to_dict())
    else:
        if not report.versioning:
            notice("versioning is off (CMRAG_VERSIONING=off): changes since then are not recorded")
        for problem in report.problems:
            print(f"MISMATCH {problem.describe()}")
        state = "ok" if report.ok else counted(len(report.problems), "problem")
        print(f"{state}: {report.records} records, {report.rows_checked} rows checked in {report.seconds:.2f} s")
        print(f"chain head: seq {report.head_seq} {report.head_hash}")
        if not report.ok:
            notice(f"hint: {what_works(report.problems, live=True)}")
    return 0 if report.ok else 1
