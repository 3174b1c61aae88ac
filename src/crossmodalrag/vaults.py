"""What an ingest of a vault knows beyond its files: which stored notes were moved rather than deleted,
why the others left (for the mass-delete refusal), and which vault a folder's notes belong to."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from crossmodalrag.chunking.markdown import clip
from crossmodalrag.connectors import globs
from crossmodalrag.file_moves import size_and_mtime
from crossmodalrag.store import Store
from crossmodalrag.types import Document

GONE_FROM_DISK = "gone from disk"
FILTERED_OUT = "filtered out by the include/exclude rules"


class Moves:
    """Stored notes whose file may have been renamed or moved: a new note whose title and text are
    those of a stored one that vanished from disk is that note, moved (store/documents.py move_document).
    Read as a deletion and an addition, moving a folder of most of a vault tripped the mass-delete
    guard, and kept the old copies beside the new ones until the next run with --allow-mass-delete.
    The stored note may come from any vault, as a PDF may come from any folder (file_moves.py): a vault
    moved and configured under its new path left every note stored twice, the old copies cited.
    A note with no heading is titled by its file name (as Obsidian shows it), so renaming it changes
    its title: such a note is also found by its file's size and mtime, which a rename keeps. One with no
    stamp (a rollback restores a note's content, not its file's stamp) can be found by its text alone."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # title → [Stored]; (size, mtime) → [Stored] of the notes titled by their file name; those with no stamp
        self.by_title: dict[str, list[Stored]] | None = None
        self.named_by_file: dict[tuple[str, ...], list[Stored]] = {}
        self.named_unstamped: list[Stored] = []

    def _stored(self) -> dict[str, list[Stored]]:
        """Read once, when the first new note is met (most syncs meet none)."""
        if self.by_title is None:
            self.by_title = {}
            rows = self.store.conn.execute(
                "SELECT uri, title, fingerprint, json_extract(metadata, '$.path'),"
                " json_extract(metadata, '$.file_stamp') FROM sources WHERE source_type = 'note'"
            )
            for uri, title, digest, locator, stamp in rows:
                if locator is None:
                    continue
                stored = Stored(uri, title, locator, digest, stamp)
                self.by_title.setdefault(title, []).append(stored)
                if not _titled_by_file_name(title, uri):
                    continue
                if own := size_and_mtime(stamp):
                    self.named_by_file.setdefault(tuple(own), []).append(stored)
                elif not stamp:
                    self.named_unstamped.append(stored)
        return self.by_title

    def origin(self, doc: Document, seen: set[str]) -> str | None:
        """The uri of the stored note `doc` was moved from, or None. One of the same size and mtime is
        tried first (a rename keeps both, a copy gets a new mtime: of two identical notes, one deleted
        and the other renamed, the renamed one keeps its id), then one of the same file name (of two
        identical notes moved together, each keeps its own). A note titled by its file name may also
        come from one so titled, of the same size and mtime, under its old name, or of no stamp at all
        (its text decides)."""
        from crossmodalrag.store.documents import fingerprint

        own = size_and_mtime(doc.metadata.get("file_stamp"))
        stored = self._stored().get(doc.title, [])
        by_name = _titled_by_file_name(doc.title, doc.uri)
        renamed = self.named_by_file.get(tuple(own), []) if own and by_name else []
        unstamped = self.named_unstamped if by_name else []
        candidates = [c for c in stored + renamed + unstamped if c.uri not in seen and not os.path.lexists(c.uri)]
        candidates.sort(
            key=lambda c: (own is None or size_and_mtime(c.stamp) != own, Path(c.uri).name != Path(doc.uri).name)
        )
        for candidate in candidates:
            # the same note, read at its old path (under its old name)
            if fingerprint(replace(doc, locator=candidate.locator, title=candidate.title)) == candidate.digest:
                for found in (stored, renamed, unstamped):
                    if candidate in found:
                        found.remove(candidate)
                return candidate.uri
        return None


class Stored(NamedTuple):
    """A stored note, as far as telling whether a new one is it, moved."""

    uri: str
    title: str
    locator: str
    digest: str
    stamp: str | None


def _titled_by_file_name(title: str, uri: str) -> bool:
    return title == clip(Path(uri).stem)


def why_notes_left(root: Path, gone: list[str], include: list[str], exclude: list[str]) -> dict[str, int]:
    """cause → count of the stored notes this read of the vault did not find (for the mass-delete
    refusal: a note filtered out is still on disk, and "gone from disk" misled). An emptied note is not
    among them: it keeps its stored version (ingest.storing._ingest_one)."""
    causes: dict[str, int] = {}
    for uri in gone:
        path = Path(uri)
        if not os.path.lexists(path):
            cause = GONE_FROM_DISK
        elif not globs.selected(path.relative_to(root).as_posix(), include, exclude):
            cause = FILTERED_OUT
        else:
            cause = "no longer read (now hidden, or a link to another note of the vault)"
        causes[cause] = causes.get(cause, 0) + 1
    return causes


def stored_vault(store: Store, root: Path) -> Path:
    """The vault root's notes belong to: the outermost enclosing folder that notes were stored from as
    a vault (and still there), else root itself. Read as a vault of their own, a subfolder's notes got
    another locator and vault, so ingesting the subfolder and the vault in turn rewrote every note."""
    for folder in reversed(root.parents):
        prefix = "/" if folder == Path(folder.anchor) else f"{folder}/"
        stored = store.conn.execute(
            "SELECT 1 FROM sources WHERE uri >= ? AND uri < ? AND source_type = 'note'"
            " AND json_extract(metadata, '$.vault') = ? LIMIT 1",
            (prefix, prefix + "\U0010ffff", str(folder)),
        ).fetchone()
        if stored and folder.is_dir():
            return folder
    return root
