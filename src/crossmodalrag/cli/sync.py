"""`mem sync` and `mem sync --watch`: run the sync library, render its reports (stderr) and JSON (stdout)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from crossmodalrag.cli.commands import notice
from crossmodalrag.cli.ingest import embed_new_chunks, embedding_due, note_orphaned_events
from crossmodalrag.cli.progress import ProgressLine
from crossmodalrag.cli.render import print_json
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store, open_configured_store
from crossmodalrag.wording import counted

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport
    from crossmodalrag.sync import ConnectorSync, SyncReport
    from crossmodalrag.watch import Watcher, WatchEvent

# crossmodalrag.sync.CONNECTORS, without importing ingest for --help
CONNECTORS = ("notes", "git", "pdf", "image", "chat")
# The names the [connectors] table spells them with are taken too: `--only chats` was refused.
CONNECTOR_SPELLINGS = {"images": "image", "chats": "chat", "pdfs": "pdf", "note": "notes"}


def connector_name(value: str) -> str:
    return CONNECTOR_SPELLINGS.get(value.lower(), value.lower())


DEBOUNCE_SECONDS = 0.75  # --watch: quiet before a burst of changes is applied


def seconds(text: str) -> float:
    """argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 60 seconds")
    return value


class SyncLines:
    """A live progress line per connector on a TTY; then its errors, notes and summary line."""

    def __init__(self) -> None:
        self.lines: dict[str, ProgressLine] = {}

    def _line(self, connector: str) -> ProgressLine:
        return self.lines.setdefault(connector, ProgressLine(f"sync {connector}"))

    def step(self, connector: str, report: "IngestReport") -> None:
        self._line(connector)(report)

    def done(self, result: "ConnectorSync") -> None:
        line = self._line(result.connector)
        line.clear()  # errors must not land after a half-drawn progress line
        for failure in result.report.failures:
            notice(f"error: {failure}")
        for message in result.report.notices:
            notice(f"note: {message}")
        if not result.skipped:
            line.finish(result.report)


def sync(args: argparse.Namespace) -> int:
    """`mem sync`: one incremental pass over every configured connector (or watch them)."""
    from crossmodalrag.sync import configured_paths

    if args.debounce is not None and not args.watch:
        raise CMRAGError("--debounce applies to --watch only", "add --watch, or leave --debounce out")
    settings = load_settings({"db_path": args.db_path})
    only = tuple(args.only or ())
    configured_paths(settings, only)  # nothing configured: fail before creating a database
    with open_configured_store(settings) as store:
        store.conn.actor = "sync"  # the change log's actor for everything this command (or its watch) writes
        if args.watch:
            return _watch(args, settings, store, only)
        report, embedded = _sync_once(args, settings, store, only, lambda: _embed(store, settings))
    if args.json:
        print_json({**report.to_dict(), "embedded": embedded})
    return 1 if report.failed else 0


def _sync_once(
    args: argparse.Namespace, settings: Settings, store: Store, only: tuple[str, ...], embed: Callable[[], int]
) -> tuple["SyncReport", int]:
    """Sync, print the per-connector lines and a total, embed new chunks; returns (report, embedded)."""
    from crossmodalrag.sync import sync as run_sync

    report = run_sync(store, settings, only, args.max_commits, SyncLines(), args.allow_mass_delete)
    total = report.total
    if len(report.connectors) > 1:
        notice(f"sync: {total.summary()}")
    if total.removed:
        note_orphaned_events(store)
    return report, embed() if embedding_due(store, total.chunks) else 0


def _embed(store: Store, settings: Settings) -> int:
    embedded = embed_new_chunks(store, settings)
    return embedded.chunks if embedded else 0


