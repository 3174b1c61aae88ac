"""Where `mem backup` wrote copies outside `backups/`, so `mem forget` can find them: a completed backup
it names (it may still hold the forgotten text), and a killed one's hidden staging copy it deletes.

The record is a text file beside the database (`<db>.backups`, one JSON string per line), not a table:
it is written before the copy starts, which a table could only do with a write to the database being
copied, and a backup restored elsewhere should not carry another memory's list of places.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def record_path(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".backups")


def remember_backup(db_path: Path, target: Path) -> None:
    """Add `target` to the record, before the copy that becomes it is written (a kill midway leaves
    that copy, which forget must find). Appending one short line keeps any earlier entry whole."""
    if str(target) in map(str, remembered_backups(db_path)):
        return
    try:
        with record_path(db_path).open("a", encoding="utf-8") as record:
            record.write(json.dumps(str(target)) + "\n")
    except OSError:
        pass  # a database folder that cannot be written: the backup matters more than the note of it


def remembered_backups(db_path: Path) -> list[Path]:
    """The backup files recorded for this database, whether or not they still exist."""
    try:
        lines = record_path(db_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        try:
            paths.append(Path(os.path.realpath(json.loads(line))))  # one spelling per file (older records)
        except (ValueError, TypeError):
            continue  # a line cut short by a crash: the others still count
    return list(dict.fromkeys(paths))
