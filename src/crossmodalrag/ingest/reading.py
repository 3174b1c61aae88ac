"""Reading only the files whose stamp or bytes changed: shared by the notes, PDF and image ingests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from crossmodalrag.connectors import notes
from crossmodalrag.connectors.files import check_name
from crossmodalrag.errors import CMRAGError
from crossmodalrag.file_moves import (
    StoredFile,
    file_sha256,
    hash_to_keep,
    regular_file_stat,
    unsettled,
    unsettled_stamp,
)
from crossmodalrag.ingest.report import Failure, Skipped, Unchanged
from crossmodalrag.types import Document


def _read_changed(
    paths: Iterable[Path],
    read: Callable[[Path], Document],
    stored: dict[str, StoredFile],
    extractor: str,
    notes_mode: bool = False,
) -> Iterable[Document | Failure | Unchanged | Skipped]:
    """Read only files whose stamp differs from the stored one and whose bytes too (a touched file is
    only restamped); the stamp and hash are taken before reading, so a file written during the read
    is simply read again next time. `notes_mode`: symbolic links get no stamp (a confined read must
    refuse a link out of its folder each time), and a note written moments ago an unsettled one."""
    for path in paths:
        stat = None if notes_mode and path.is_symlink() else regular_file_stat(path)
        stamp = f"{stat.st_size}:{stat.st_mtime_ns}:{extractor}" if stat else None
        known = stored.get(str(path))
        if stamp and known and known.stamp == stamp:
            yield Unchanged(str(path))
            continue
        sha256 = file_sha256(path) if stamp else None
        if stat and notes_mode and unsettled(stat):
            stamp = unsettled_stamp(stat, extractor)
        if sha256 and known and known.sha256 == sha256 and known.stamp.endswith(f":{extractor}"):
            yield Unchanged(str(path), file_stamp=stamp if stamp != known.stamp else None, file_sha256=sha256)
            continue
        for item in _read_each([path], read):
            if stamp and isinstance(item, Document):
                if known and not known.stamp.endswith(f":{extractor}"):
                    item.metadata["_reread"] = True  # stored by an older reader (keys with _ are not stored)
                item.metadata["file_stamp"] = stamp
                if notes_mode:  # PDFs and images have no private marker: nothing is cut from them
                    sha256 = hash_to_keep(path, sha256, item.withheld_text)
                if sha256:
                    item.metadata["file_sha256"] = sha256
            yield item


def _read_each(paths: Iterable[Path], read: Callable[[Path], Document]) -> Iterable[Document | Failure | Skipped]:
    for path in paths:
        try:
            check_name(path)
            yield read(path)
        except notes.EmptyNote:
            yield Skipped(str(path))
        except CMRAGError as error:
            yield Failure(str(path), error)
