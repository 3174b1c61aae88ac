"""Stored sources from folders gone from disk and no longer configured: no sync will ever remove them.

A vault or repository moved and configured under its new path keeps what moved unchanged (the same
ids: vaults.Moves, repository_moves.py); but a note edited meanwhile, or a folder dropped from the
configuration once deleted, stays in memory under its old path, and answers go on citing files that
are gone. `mem sync` says so, naming the command that removes them.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from pathlib import Path

from crossmodalrag.file_moves import stored_path
from crossmodalrag.store import Store
from crossmodalrag.wording import counted

SOURCE_TYPES = {"notes": "note", "git": "commit", "pdf": "pdf", "image": "image", "chat": "conversation"}
SHOWN = 3  # folders named; the rest counted


def left_behind_notices(store: Store, connector: str, configured: list[Path]) -> list[str]:
    """One notice per folder (the outermost one gone from disk) holding sources of this connector's kind
    that none of its configured paths covers."""
    source_type = SOURCE_TYPES.get(connector)
    if source_type is None:
        return []
    gone: dict[Path, Path | None] = {}
    found: Counter[Path] = Counter()
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.vault') FROM sources WHERE source_type = ?", (source_type,)
    )
    for uri, vault in rows:
        path = Path(stored_path(uri, source_type))
        folder = _gone_folder(Path(vault) if vault else path if source_type == "commit" else path.parent, gone)
        if folder is not None and not any(path.is_relative_to(root) for root in configured):
            found[folder] += 1
    notices = [_notice(folder, count) for folder, count in sorted(found.items())[:SHOWN]]
    if len(found) > SHOWN:
        notices.append(
            f"{len(found) - SHOWN} more folders gone from disk still have sources stored (see `mem sources`)"
        )
    return notices


def _gone_folder(folder: Path, gone: dict[Path, Path | None]) -> Path | None:
    """The outermost folder gone from disk that holds `folder`, or None when `folder` is there."""
    if folder not in gone:
        if os.path.lexists(folder):
            gone[folder] = None
        elif folder.parent == folder:
            gone[folder] = folder
        else:
            gone[folder] = _gone_folder(folder.parent, gone) or folder
    return gone[folder]


def _notice(folder: Path, count: int) -> str:
    return (
        f"{folder}: {counted(count, 'source')} stored from it, which is gone from disk and not configured: "
        f"no sync removes them and answers can still cite them (hint: `mem forget --path "
        f"{shlex.quote(str(folder))}` removes them; if the folder moved, configure its new path)"
    )
