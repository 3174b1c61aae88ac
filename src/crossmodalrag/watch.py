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
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Callable

from crossmodalrag import ingest
from crossmodalrag.config import Settings
from crossmodalrag.connectors.notes import NOISE_DIRS, NOTE_SUFFIXES
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.ingest import IngestReport
from crossmodalrag.store import Store
from crossmodalrag.store.documents import known_fingerprints
from crossmodalrag.sync import add_report, configured_paths, run_ingest, sync

# Opening and reading files (our own ingest does) must not look like a change, or we would loop.
CHANGE_EVENTS = {"created", "modified", "moved", "deleted", "closed"}
GIT_STATE = {"HEAD", "packed-refs", "refs", "logs"}  # what moves when commits, branches or checkouts happen
PDF_SUFFIXES = (".pdf",)


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


@dataclass(eq=False)
class Target:
    """One configured root: what to observe, which changes matter, and whether it is armed."""

    connector: str
    root: Path
    observer: Any = None
    watched: Path | None = None  # the folder observed: the root, a file's parent, or a repository's git dir
    identity: tuple[int, int] | None = None  # (device, inode) of `watched` when armed
    missing: bool = False
    announced: bool = False  # its absence was reported (once per absence)
    polling: bool = False
    single_file: bool = False  # a PDF or image configured by itself: its folder is observed
    link_handler: Any = None  # notes: sees changes to notes outside the vault that links in it lead to
    linked: dict[Path, Any] | None = None  # the folders observed for those notes → their watches

    def present(self) -> bool:
        """Is the root there (and, for git, still a repository)?"""
        if self.connector == "git":
            git_dir = self.watched or _git_dir(self.root)
            return self.root.is_dir() and git_dir is not None and git_dir.is_dir()
        if self.connector in ("pdf", "image"):
            return self.root.exists()
        return self.root.is_dir()

    def relevant(self, path: Path, is_directory: bool) -> bool:
        """Does a change at path matter to this root?"""
        if self.connector == "git":
            relative = _relative(path, self.watched)
            return relative is not None and bool(relative.parts) and relative.parts[0] in GIT_STATE
        if self.single_file:
            return path == self.root
        relative = _relative(path, self.root)
        if relative is None or any(part.startswith(".") for part in relative.parts):
            return False
        if self.connector == "notes":
            if any(part in NOISE_DIRS for part in relative.parts):
                return False
            return is_directory or path.name.lower().endswith(NOTE_SUFFIXES)
        return is_directory or path.name.lower().endswith(_suffixes(self.connector))


def _relative(path: Path, root: Path | None) -> PurePath | None:
    if root is None:
        return None
    try:
        return path.relative_to(root)
    except ValueError:
        return None


def _suffixes(connector: str) -> tuple[str, ...]:
    if connector == "pdf":
        return PDF_SUFFIXES
    if connector == "chat":
        from crossmodalrag.connectors.chats import SUFFIXES

        return SUFFIXES
    from crossmodalrag.connectors.images import IMAGE_SUFFIXES

    return IMAGE_SUFFIXES


def _git_dir(root: Path) -> Path | None:
    """The repository's git dir (where refs and HEAD live), or None if root is not a repository."""
    if shutil.which("git") is None or not root.is_dir():
        return None
    result = subprocess.run(["git", "-C", str(root), "rev-parse", "--absolute-git-dir"], capture_output=True)
    return Path(os.fsdecode(result.stdout.strip())) if result.returncode == 0 else None


class _Pending:
    """Changed paths per target, filled by observer threads and drained by the watch loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: dict[Target, set[Path]] = {}
        self._first = self._last = 0.0

    def add(self, target: Target, paths: list[Path]) -> None:
        with self._lock:
            now = time.monotonic()
            if not self._paths:
                self._first = now
            self._paths.setdefault(target, set()).update(paths)
            self._last = now

    def take(self, debounce: float, longest: float) -> dict[Target, set[Path]]:
        """Everything pending once events have been quiet for `debounce` s (or waited `longest` s)."""
        with self._lock:
            now = time.monotonic()
            if not self._paths or (now - self._last < debounce and now - self._first < longest):
                return {}
            taken, self._paths = self._paths, {}
            return taken

    def count(self) -> int:
        """How many changed paths are waiting."""
        with self._lock:
            return sum(len(paths) for paths in self._paths.values())


class _Handler:
    """Receives watchdog events on an observer thread; records the relevant paths for one target."""

    def __init__(self, target: Target, pending: _Pending) -> None:
        self.target = target
        self.pending = pending

    def dispatch(self, event: Any) -> None:
        if event.event_type not in CHANGE_EVENTS:
            return
        if event.is_directory and event.event_type in ("modified", "closed"):
            return  # a folder's own mtime: its entries report their changes themselves
        try:
            paths = [Path(os.fsdecode(p)) for p in (event.src_path, getattr(event, "dest_path", "")) if p]
            relevant = [path for path in paths if self.target.relevant(path, event.is_directory)]
        except Exception:  # noqa: BLE001 - an exception here would silently end the observer thread
            relevant = [self.target.root]  # re-sync the whole root rather than miss the change
        if relevant:
            self.pending.add(self.target, relevant)


class _LinkHandler:
    """Receives events from the folders holding notes that symlinks in a vault lead to (ingest reads
    them through the link, but they lie outside the observed vault): a change to one re-syncs the vault."""

    def __init__(self, target: Target, pending: _Pending) -> None:
        self.target = target
        self.pending = pending
        self.files: set[Path] = set()

    def dispatch(self, event: Any) -> None:
        if event.event_type not in CHANGE_EVENTS or event.is_directory:
            return
        paths = {Path(os.fsdecode(p)) for p in (event.src_path, getattr(event, "dest_path", "")) if p}
        if paths & self.files:
            self.pending.add(self.target, [self.target.root])


def linked_notes_outside(root: Path) -> dict[Path, set[Path]]:
    """folder → the notes in it that symlinks in the vault lead to, for those outside the vault."""
    from crossmodalrag.connectors.notes import find_notes

    found: dict[Path, set[Path]] = {}
    for note in find_notes(root, [], []):
        if not note.is_symlink():
            continue
        try:
            real = note.resolve(strict=True)
        except (OSError, RuntimeError):  # a broken link or a loop: the ingest reports it
            continue
        if not real.is_relative_to(root.resolve()):
            found.setdefault(real.parent, set()).add(real)
    return found


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


def _observe(handler: _Handler, path: Path, recursive: bool, polling: bool) -> Any:
    """A started watchdog observer on path. Raises OSError if path cannot be observed."""
    if polling:
        from watchdog.observers.polling import PollingObserver

        observer = PollingObserver(timeout=1)
    else:
        from watchdog.observers import Observer

        observer = Observer()
    observer.schedule(handler, str(path), recursive=recursive)
    try:
        observer.start()
    except BaseException:
        observer.stop()
        raise
    return observer


def _observing(observer: Any) -> bool:
    """False once the observer's emitter has ended: inotify ends it when the watched folder is deleted,
    and a folder recreated at once may even get the old inode number back."""
    return observer.is_alive() and all(emitter.is_alive() for emitter in observer.emitters)


def _identity(path: Path | None) -> tuple[int, int] | None:
    try:
        stat = path.stat() if path else None
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino) if stat else None


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
