"""Writing read items to the store and removing sources that left: the steps every connector's ingest shares."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from crossmodalrag import vaults, versioning
from crossmodalrag.file_moves import FileMoves
from crossmodalrag.ingest.report import Failure, IngestReport, Progress, Skipped, Unchanged
from crossmodalrag.repository_moves import RepositoryMoves
from crossmodalrag.store import Store
from crossmodalrag.store.batch import WriteBatch
from crossmodalrag.store.documents import (
    chunked_as_stored,
    fingerprint,
    known_fingerprints,
    move_document,
    write_document,
)
from crossmodalrag.store.writers import lock_source, retrying
from crossmodalrag.types import Document
from crossmodalrag.wording import counted

MASS_DELETE_MIN_SOURCES = 3


def ingest_documents(
    store: Store,
    items: Iterable[Document | Failure | Unchanged | Skipped],
    known: dict[str, str],
    report: IngestReport,
    progress: Progress | None = None,
    moves: vaults.Moves | FileMoves | RepositoryMoves | None = None,
) -> set[str]:
    """Write every changed document; record failures. Returns the uris seen (stored or failed; a
    moved source's old uri too: it has not gone)."""
    seen: set[str] = set()
    reread = 0
    with store.batched(replayable=True) as batch:  # every unit below goes through batch.run
        for item in items:
            reread += isinstance(item, Document) and bool(item.metadata.get("_reread"))
            _ingest_one(batch, item, known, report, seen, moves)
            if progress:
                progress(report)
    if reread:  # OCR of a screenshot folder takes minutes: say why a run with nothing new took them
        report.notices.append(
            f"{counted(reread, 'file')} read again: this version of mem reads such files better"
            " (once after an upgrade; what reads the same is left as stored)"
        )
    return seen


def _ingest_one(
    batch: WriteBatch,
    item: Document | Failure | Unchanged | Skipped,
    known: dict[str, str],
    report: IngestReport,
    seen: set[str],
    moves: vaults.Moves | FileMoves | RepositoryMoves | None = None,
) -> None:
    if isinstance(item, Skipped):
        report.empty += 1
        if item.uri in known:  # seen, so kept: an editor truncates a note before writing it out again
            seen.add(item.uri)
            report.notices.append(f"{item.uri}: empty now: kept as stored (hint: delete the file to remove it)")
        return
    seen.add(item.uri)
    if isinstance(item, Failure):
        report.failures.append(str(item.error))
        return
    if isinstance(item, Unchanged):
        report.unchanged += 1
        if item.file_stamp:  # touched, same bytes: remember the new stamp
            batch.run(lambda: _restamp(batch, item.uri, item.file_stamp, item.file_sha256))
        return
    if item.metadata.get("notice"):
        report.notices.append(item.metadata["notice"])
    digest = fingerprint(item)
    # A file read again (touched, or stored by an older reader) whose text is as stored may still chunk
    # otherwise now: a journal's dated sections carry their day since session 33. Only then rewritten.
    rechunk = known.get(item.uri) == digest and "file_stamp" in item.metadata and not chunked_as_stored(batch, item)
    if known.get(item.uri) == digest and not rechunk:
        report.unchanged += 1
        if "file_stamp" in item.metadata:  # same content, touched file: remember the new stamp
            stamp, sha256 = item.metadata["file_stamp"], item.metadata.get("file_sha256")
            batch.run(lambda: _restamp(batch, item.uri, stamp, sha256))
        return
    if moves and item.uri not in known and (old_uri := moves.origin(item, seen)):
        moved = batch.run(lambda: move_document(batch, old_uri, item, digest))
        if moved is not None:
            seen.add(old_uri)
            report.moved += 1
            report.chunks += moved
            return
    added, count = batch.run(lambda: write_document(batch, item, digest, unless_stored=not rechunk))
    if added is None:  # another writer stored the same meanwhile
        report.unchanged += 1
        return
    report.chunks += count
    report.added += added
    report.updated += not added


def _restamp(batch: WriteBatch, uri: str, stamp: str, sha256: str | None) -> None:
    """Bookkeeping only (versioning leaves both out of a source's state): no change is logged."""
    with batch.unit() as conn:
        conn.execute(
            "UPDATE sources SET metadata = json_set(metadata, '$.file_stamp', ?, '$.file_sha256', ?) WHERE uri = ?",
            (stamp, sha256, uri),
        )


def remove_sources(store: Store, uris: Iterable[str]) -> int:
    """Delete sources with their chunks and index entries; returns how many went."""
    uris = list(dict.fromkeys(uris))

    def remove() -> int:
        removed = 0
        with store.transaction() as conn:
            for uri in sorted(uris):  # locked in one order: two removers never wait for each other in a cycle
                lock_source(conn, uri)
            for uri in uris:
                with versioning.changing(conn, "source", uri):
                    removed += conn.execute("DELETE FROM sources WHERE uri = ?", (uri,)).rowcount
        return removed

    return retrying(remove)


def remove_gone(
    store: Store,
    root: Path,
    gone: list[str],
    stored: int,
    report: IngestReport,
    allow_mass_delete: bool,
    causes: dict[str, int] | None = None,
) -> None:
    """Remove sources whose files left `root`, unless that is more than half of the `stored` ones:
    an unmounted drive leaves an empty mount point, which must not read as "everything deleted".
    A folder of one or two sources is exempt: emptying it is ordinary, and refusing would only nag.
    `causes`: why they left, cause → count (all gone from disk when not given), as the refusal says it."""
    if not gone:
        return
    if len(gone) * 2 > stored >= MASS_DELETE_MIN_SOURCES and not allow_mass_delete:
        causes = causes or {vaults.GONE_FROM_DISK: len(gone)}
        report.failures.append(_mass_delete_refusal(root, len(gone), stored, causes))
        return
    report.removed += remove_sources(store, gone)


def _mass_delete_refusal(root: Path, count: int, stored: int, causes: dict[str, int]) -> str:
    """The refusal, naming why the sources would go: a narrowed --include is no unmounted drive."""
    if len(causes) == 1:
        what = f"are {next(iter(causes))}"
    else:
        what = "would leave the memory (" + ", ".join(f"{n} {cause}" for cause, n in causes.items()) + ")"
    in_case = (
        "the patterns select less than you meant"
        if set(causes) == {vaults.FILTERED_OUT}
        else "the folder is an unmounted drive or emptied by mistake"
    )
    return (
        f"{root}: {count} of its {stored} stored sources {what}; nothing was removed, in case {in_case} "
        "(hint: if they are meant to go, run again with --allow-mass-delete)"
    )


def _still_stored(store: Store, prefix: str, kind: str, gone: list[str]) -> list[str]:
    """The sources gone from a folder that are still stored under their old uri once every folder of
    the run was read: one moved to a folder read after its own is met there as a move (it keeps its id)
    only if its own folder's removals wait until then."""
    stored = known_fingerprints(store, prefix, kind) if gone else {}
    return [uri for uri in gone if uri in stored]
