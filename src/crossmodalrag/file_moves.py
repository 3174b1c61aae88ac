"""Files known by their bytes as well as their stamp: PDFs, images and (since session 31) notes and chats.

A stored file's metadata keeps `file_stamp` (size, mtime, extractor: compared without reading the
file) and `file_sha256` (its bytes). A stamp that differs only because the file was touched or
copied over with the same bytes is caught by the hash, so a 10-page scan is not OCR'd again to find
it unchanged; and a new path whose bytes are those of a stored file gone from disk is that file,
moved, so it keeps its source id (mem://source/<id> citations stay valid), as a moved note does.
A note or chat file a reader cut text out of keeps no hash (`hash_to_keep`).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from stat import S_ISREG
from typing import NamedTuple

from crossmodalrag.store import Store
from crossmodalrag.types import Document

UNSETTLED_SECONDS = 3.0  # a stamp is trusted once it was taken this long after the file's last write
UNSETTLED_MARK = "unsettled "  # before the mtime of a stamp taken sooner (unsettled_stamp)


class StoredFile(NamedTuple):
    stamp: str
    sha256: str | None  # None for a source stored before hashes were kept: it gets one when next read


def stored_path(uri: str, source_type: str) -> str:
    """The file (the repository, for a commit) a source was read from: commits and chat sessions are
    `<path>@<sha or session key>`."""
    return uri.rpartition("@")[0] if source_type in ("commit", "conversation") else uri


def file_sha256(path: Path) -> str | None:
    """The hash of the file's bytes, read in blocks (a scanned PDF may be hundreds of MB); None when
    it cannot be read (the reader then says why)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def hash_to_keep(path: Path, before: str | None, withheld_text: bool) -> str | None:
    """The hash to store with what a read kept of a file that a reader may cut text out of (a note's
    `<private>` spans, a chat's masked secrets), or None. Never when it cut something: with the rest
    of the file stored, the hash of its raw bytes confirms a guessed PIN or password in milliseconds.
    Such a file keeps only its stamp, so it is read again whenever touched (a cheap read for a note).
    Nor when its bytes changed during the read (`before` was taken before it): those hashed may have
    held text that the bytes read no longer did."""
    if before is None or withheld_text:
        return None
    return before if file_sha256(path) == before else None


def known_files(store: Store, uri_prefix: str, source_type: str) -> dict[str, StoredFile]:
    """uri → stamp and hash of stored files of this kind whose uri starts with the prefix."""
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.file_stamp'), json_extract(metadata, '$.file_sha256') FROM sources"
        " WHERE uri >= ? AND uri < ? AND source_type = ?",
        (uri_prefix, uri_prefix + "\U0010ffff", source_type),
    )
    return {uri: StoredFile(stamp, sha256) for uri, stamp, sha256 in rows if stamp}


class FileMoves:
    """Stored files of one kind that may have been renamed or moved (anywhere: a PDF moved from
    ~/Downloads to ~/papers is the same paper); the same `origin` as vaults.Moves."""

    def __init__(self, store: Store, source_type: str) -> None:
        self.store, self.source_type = store, source_type

    def origin(self, doc: Document, seen: set[str]) -> str | None:
        """The uri of the stored file with `doc`'s bytes that is gone from disk, or None. Of two or more,
        one of the same size and mtime first (a rename keeps both, a copy gets a new mtime: of two
        identical PDFs, one deleted and the other renamed, the renamed one keeps its own id), then one of
        the same file name."""
        sha256 = doc.metadata.get("file_sha256")
        if not sha256:
            return None
        rows = self.store.conn.execute(
            "SELECT uri, json_extract(metadata, '$.file_stamp') FROM sources"
            " WHERE source_type = ? AND json_extract(metadata, '$.file_sha256') = ?",
            (self.source_type, sha256),
        ).fetchall()
        candidates = [row for row in rows if row[0] != doc.uri and row[0] not in seen and not os.path.lexists(row[0])]
        own = size_and_mtime(doc.metadata.get("file_stamp"))
        candidates.sort(key=lambda row: (size_and_mtime(row[1]) != own, Path(row[0]).name != Path(doc.uri).name))
        return candidates[0][0] if candidates else None


def size_and_mtime(stamp: str | None) -> list[str] | None:
    """The stamp without its extractor (`size:mtime_ns:extractor`): a file moved is the same file
    whichever engine read it. An unsettled stamp gives its mtime too: a note saved under `mem sync
    --watch` is stored unsettled, and renamed later it must still be found (its text decides whether
    it is the same note); one stored before unsettled stamps kept the mtime gives None."""
    if not stamp:
        return None
    size, mtime = stamp.split(":", 2)[:2]
    mtime = mtime.removeprefix(UNSETTLED_MARK)
    return None if mtime == "unsettled" else [size, mtime]


def unsettled_stamp(stat: os.stat_result, extractor: str) -> str:
    """The stamp of a file written moments ago (`unsettled`): never equal to a stamp taken later, so it
    never vouches for the file, but it keeps the mtime a rename keeps."""
    return f"{stat.st_size}:{UNSETTLED_MARK}{stat.st_mtime_ns}:{extractor}"


def regular_file_stat(path: Path) -> os.stat_result | None:
    """The file's stat if it is a regular file: hashing a FIFO named `.md` would block forever, and a
    device would never end (the reader refuses both, with an error)."""
    try:
        stat = path.stat()
    except OSError:  # reading it says why
        return None
    return stat if S_ISREG(stat.st_mode) else None


def unsettled(stat: os.stat_result) -> bool:
    """Was the file written so lately that it could change again under the same stamp? Within the
    mtime's granularity (2 s on FAT, 1 s on ext3 and some network shares) a same-size save keeps
    the stamp: such a stamp never matches, the bytes' hash decides instead (git's "racy" files)."""
    return time.time() - stat.st_mtime < UNSETTLED_SECONDS
