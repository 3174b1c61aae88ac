"""Finding files of one kind: a path given directly, or everything under a folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator


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
