"""`mem sync --watch`: apply file changes under every configured connector root as they happen.

Filesystem events (watchdog) only mark a root as changed; the loop applies a root's changes once
its events have been quiet for `debounce` seconds, so an editor's burst of writes is one re-sync.
Notes and git repositories re-sync their whole root (file stamps and fingerprints make that cheap:
an unchanged note is not read again); PDFs and images re-read only the changed files, because
reading them again means OCR. A root that
disappears is reported once and its memory kept; it is re-armed and re-synced when it returns.
"""

from __future__ import annotations

import errno
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from crossmodalrag import ingest
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.ingest import IngestReport
from crossmodalrag.store import Store
from crossmodalrag.store.documents import known_fingerprints
from crossmodalrag.sync import add_report, configured_paths, run_ingest, sync
from crossmodalrag.watch_targets import (
    Target,
    _git_dir,
    _Handler,
    _identity,
    _LinkHandler,
    _observe,
    _observing,
    _Pending,
    linked_notes_outside,
)


@dataclass
class WatchEvent:
    """Something the watcher did or noticed: `synced` a root, a root went `missing` or `returned`,
    a connector was `skipped` (missing extra), or a `notice` worth knowing."""

    kind: str
    connector: str
    root: Path | None  # None when the event is about the whole connector
    report: IngestReport | None = None
    message: str = ""

    @property
    def changed(self) -> bool:
        report = self.report
        return bool(report and (report.added or report.updated or report.removed or report.moved or report.failed))

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "connector": self.connector,
            "root": str(self.root) if self.root else None,
            "message": self.message,
            **(self.report.to_dict() if self.report else {}),
        }


Notify = Callable[[WatchEvent], None]


class Watcher:
    """Observers on every configured root and the loop that applies their changes.

    Use as a context manager (arms the observers, stops them on the way out), then call `run`.
    Raises CMRAGError from the constructor when nothing is configured.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        only: tuple[str, ...] | list[str] = (),
        max_commits: int | None = None,
        notify: Notify | None = None,
        debounce: float = 0.75,
        poll: float = 1.0,
    ) -> None:
        self.store = store
        self.settings = settings
        self.max_commits = max_commits
        self.notify = notify or (lambda event: None)
        self.debounce = debounce
        self.poll = poll
        self.pending = _Pending()
        self.targets = [
            Target(connector, root) for connector, roots in configured_paths(settings, only).items() for root in roots
        ]

    def __enter__(self) -> "Watcher":
        for connector in sorted({target.connector for target in self.targets}):
            reason = _missing_extra(connector, self.settings)
            if reason:
                self.targets = [target for target in self.targets if target.connector != connector]
                self.notify(WatchEvent("skipped", connector, None, message=f"not watched: {reason}"))
        for target in self.targets:
            if not self._arm(target):
                self._lost(target, announce=False)  # announced by `run`, after the caller's first sync
        return self

    def __exit__(self, *exc: object) -> None:
        for target in self.targets:
            self._disarm(target)

    def run(self, stop: threading.Event) -> None:
        """Apply changes until stop is set. Raises sqlite3 errors other than a busy database."""
        tick = max(0.02, min(0.2, self.debounce / 4))
        for target in self.targets:
            if target.missing:
                self._lost(target)
        next_check = time.monotonic() + self.poll
        while not stop.wait(tick):
            if time.monotonic() >= next_check:
                self._check_roots()
                next_check = time.monotonic() + self.poll
            # A burst that never pauses is still applied, at most every few debounce periods.
            self._apply_all(self.pending.take(self.debounce, 4 * self.debounce + 1))

    def finish(self) -> None:
        """Apply at once what is still waiting out the debounce: a stop (Ctrl-C, SIGTERM) a moment
        after a save must not drop it. Another Ctrl-C interrupts this; what it did not reach stays
        counted in `pending` (and the next sync reads it from disk anyway)."""
        self._apply_all(self.pending.take(0, 0))

    def _apply_all(self, taken: dict[Target, set[Path]]) -> None:
        """Apply each target's changes; on Ctrl-C, those not applied go back to pending first (those
        stored are applied, though a Ctrl-C during the notice, embedding their chunks, stops that)."""
        remaining = dict(taken)
        try:
            for target, paths in taken.items():
                event = self._apply(target, paths)
                del remaining[target]
                if event is not None:
                    self.notify(event)
        except KeyboardInterrupt:
            for target, paths in remaining.items():
                self.pending.add(target, list(paths))
            raise

    def _arm(self, target: Target) -> bool:
        """Start observing target; False if it is not there (or cannot be observed)."""
        watched = _git_dir(target.root) if target.connector == "git" else target.root
        if watched is None or not watched.exists():
            return False
        recursive = True
        target.single_file = target.connector in ("pdf", "image") and target.root.is_file()
        if target.single_file:
            watched, recursive = target.root.parent, False
        target.watched = watched
        try:
            target.observer = _observe(_Handler(target, self.pending), watched, recursive, target.polling)
        except OSError as error:
            if error.errno not in (errno.ENOSPC, errno.EMFILE) or target.polling:
                target.watched = None
                return False
            # inotify's per-user limits are exhausted: poll this root instead of giving up on it.
            target.polling = True
            self.notify(WatchEvent("notice", target.connector, target.root, message=_POLLING_NOTE))
            return self._arm(target)
        target.identity = _identity(watched)
        if target.identity is None:  # gone again in the meantime
            self._disarm(target)
            return False
        self._follow_links(target)
        return True

    def _follow_links(self, target: Target) -> None:
        """Observe the folders of the notes outside the vault that its symlinks lead to (inotify does
        not follow links): edits there re-sync the vault. Kept current after each re-sync."""
        if target.connector != "notes" or target.observer is None:
            return
        if target.link_handler is None:
            target.link_handler = _LinkHandler(target, self.pending)
        wanted, target.linked = linked_notes_outside(target.root), target.linked or {}
        for folder in set(target.linked) - set(wanted):
            target.observer.unschedule(target.linked.pop(folder))
        for folder in set(wanted) - set(target.linked):
            try:
                target.linked[folder] = target.observer.schedule(target.link_handler, str(folder), recursive=False)
            except OSError:  # not observable (gone, inotify limits): its edits wait for the next sync
                continue
        target.link_handler.files = {note for folder in target.linked for note in wanted[folder]}

    def _disarm(self, target: Target) -> None:
        observer, target.observer, target.identity, target.linked = target.observer, None, None, None
        if observer is not None:
            observer.stop()
            if observer.is_alive():
                observer.join(timeout=5)

    def _lost(self, target: Target, announce: bool = True) -> None:
        """Report a vanished root once; its stored memory stays until it comes back without its files."""
        self._disarm(target)
        target.watched = None
        if not target.missing:
            target.missing, target.announced = True, False
        if announce and not target.announced:
            target.announced = True
            self.notify(WatchEvent("missing", target.connector, target.root, message=_missing_message(target)))

    def _check_roots(self) -> None:
        """Re-arm roots that came back or were replaced (a new folder at the same path)."""
        for target in self.targets:
            if target.observer is None:
                if target.present() and self._arm(target):
                    if target.missing:
                        target.missing = False
                        self.notify(WatchEvent("returned", target.connector, target.root, message="back; re-syncing"))
                    self.pending.add(target, [target.root])
            elif not target.present():
                self._lost(target)
            elif _identity(target.watched) != target.identity or not _observing(target.observer):
                self._disarm(target)
                if self._arm(target):
                    self.pending.add(target, [target.root])  # changes on the replaced folder went unseen

    def _apply(self, target: Target, paths: set[Path]) -> WatchEvent | None:
        """Apply target's changes; returns the event to notify, or None if the root is gone."""
        if not target.present():
            self._lost(target)
            return None
        report = IngestReport()
        try:
            if target.connector in ("pdf", "image"):
                self._apply_files(target, paths, report)
            else:
                add_report(
                    report, run_ingest(self.store, self.settings, target.connector, [target.root], self.max_commits)
                )
                if _links_may_have_changed(paths):
                    self._follow_links(target)  # a link added or removed since
        except CMRAGError as error:
            report.failures.append(str(error))
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            report.failures.append(f"the database stayed locked: {error} (hint: will retry shortly)")
            self.pending.add(target, list(paths))
        return WatchEvent("synced", target.connector, target.root, report)

    def _apply_files(self, target: Target, paths: set[Path], report: IngestReport) -> None:
        """Re-read the changed files (and folders) that exist; forget those that are gone."""
        present = _outermost(path for path in paths if path.exists())
        if present:
            add_report(report, run_ingest(self.store, self.settings, target.connector, present))
        stale = [uri for path in paths if not path.exists() for uri in _stored_at_or_under(self.store, path)]
        report.removed += ingest.remove_sources(self.store, stale) if stale else 0


