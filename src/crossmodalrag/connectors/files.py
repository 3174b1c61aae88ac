"""Finding files of one kind: a path given directly, or everything under a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from crossmodalrag.errors import ConnectorError
from crossmodalrag.types import readable

T = TypeVar("T")


def find_files(path: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    """The file itself, or every file with one of the suffixes under a folder, in a stable order.

    Hidden files and folders are skipped; symlinked folders are not followed (no loops).
    """
    if path.is_file():
        yield path
        return
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(suffixes) and not name.startswith("."):
                yield Path(folder, name)


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
