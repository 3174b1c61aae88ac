"""An ingest run's counts and the items readers yield besides Documents: shared by every connector's ingest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from crossmodalrag.errors import CMRAGError
from crossmodalrag.wording import counted


@dataclass
class IngestReport:
    """Counts of one ingest run, and one message per item that failed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    moved: int = 0  # stored sources whose file was renamed or moved: they kept their id (see Moves)
    empty: int = 0  # skipped, having nothing to store (an empty note): not a failure; one stored before is kept
    chunks: int = 0
    failures: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # stored, but something is worth knowing

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def read(self) -> int:
        """Items found so far, whatever became of them: none after a walk means it found nothing."""
        return self.added + self.updated + self.unchanged + self.moved + self.failed + self.empty

    def summary(self) -> str:
        moved = f"{self.moved} moved, " if self.moved else ""
        skipped = f"{self.empty} empty skipped, " if self.empty else ""
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {moved}"
            f"{self.removed} removed, {skipped}{self.failed} failed ({counted(self.chunks, 'chunk')} written)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "moved": self.moved,
            "empty": self.empty,
            "failed": self.failed,
            "chunks": self.chunks,
            "failures": self.failures,
            "notices": self.notices,
        }


Progress = Callable[[IngestReport], None]


@dataclass
class Failure:
    """A source that could not be read this time; its stored version, if any, is kept."""

    uri: str
    error: CMRAGError


@dataclass
class Skipped:
    """A file with nothing to remember (an empty note): counted, not a failure, and not stored. A note
    stored before keeps its stored version, as one that fails to read does: caught between an
    editor's truncate and write, it was removed and came back under a new source id."""

    uri: str


@dataclass
class Unchanged:
    """A file whose size, mtime and extractor (or, touched, its bytes) match what was stored: not read again.

    Reading is the expensive part for PDFs and images (OCR takes about a second per image), so
    `mem sync` over a folder of unchanged screenshots must not redo it.
    """

    uri: str
    file_stamp: str | None = None  # with a new stamp: a touched file whose bytes are as stored
    file_sha256: str | None = None