def _links_may_have_changed(paths: set[Path]) -> bool:
    """Could these changes alter where the vault's symbolic links lead? Only a link, a folder or a
    path gone can: a plain save, the common case, need not walk the whole vault again for its links."""
    return any(path.is_symlink() or not path.is_file() for path in paths)


_POLLING_NOTE = (
    "the system's inotify limit is reached; polling this folder instead"
    " (hint: raise fs.inotify.max_user_watches / max_user_instances)"
)


def _missing_message(target: Target) -> str:
    what = "not a git repository" if target.connector == "git" and target.root.is_dir() else "not found"
    return f"{what}; waiting for it to appear (nothing stored from it is removed meanwhile)"


def _missing_extra(connector: str, settings: Settings) -> str | None:
    """Why this connector cannot ingest here (a missing extra), or None."""
    try:
        if connector == "pdf":
            from crossmodalrag.connectors import pdf

            pdf.extractor_version_or_raise(settings.ocr_engine)
        elif connector == "image":
            from crossmodalrag.connectors import images

            images.extractor_version(settings.ocr_engine)
    except MissingExtraError as error:
        return str(error)
    return None


def _outermost(paths: Any) -> list[Path]:
    """The paths with those inside another listed folder dropped (the folder re-reads them)."""
    ordered = sorted(set(paths), key=lambda path: len(path.parts))
    kept: list[Path] = []
    for path in ordered:
        if not any(parent == path or parent in path.parents for parent in kept):
            kept.append(path)
    return kept


def _stored_at_or_under(store: Store, path: Path) -> list[str]:
    """Stored source uris for this file, or for anything under this folder."""
    prefix = str(path)
    return [uri for uri in known_fingerprints(store, prefix) if uri == prefix or uri.startswith(prefix + "/")]


def watch(
    store: Store,
    settings: Settings,
    stop: threading.Event,
    only: tuple[str, ...] | list[str] = (),
    max_commits: int | None = None,
    notify: Notify | None = None,
    debounce: float = 0.75,
    poll: float = 1.0,
) -> None:
    """Sync every configured connector once, then apply changes until stop is set.

    Raises CMRAGError when nothing is configured.
    """
    with Watcher(store, settings, only, max_commits, notify, debounce, poll) as watcher:
        sync(store, settings, only, max_commits)
        watcher.run(stop)
        watcher.finish()