def _watch(args: argparse.Namespace, settings: Settings, store: Store, only: tuple[str, ...]) -> int:
    """Sync once, then apply changes until Ctrl-C or SIGTERM (both a normal stop: exit 0)."""
    from crossmodalrag.watch import Watcher

    stop = threading.Event()
    lines = WatchLines(store, settings, args.json)
    debounce = DEBOUNCE_SECONDS if args.debounce is None else args.debounce
    with Watcher(store, settings, only, args.max_commits, lines, debounce) as watcher:
        report, embedded = _sync_once(args, settings, store, only, lines.embed)
        lines.shown_by_first_sync(report, watcher)
        if args.json:
            lines.emit({"event": "initial", **report.to_dict(), "embedded": embedded})
        if not watcher.targets:
            raise CMRAGError("nothing to watch: every selected connector was skipped", "install the extras named above")
        roots = ", ".join(f"{target.connector} {target.root}" for target in watcher.targets)
        notice(f"watching {roots} (Ctrl-C to stop)")
        with _stop_on_sigterm(stop):
            try:
                watcher.run(stop)
            except KeyboardInterrupt:
                pass  # Ctrl-C is how a watch is meant to end
            _apply_pending(watcher, store)
    notice("stopped watching; everything applied so far is kept")
    return 0


def _apply_pending(watcher: "Watcher", store: Store) -> None:
    """Apply the changes still waiting out the debounce before stopping; a second Ctrl-C skips them
    and says how many the next sync will pick up (or, landing while their chunks were embedded,
    that the next sync embeds those)."""
    from crossmodalrag.index.embeddings import has_unembedded

    waiting = watcher.pending.count()
    if not waiting:
        return
    notice(f"applying {counted(waiting, 'pending change')} before stopping (Ctrl-C again to skip)")
    try:
        watcher.finish()
    except KeyboardInterrupt:
        if left := watcher.pending.count():
            notice(f"{counted(left, 'change')} not applied; the next `mem sync` picks them up")
        if has_unembedded(store):
            notice("changes stored but not embedded yet; the next `mem sync` (or `mem reindex-embeddings`) embeds them")


class WatchLines:
    """One stderr line per applied change batch (JSON lines on stdout with --json); embeds new chunks.

    A failure or note that persists (a broken file re-read on every sync of its folder) is shown
    once, not on every batch.
    """

    def __init__(self, store: Store, settings: Settings, as_json: bool) -> None:
        self.store = store
        self.settings = settings
        self.as_json = as_json
        self.embedding = True  # off once a model turns out to be unavailable: one note, not one per batch
        self.shown: dict[tuple[str, Path], set[str]] = {}

    def shown_by_first_sync(self, report: "SyncReport", watcher: "Watcher") -> None:
        """The first sync's failures and notes are on screen already: a root's first batch (a save of
        another note) repeated every unreadable file of its connector. Each root is given all of its
        connector's, whose messages name their files."""
        said = {part.connector: {*part.report.failures, *part.report.notices} for part in report.connectors}
        for target in watcher.targets:
            self.shown[(target.connector, target.root)] = set(said.get(target.connector, ()))

    def emit(self, data: dict) -> None:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def __call__(self, event: "WatchEvent") -> None:
        embedded = self._render(event)
        if self.as_json:
            self.emit({**event.to_dict(), "embedded": embedded})

    def _render(self, event: "WatchEvent") -> int:
        stamp = time.strftime("%H:%M:%S")
        where = f"{event.connector} {event.root}" if event.kind != "skipped" else event.connector
        if event.kind != "synced" or event.report is None:
            notice(f"{stamp} note: {where}: {event.message}")
            return 0
        report = event.report
        key = (event.connector, event.root)
        fresh = [text for text in (*report.failures, *report.notices) if text not in self.shown.get(key, set())]
        self.shown[key] = set(report.failures) | set(report.notices)
        if not (report.added or report.updated or report.removed or report.moved or fresh):
            return 0  # nothing changed (a touched file, an editor's swap file): stay quiet
        for text in fresh:
            notice(f"{stamp} {'error' if text in report.failures else 'note'}: {text}")
        notice(f"{stamp} {where}: {report.summary()}")
        return self.embed() if report.chunks else 0

    def embed(self) -> int:
        """Embed new chunks; after the first unavailable model, stop trying for this session."""
        if not self.embedding:
            return 0
        embedded = embed_new_chunks(self.store, self.settings)
        self.embedding = embedded is not None
        return embedded.chunks if embedded else 0


@contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM (systemd, docker, kill) sets stop, so the watch ends as cleanly as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
