"""`mem forget`: remove sources for good, after asking (or with --yes); `--vacuum` wipes the freed bytes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crossmodalrag.cli.progress import StageLine
from crossmodalrag.cli.render import print_json
from crossmodalrag.config import load_settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import open_configured_store

SHOWN_IN_PROMPT = 10
# How each kind of source still on disk comes back, and so which note says what takes it out of reach
# (a kind not named: a note's, read by its path).
COMES_BACK_AS = {"conversation": "chat", "pdf": "whole file", "image": "whole file", "commit": "commit"}


def forget(args: argparse.Namespace) -> int:
    if args.uri is None and args.path is None and not args.vacuum:
        sys.stderr.write(  # a usage error, in the one-line shape the parser gives the others
            "error: name a SOURCE_URI or --path PATH (hint: or pass only --vacuum to wipe freed space;"
            " see `mem forget --help`)\n"
        )
        return 2
    settings = load_settings({"db_path": args.db_path})
    stage = StageLine("forget")
    with open_configured_store(settings, create=False) as store:
        try:
            report = _forget_or_wipe(args, store, stage)
        finally:
            stage.finish()  # what follows, an error too, starts at the margin
    _render(args, report)
    return 0


def _forget_or_wipe(args: argparse.Namespace, store, stage: StageLine):
    from crossmodalrag.forget import (
        WIPING_FREE_SPACE,
        ForgetReport,
        find_sources,
        forget_sources,
        still_in_memory,
        wipe_free_space,
    )

    if args.uri is None and args.path is None:
        stage(WIPING_FREE_SPACE)
        wipe_free_space(store)
        return ForgetReport(vacuumed=True)
    sources = find_sources(store, uri=args.uri) if args.uri is not None else _under(store, args.path)
    if not args.yes:
        _confirm(sources)
    stage("looking for copies of the text still in memory")
    copies = still_in_memory(store, sources)
    report = forget_sources(store, sources, vacuum=args.vacuum, stage=stage)
    report.live_copies = copies
    return report


def _under(store, paths: list[Path]):
    """The sources read from any of the paths; each must match something (else nothing is forgotten)."""
    from crossmodalrag.forget import find_sources

    found = {source.uri: source for path in paths for source in find_sources(store, path=path)}
    return sorted(found.values(), key=lambda source: source.uri)


def _confirm(sources) -> None:
    """Ask on the terminal. Raises CMRAGError when declined or when there is no terminal to ask on."""
    named = [source for source in sources if source.earlier_path_of is None]
    what = f"{_count(len(named), 'source')} ({_count(sum(s.chunks for s in sources), 'chunk')})"
    uris = [_labelled(source) for source in sources]
    if not sys.stdin.isatty():
        raise CMRAGError(f"not forgetting {what} without confirmation", "stdin is not a terminal: pass --yes")
    for uri in uris[:SHOWN_IN_PROMPT]:
        sys.stderr.write(f"  {uri}\n")
    if len(uris) > SHOWN_IN_PROMPT:
        sys.stderr.write(f"  … and {len(uris) - SHOWN_IN_PROMPT} more\n")
    sys.stderr.write(f"forget {what} and everything derived from them? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CMRAGError("nothing was forgotten", "answer y to confirm, or pass --yes")


def _labelled(source) -> str:
    if source.earlier_path_of is not None:
        return f"{source.uri} (earlier path of {source.earlier_path_of})"
    if source.sub_agent_of is not None:
        return f"{source.uri} (sub-agent of {source.sub_agent_of})"
    return source.uri


def _render(args: argparse.Namespace, report) -> None:
    if args.json:
        print_json(report.to_dict())
    else:
        for source in report.sources:
            print(source.uri)
    note = sys.stderr.write
    if report.sources:
        wiped = "; freed space wiped from the database files" if report.vacuumed else ""
        counts = f"{_count(report.chunks, 'chunk')}, {_count(report.vectors, 'vector')}"
        if report.memory_nodes:
            counts += f", {_count(report.memory_nodes, 'memory node')}"
        note(f"forgot {_count(len(report.named), 'source')} ({counts}){wiped}\n")
    elif report.vacuumed:
        note("freed space wiped from the database files\n")
    if report.sub_agents:
        sessions = sorted({source.sub_agent_of for source in report.sub_agents})
        note(
            f"including {_count(len(report.sub_agents), 'sub-agent session')} of {_shown(sessions)}"
            " (part of that session: its sub-agents' transcripts)\n"
        )
    if report.earlier_paths:
        note(_earlier_paths_line(report.earlier_paths, {s.uri for s in report.named if s.id is not None}))
    if report.live_copies:
        note(
            f"note: the same text is still in memory at {_shown(report.live_copies)} (a copy, or the note "
            "moved there since): forget that too to erase it\n"
        )
    elif report.sources and report.bytes_may_remain:
        # only the tables' owner may rewrite them on PostgreSQL: a client is told who runs what, not --vacuum
        wipe = (
            f"only the tables' owner may wipe them: ask the database owner to run `{report.vacuum_by_owner}`"
            " (docs/scaling.md)"
            if report.vacuum_by_owner
            else "run `mem forget --vacuum` to wipe them"
        )
        note(
            "note: the text is no longer searchable, but copies of its bytes may remain in the database files"
            f" ({_where_bytes_remain(args)}); {wipe}\n"
        )
    if report.stranded_events:
        them, they_are = ("it", "it is") if report.stranded_events == 1 else ("them", "they are")
        note(
            f"note: {_count(report.stranded_events, 'remaining memory event')} shared an episode or concept with "
            f"the forgotten text, which went with it; run `mem build-memory` to re-derive {them} (until then "
            f"{they_are} in no timeline)\n"
        )
    _say_still_on_disk(report, note)
    if report.sources:
        _say_chat_history(args, note)
    if report.backups:
        note(
            f"note: {_count(len(report.backups), 'backup')} in {_shown(_folders(report.backups))} made before now may "
            "still hold it; delete them if it must be gone everywhere\n"
        )
    if report.unfinished_copies:
        note(
            f"note: a backup or restore running now is writing a copy of the database that may still hold it "
            f"({', '.join(report.unfinished_copies)}); delete it once that finishes, or the backup it becomes\n"
        )
    if report.eval_queries:
        note(
            f"note: {_count(report.eval_queries, 'eval query')} {'names' if report.eval_queries == 1 else 'name'} "
            "a forgotten source as expected evidence; "
            "your labels are kept (`mem eval` warns about them)\n"
        )


def _say_chat_history(args: argparse.Namespace, note) -> None:
    """`mem chat` keeps the questions typed on a terminal in a file of its own, which forget leaves."""
    from crossmodalrag.cli.chat import history_path

    path = history_path(load_settings({"db_path": args.db_path}))
    if path.is_file() and path.stat().st_size:
        note(
            f"note: the questions typed in `mem chat` are kept in {path}, which forget leaves as it is; "
            "delete it (or the lines about this) if they name what you forgot\n"
        )


def _where_bytes_remain(args: argparse.Namespace) -> str:
    if load_settings({"db_path": args.db_path}).db_url:
        return "PostgreSQL keeps deleted rows until VACUUM (FULL)"
    return "another mem process keeps the write-ahead log in use, which holds its pages as they were"


def _say_still_on_disk(report, note) -> None:
    """What the next ingest or sync reads again, with what takes each kind out of its reach."""
    from crossmodalrag.file_moves import stored_path

    kinds = {stored_path(s.uri, s.source_type): s.source_type for s in report.sources}
    on_disk: dict[str, list[str]] = {}
    for path in report.still_on_disk:
        on_disk.setdefault(COMES_BACK_AS.get(kinds.get(path, ""), "text"), []).append(path)
    if texts := on_disk.get("text"):
        note(
            f"note: still on disk, so the next ingest or sync reads it again: {_shown(texts)}; delete or --exclude it, "
            "or wrap what must never be stored in <private>…</private>\n"
        )
    if chats := on_disk.get("chat"):  # ingest-chat takes no --exclude; a session file may hold other sessions
        note(
            f"note: still on disk, so the next ingest-chat or sync of its folder reads it again: {_shown(chats)}; "
            "delete it or move it out of that folder (any other session stored from it stays in memory), "
            "or wrap what must never be stored in <private>…</private>\n"
        )
    # ingest-pdf and ingest-images take no --exclude, and a PDF holds no <private>
    if files := on_disk.get("whole file"):
        note(
            f"note: still on disk, so the next ingest or sync of its folder reads it again: {_shown(files)}; "
            "delete it or move it out of that folder\n"
        )
    if repositories := on_disk.get("commit"):  # neither deleting a file nor <private> takes a commit out
        note(
            f"note: the commits are still in the history of {_shown(sorted(repositories))},"
            " so the next ingest-git or sync of it stores them again (unless they are older than the newest"
            " git_max_commits, or git_exclude excludes every file they change): rewrite that history so no branch"
            " or tag reaches them (they then leave the repository too), or take the repository out of the connectors\n"
        )


def _folders(paths: list[str]) -> list[str]:
    return [str(folder) for folder in dict.fromkeys(Path(path).parent for path in paths)]


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")


def _earlier_paths_line(earlier: list, live: set[str]) -> str:
    """ "(now X)" where X is the note in memory; forgetting a path it left, the path's lineage is no "now"."""
    shown = ", ".join(
        f"{s.uri} ({'now' if s.earlier_path_of in live else 'the same note as'} {s.earlier_path_of})"
        for s in earlier[:3]
    )
    more = f" and {len(earlier) - 3} more" if len(earlier) > 3 else ""
    return f"also erased the versions kept under {_count(len(earlier), 'earlier path')}: {shown}{more}\n"


def _count(number: int, noun: str) -> str:
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{number} {noun if number == 1 else plural}"
