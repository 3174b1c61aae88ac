"""What `mem sync --watch` observes and the watchdog threads that record changes; watch.py's loop applies them."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from crossmodalrag.connectors.notes import NOISE_DIRS, NOTE_SUFFIXES

# Opening and reading files (our own ingest does) must not look like a change, or we would loop.
CHANGE_EVENTS = {"created", "modified", "moved", "deleted", "closed"}
GIT_STATE = {"HEAD", "packed-refs", "refs", "logs"}  # what moves when commits, branches or checkouts happen
PDF_SUFFIXES = (".pdf",)


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
