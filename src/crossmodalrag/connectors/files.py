"""Finding files of one kind: a path given directly, or everything under a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from crossmodalrag.errors import ConnectorError


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
        shown = os.fsencode(path).decode("utf-8", "replace")
        shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in shown)  # one line, even for "\n"
        raise ConnectorError(f"{shown}: file name is not valid UTF-8", "rename the file") from error
