"""Finding files of one kind: a path given directly, or everything under a folder."""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from crossmodalrag.errors import ConnectorError
from crossmodalrag.types import readable

T = TypeVar("T")
NOT_REGULAR_HINT = "only regular files are read: remove it or move it out of the folder"


def find_files(path: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    """The file itself, or every file with one of the suffixes under a folder, in a stable order.

    Hidden files and folders are skipped; symlinked folders are not followed (no loops). A folder
    that cannot be listed is yielded itself, as notes.find_notes does: reading it fails naming it,
    and that failure keeps the files stored from under it (instead of their looking deleted).
    """
    if path.is_file():
        yield path
        return
    unlisted: list[OSError] = []
    for folder, dirs, files in os.walk(path, onerror=unlisted.append):
        yield from unlisted_folders(unlisted)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(suffixes) and not name.startswith("."):
                yield Path(folder, name)
    yield from unlisted_folders(unlisted)


def unlisted_folders(errors: list[OSError]) -> Iterator[Path]:
    """The folders os.walk could not list so far (and forget them)."""
    while errors:
        failed = errors.pop(0)
        if failed.filename is not None:
            yield Path(os.fsdecode(failed.filename))


@contextmanager
def opened_regular(path: Path, not_regular_hint: str = NOT_REGULAR_HINT) -> Iterator[tuple[int, os.stat_result]]:
    """A read-only descriptor of `path` and its stat, once it is known to be a regular file. Raises
    ConnectorError (one line, with a hint) for anything else: every file-reading connector goes
    through here, since a FIFO would block a reader forever, a device (`/dev/zero`) never end, and
    a broken link or an unreadable file made the PDF and image libraries raise their own errors.
    Opened non-blocking, so that opening a FIFO does not wait for a writer."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a device with nothing behind it
            raise ConnectorError(f"{shown(path)}: not a regular file", not_regular_hint) from exc
        raise unreadable(path, exc) from exc
    try:
        info = os.fstat(descriptor)
        if stat.S_ISDIR(info.st_mode):  # find_files and find_notes yield a folder they could not list
            raise ConnectorError(f"{shown(path)}: cannot list this folder", "check the folder's permissions")
        if not stat.S_ISREG(info.st_mode):
            raise ConnectorError(f"{shown(path)}: not a regular file", not_regular_hint)
        yield descriptor, info
    finally:
        os.close(descriptor)


def check_regular(path: Path, not_regular_hint: str = NOT_REGULAR_HINT) -> os.stat_result:
    """The stat of `path`, a readable regular file, for readers that open it by its path themselves
    (pdfium, Pillow, the chat readers). Raises ConnectorError as opened_regular does."""
    with opened_regular(path, not_regular_hint) as (_, info):
        return info


def unreadable(path: Path, error: OSError) -> ConnectorError:
    """The error for a file that cannot be opened or read, with a hint by why. A folder the walk
    could not list comes here too, and is named as one."""
    if error.errno == errno.EACCES and os.path.isdir(path):
        return ConnectorError(f"{shown(path)}: cannot read (Permission denied)", "check the folder's permissions")
    return ConnectorError(f"{shown(path)}: cannot read ({error.strerror})", read_hint(error))


def read_hint(error: OSError) -> str:
    """What to do about a file that cannot be read, by why: permissions are one reason of several."""
    return {
        errno.ENOENT: "a link to a file that is gone: fix or remove the link",
        errno.ELOOP: "a symbolic link that leads to itself: fix or remove it",
        errno.EIO: "the disk or filesystem failed to read it: check the device",
    }.get(error.errno, "check the file's permissions")


def check_name(path: Path) -> None:
    """Raise ConnectorError for a file name that is not valid UTF-8 (Linux allows any bytes): the
    name is the source's uri, which SQLite, JSON and the terminal all need as text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConnectorError(
            f"{shown(readable(str(path)))}: file name is not valid UTF-8", "rename the file"
        ) from error


def shown(path: Path | str) -> str:
    """A path for a one-line message: control characters (a newline in a file name) escaped."""
    text = str(path)
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def confined(read: Callable[[Path], T], root: Path) -> Callable[[Path], T]:
    """`read`, refusing a file found under `root` (resolved) that is a link to somewhere outside it:
    where a configured folder bounds what may be read (an agent's `memory_ingest`), a symlink in it
    must not carry the read elsewhere. Raises ConnectorError for such a file."""

    def guarded(path: Path) -> T:
        try:
            target = path.resolve()
        except OSError:
            target = path
        if target != root and root not in target.parents:
            raise ConnectorError(f"{path}: a link to {target}, outside {root}", "only files inside the folder are read")
        return read(path)

    return guarded
