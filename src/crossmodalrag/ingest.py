"""Connector → chunks → store → FTS index, each source one unit of a write batch (the sources of
~0.25 s share a commit; store.batched).

Each source is fingerprinted (content, title and CHUNKER_VERSION): an unchanged source is skipped,
a changed one is re-chunked in place. A crash between sources leaves every committed source whole
and no half-written one. Notes that left a vault are removed on the next ingest of that vault.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from crossmodalrag import vaults, versioning
from crossmodalrag.chunking import CHUNKER_VERSION, chunk_document
from crossmodalrag.connectors import git, notes
from crossmodalrag.connectors.files import check_name, confined
from crossmodalrag.errors import CMRAGError
from crossmodalrag.index import fts
from crossmodalrag.store import Store
from crossmodalrag.store.connection import WriteBatch
from crossmodalrag.store.writers import lock_source, retrying
from crossmodalrag.types import Document
from crossmodalrag.versioning.sources import source_state
from crossmodalrag.wording import counted

MASS_DELETE_MIN_SOURCES = 3


@dataclass
class IngestReport:
    """Counts of one ingest run, and one message per item that failed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    moved: int = 0  # stored sources whose file was renamed or moved: they kept their id (see Moves)
    empty: int = 0  # skipped, having nothing to store (an empty note): neither stored nor a failure
    chunks: int = 0
    failures: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # stored, but something is worth knowing

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def read(self) -> int:
        """Items found so far, whatever became of them: none after a walk means it found nothing."""
        return self.added + self.updated + self.unchanged + self.failed + self.empty

    def summary(self) -> str:
        moved = f"{self.moved} moved, " if self.moved else ""
        skipped = f"{self.empty} empty skipped, " if self.empty else ""
        return (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, {moved}"
            f"{self.removed} removed, {skipped}{self.failed} failed ({self.chunks} chunks written)"
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


def fingerprint(doc: Document) -> str:
    """What decides whether a stored source is still current (the locator too: chunks carry it)."""
    digest = hashlib.sha256()
    for part in (CHUNKER_VERSION, doc.extractor, doc.format, doc.modality, doc.locator, doc.title, doc.text):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def known_fingerprints(store: Store, uri_prefix: str, source_type: str | None = None) -> dict[str, str]:
    """uri → fingerprint of stored sources whose uri starts with the prefix, of one kind when given.
    An ingest passes its own kind: what it did not find is removed, and a folder holds notes, PDFs,
    images and repositories side by side (ingesting ~/Documents as notes must not drop its PDFs)."""
    sql, params = (
        "SELECT uri, fingerprint FROM sources WHERE uri >= ? AND uri < ?",
        [uri_prefix, uri_prefix + "\U0010ffff"],
    )
    if source_type:
        sql, params = sql + " AND source_type = ?", [*params, source_type]
    return {uri: digest for uri, digest in store.conn.execute(sql, params)}


def write_document(
    batch: WriteBatch, doc: Document, digest: str, unless_stored: bool = False
) -> tuple[bool | None, int]:
    """Store one source and its chunks as one all-or-nothing unit; returns (was it new, chunk count).
    `unless_stored`: nothing is written, and (None, 0) returned, when the source as stored has this
    fingerprint already (two syncs at once: the one that waited for the other's write finds it done)."""
    chunks = chunk_document(doc)
    metadata = stored_metadata(doc)
    batch.writes(doc.uri)
    with batch.unit() as conn:
        row = conn.execute("SELECT id, fingerprint FROM sources WHERE uri = ?", (doc.uri,)).fetchone()
        if row and unless_stored and row[1] == digest:
            return None, 0
        if row:
            source_id = row[0]
            versioning.before_change(conn, "source", doc.uri)
            conn.execute("DELETE FROM chunks WHERE source_id = ?", (source_id,))
            conn.execute(
                "UPDATE sources SET source_type = ?, fingerprint = ?, timestamp = ?, title = ?, metadata = ?,"
                " ingested_at = ? WHERE id = ?",
                (doc.source_type, digest, doc.timestamp, doc.title, metadata, time.time(), source_id),
            )
        else:
            source_id = new_source_id(conn)
            inserted = conn.execute(
                "INSERT INTO sources (id, source_type, uri, fingerprint, timestamp, title, metadata, ingested_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (source_id, doc.source_type, doc.uri, digest, doc.timestamp, doc.title, metadata, time.time()),
            )
            source_id = source_id or inserted.lastrowid
        written = _insert_chunks(batch, conn, source_id, doc, chunks, 0)
        if versioning.enabled(conn):  # the state just written: the log need not read it back
            state = source_state(doc.uri, doc.source_type, doc.title, doc.timestamp, metadata, digest, written)
            versioning.changed(conn, "source", doc.uri, state=state, new=row is None)
    return row is None, len(chunks)


def move_document(batch: WriteBatch, old_uri: str, doc: Document, digest: str) -> int | None:
    """Give the stored source at `old_uri` the uri of the file it was renamed to, then rewrite it there
    (its chunks carry the new locator), in one unit; returns the chunk count, or None when there was
    nothing to move (the old one is gone or the new uri is taken: the caller writes it as new). The
    source keeps its id, so a mem://source/<id> citation and the events read from it stay valid."""
    batch.writes(old_uri)
    with batch.unit() as conn:
        rows = conn.execute("SELECT uri FROM sources WHERE uri IN (?, ?)", (old_uri, doc.uri)).fetchall()
        if [row[0] for row in rows] != [old_uri]:
            return None
        with versioning.changing(conn, "source", old_uri):  # the log: deleted there, inserted here
            conn.execute("UPDATE sources SET uri = ? WHERE uri = ?", (doc.uri, old_uri))
        return write_document(batch, doc, digest)[1]


def extend_document(batch: WriteBatch, source_id: int, doc: Document, digest: str, keep: int, chunks: list) -> int:
    """Update a stored source in place: keep its first `keep` chunks, replace the rest by `chunks`
    (offsets into doc.text). A growing transcript thus writes, and embeds, only its new turns."""
    batch.writes(doc.uri)
    with batch.unit() as conn:
        versioning.before_change(conn, "source", doc.uri)
        conn.execute("DELETE FROM chunks WHERE source_id = ? AND chunk_index >= ?", (source_id, keep))
        conn.execute(
            "UPDATE sources SET fingerprint = ?, timestamp = ?, title = ?, metadata = ?, ingested_at = ? WHERE id = ?",
            (digest, doc.timestamp, doc.title, stored_metadata(doc), time.time(), source_id),
        )
        _insert_chunks(batch, conn, source_id, doc, chunks, keep)
        versioning.changed(conn, "source", doc.uri)
    return len(chunks)


def stored_metadata(doc: Document) -> str:
    """The metadata column: keys starting with `_` are for the chunker only (e.g. turn spans)."""
    return json.dumps({k: v for k, v in doc.metadata.items() if not k.startswith("_")}, ensure_ascii=False)


def _insert_chunks(
    batch: WriteBatch, conn: sqlite3.Connection, source_id: int, doc: Document, chunks: list, first_index: int
) -> list[tuple]:
    """Insert the chunks and defer their index rows; returns their values in CHUNK_COLUMNS order."""
    spans = utf8_offsets(doc.text, [offset for c in chunks for offset in (c.char_start, c.char_end)])
    ids = new_chunk_ids(conn, len(chunks))
    values = [
        (
            ids[i],
            source_id,
            first_index + i,
            c.text,
            c.locator,
            c.char_start,
            c.char_end,
            json.dumps(c.metadata, ensure_ascii=False) if c.metadata else "{}",
            doc.modality,
            spans[c.char_start],
            spans[c.char_end],
        )
        for i, c in enumerate(chunks)
    ]
    conn.executemany(
        "INSERT INTO chunks (id, source_id, chunk_index, text, locator, char_start, char_end, metadata, modality,"
        " byte_start, byte_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        values,
    )
    batch.collect(index_chunks, [(ids[i], doc.title, c.text) for i, c in enumerate(chunks)])
    return [value[3:] for value in values]


def index_chunks(conn: sqlite3.Connection, units: list[list[tuple]]) -> None:
    """The lexical index rows of a batch's units, in order, written as the batch commits (one
    statement per index table for the whole batch)."""
    fts.insert_rows(conn, [row for rows in units for row in rows])


def new_source_id(conn: sqlite3.Connection) -> int | None:
    """A new source's id on PostgreSQL, from the table's sequence (as new_chunk_ids: no wait for the
    insert's reply); None on SQLite, whose insert picks it (a NULL INTEGER PRIMARY KEY)."""
    return conn.new_ids("sources", 1)[0] if fts.on_postgres(conn) else None


def new_chunk_ids(conn: sqlite3.Connection, count: int) -> list[int]:
    """Ids for `count` new chunks, increasing. On SQLite we hold the write lock, so the ids after the
    current maximum are ours; on PostgreSQL writers run side by side and row-level security hides
    other owners' chunks from MAX(id), so the ids come from the table's sequence."""
    if fts.on_postgres(conn):
        return conn.new_ids("chunks", count)
    first = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM chunks").fetchone()[0]
    return list(range(first, first + count))


def utf8_offsets(text: str, positions: list[int]) -> dict[int, int]:
    """The UTF-8 byte offset of each character offset into text, in one pass over it."""
    offsets, done, consumed = {}, 0, 0
    for position in sorted(set(positions)):
        consumed += len(text[done:position].encode("utf-8", "surrogatepass"))
        offsets[position], done = consumed, position
    return offsets


@dataclass
class Failure:
    """A source that could not be read this time; its stored version, if any, is kept."""

    uri: str
    error: CMRAGError


@dataclass
class Skipped:
    """A file with nothing to remember (an empty note): counted, not a failure, and not kept."""

    uri: str


@dataclass
class Unchanged:
    """A file whose size, mtime and extractor match what was stored: not even read again.

    Reading is the expensive part for PDFs and images (OCR takes about a second per image), so
    `mem sync` over a folder of unchanged screenshots must not redo it.
    """

    uri: str


def ingest_documents(
    store: Store,
    items: Iterable[Document | Failure | Unchanged | Skipped],
    known: dict[str, str],
    report: IngestReport,
    progress: Progress | None = None,
    moves: vaults.Moves | None = None,
) -> set[str]:
    """Write every changed document; record failures. Returns the uris seen (stored or failed; a
    moved source's old uri too: it has not gone)."""
    seen: set[str] = set()
    with store.batched(replayable=True) as batch:  # every unit below goes through batch.run
        for item in items:
            _ingest_one(batch, item, known, report, seen, moves)
            if progress:
                progress(report)
    return seen


def _ingest_one(
    batch: WriteBatch,
    item: Document | Failure | Unchanged | Skipped,
    known: dict[str, str],
    report: IngestReport,
    seen: set[str],
    moves: vaults.Moves | None = None,
) -> None:
    if isinstance(item, Skipped):  # not seen: a note emptied since it was stored leaves the memory
        report.empty += 1
        return
    seen.add(item.uri)
    if isinstance(item, Failure):
        report.failures.append(str(item.error))
        return
    if isinstance(item, Unchanged):
        report.unchanged += 1
        return
    if item.metadata.get("notice"):
        report.notices.append(item.metadata["notice"])
    digest = fingerprint(item)
    if known.get(item.uri) == digest:
        report.unchanged += 1
        if "file_stamp" in item.metadata:  # same content, touched file: remember the new stamp
            batch.run(lambda: _restamp(batch, item.uri, item.metadata["file_stamp"]))
        return
    if moves and item.uri not in known and (old_uri := moves.origin(item, seen)):
        moved = batch.run(lambda: move_document(batch, old_uri, item, digest))
        if moved is not None:
            seen.add(old_uri)
            report.moved += 1
            report.chunks += moved
            return
    added, count = batch.run(lambda: write_document(batch, item, digest, unless_stored=True))
    if added is None:  # another writer stored the same meanwhile
        report.unchanged += 1
        return
    report.chunks += count
    report.added += added
    report.updated += not added


def _restamp(batch: WriteBatch, uri: str, stamp: str) -> None:
    with batch.unit() as conn:
        conn.execute("UPDATE sources SET metadata = json_set(metadata, '$.file_stamp', ?) WHERE uri = ?", (stamp, uri))


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


def ingest_notes(
    store: Store,
    roots: list[Path],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    progress: Progress | None = None,
    allow_mass_delete: bool = False,
    confine: bool = False,
) -> IngestReport:
    """Ingest vaults; notes gone from a vault (deleted, renamed, now excluded) leave the memory,
    unless more than half of a vault would go (see remove_gone). `confine`: a note that links to a
    file outside its vault fails instead of being read (connectors/files.py `confined`)."""
    report = IngestReport()
    for root in _outermost(roots, report):
        if not root.is_dir():
            what = "a file, not a vault folder" if root.exists() else "no such folder"
            report.failures.append(f"{root}: {what} (hint: give the vault's folder; nothing was removed)")
            continue
        known = known_fingerprints(store, f"{root}/", "note")
        before = report.read
        vault = vaults.stored_vault(store, root)
        if vault != root:
            report.notices.append(f"{root} is inside the vault {vault}: its notes are read as part of that vault")
        folder_links: list[Path] = []
        items = _read_vault(root, include, exclude, confine, vault, folder_links)
        seen = ingest_documents(store, items, known, report, progress, vaults.Moves(store, root))
        if folder_links:
            report.notices.append(
                f"{root}: {counted(len(folder_links), 'linked folder')} not followed (e.g. {folder_links[0]}; "
                "symbolic links to folders are skipped: ingest the folder itself as a vault)"
            )
        if report.read == before and not known:
            report.notices.append(f"{root}: no notes (.md, .markdown) in it")
        if include and known and not seen:  # a mistyped pattern, not every note deleted
            shown = " ".join(f"--include {pattern!r}" for pattern in include)
            report.failures.append(
                f"{root}: {shown} selects none of its notes (hint: check the pattern; nothing was removed)"
            )
            continue
        # A folder that could not be listed fails as a whole: the notes under it are not gone.
        gone = [uri for uri in known if uri not in seen and not any(str(p) in seen for p in Path(uri).parents)]
        refused = len(gone) * 2 > len(known)  # remove_gone's rule: only then is the cause said
        causes = vaults.why_notes_left(root, gone, include or [], exclude or []) if refused else None
        remove_gone(store, root, gone, len(known), report, allow_mass_delete, causes)
    return report


def _outermost(roots: list[Path], report: IngestReport) -> list[Path]:
    """The vaults resolved, without those inside another one given: read as both, each of their
    notes was rewritten on every run (its locator and vault differ between the two readings)."""
    resolved = list(dict.fromkeys(Path(root).expanduser().resolve() for root in roots))
    kept = []
    for root in resolved:
        outer = next((other for other in resolved if other != root and root.is_relative_to(other)), None)
        if outer is None:
            kept.append(root)
        else:
            report.notices.append(f"{root} is inside {outer}: its notes are read as part of that vault")
    return kept


def ingest_pdfs(
    store: Store,
    paths: list[Path],
    progress: Progress | None = None,
    ocr_engine: str = "rapidocr",
    allow_mass_delete: bool = False,
    confine: bool = False,
) -> IngestReport:
    """Ingest PDF files or folders of them (`confine` as for notes). Raises MissingExtraError without
    the pdf extra."""
    from crossmodalrag.connectors import pdf

    version = pdf.extractor_version_or_raise(ocr_engine)
    read = partial(pdf.read_pdf, ocr_engine=ocr_engine)
    return _ingest_files(store, paths, "pdf", pdf.find_pdfs, read, progress, version, allow_mass_delete, confine)


def ingest_images(
    store: Store,
    paths: list[Path],
    progress: Progress | None = None,
    engine: str = "rapidocr",
    allow_mass_delete: bool = False,
    confine: bool = False,
) -> IngestReport:
    """OCR images (files or folders; `confine` as for notes). Raises MissingExtraError without the
    chosen engine."""
    from crossmodalrag.connectors import images

    version = images.extractor_version(engine)
    read = partial(images.read_image, engine=engine)
    return _ingest_files(store, paths, "image", images.find_images, read, progress, version, allow_mass_delete, confine)


def _ingest_files(
    store: Store,
    paths: list[Path],
    kind: str,
    find: Callable[[Path], Iterable[Path]],
    read: Callable[[Path], Document],
    progress: Progress | None,
    extractor: str,
    allow_mass_delete: bool = False,
    confine: bool = False,
) -> IngestReport:
    """Files or folders of one kind (a source type); files of that kind gone from an ingested folder
    leave the memory."""
    report = IngestReport()
    for path in paths:
        path = Path(path).expanduser().resolve()
        if not path.exists():
            report.failures.append(f"{path}: no such file or folder (hint: check the path; nothing was removed)")
            continue
        prefix = f"{path}/" if path.is_dir() else str(path)
        known = known_fingerprints(store, prefix, kind)
        reader = confined(read, path) if confine else read
        items = _read_changed(find(path), reader, known_file_stamps(store, prefix, kind), extractor)
        before = report.read
        seen = ingest_documents(store, items, known, report, progress)
        if report.read == before and not known:
            report.notices.append(f"{path}: no {kind} files in it")
        if not path.is_dir():
            known = {}  # a single file: nothing else under it can have gone
        # A file the walk skips but still on disk was ingested by its own path (a hidden file, another
        # extension): it has not gone.
        gone = [uri for uri in known if uri not in seen and not Path(uri).is_file()]
        remove_gone(store, path, gone, len(known), report, allow_mass_delete)
    return report


def _noting_gaps(
    commits: Iterable[Document], known: dict, oversized: list[str], shallow: list[str], selecting: list[str]
) -> Iterator[Document]:
    """The commits as they come, noting the files of new ones whose diffs were too large to store,
    the shallow clone's oldest commits, whose diffs git cannot tell, and those that changed a file
    the globs select (`selecting`)."""
    for commit in commits:
        if commit.metadata.get("files"):
            selecting.append(commit.uri)
        if commit.uri not in known:
            oversized.extend(commit.metadata.get("skipped_files", []))
        if commit.metadata.get("_shallow_boundary"):
            shallow.append(commit.metadata["sha"])
        yield commit


def _shallow_notice(root: Path, shallow: list[str]) -> str:
    example = shallow[0][:7]
    oldest = f"commit {example} is" if len(shallow) == 1 else f"{len(shallow)} commits (e.g. {example}) are"
    return (
        f"{root}: a shallow clone: its oldest {oldest} stored without a diff, git not having the parent to "
        "compare with (hint: run `git fetch --unshallow` in the repository, then ingest it again)"
    )


def _remove_dropped_commits(
    store: Store, root: Path, known: dict[str, str], seen: set[str], left_out: list[str], report: IngestReport
) -> None:
    """Remove stored commits the globs now leave out (a first ingest with them would not store them),
    and those no branch, tag or HEAD reaches any more. A commit only another branch reaches stays: it
    is still the repository's history, and a linked work tree's branch adds its commits under the same name."""
    filtered = [uri for uri in left_out if uri in known]
    unseen = {uri.rpartition("@")[2]: uri for uri in known if uri not in seen and uri not in filtered}
    gone = [unseen[sha] for sha in git.unreachable(root, list(unseen))]
    if filtered or gone:
        report.removed += remove_sources(store, filtered + gone)


def known_file_stamps(store: Store, uri_prefix: str, source_type: str) -> dict[str, str]:
    """uri → "size:mtime_ns:extractor" of stored files of this kind whose uri starts with the prefix."""
    rows = store.conn.execute(
        "SELECT uri, json_extract(metadata, '$.file_stamp') FROM sources WHERE uri >= ? AND uri < ?"
        " AND source_type = ?",
        (uri_prefix, uri_prefix + "\U0010ffff", source_type),
    )
    return {uri: stamp for uri, stamp in rows if stamp}


def _read_changed(
    paths: Iterable[Path], read: Callable[[Path], Document], stamps: dict[str, str], extractor: str
) -> Iterable[Document | Failure | Unchanged]:
    """Read only files whose stamp differs from the stored one; the stamp is taken before reading,
    so a file written during the read is simply read again next time."""
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            stat = None
        stamp = f"{stat.st_size}:{stat.st_mtime_ns}:{extractor}" if stat else None
        if stamp and stamps.get(str(path)) == stamp:
            yield Unchanged(str(path))
            continue
        for item in _read_each([path], read):
            if stamp and isinstance(item, Document):
                item.metadata["file_stamp"] = stamp
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


def _read_vault(
    root: Path,
    include: list[str] | None,
    exclude: list[str] | None,
    confine: bool = False,
    vault: Path | None = None,
    folder_links: list[Path] | None = None,
) -> Iterable[Document | Failure]:
    """The notes under root, each read as a note of `vault` (root itself unless it lies inside one);
    symlinked folders skipped are added to `folder_links`."""
    read = partial(notes.read_note, vault or root)
    found = notes.find_notes(root, include or [], exclude or [], folder_links)
    return _read_each(found, confined(read, root) if confine else read)


def ingest_git(
    store: Store,
    repos: list[Path],
    max_commits: int | None = None,
    author: str | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest commits of each repository; a bad path fails alone and the others still ingest.
    Stored commits that no branch or tag reaches any more (amended, rebased, a branch deleted)
    leave the memory: rewriting history is how people take a leaked secret out of a repository. So
    do those the include/exclude globs now leave out: the same globs give the same memory whatever
    was ingested before."""
    report = IngestReport()
    for repo in repos:
        try:
            root = git.repository_root(Path(repo).expanduser().resolve())
            name = git.stored_name(root)
            known = known_fingerprints(store, f"{name}@", "commit")
            oversized: list[str] = []
            shallow: list[str] = []
            left_out: list[str] = []
            selecting: list[str] = []
            commits = git.read_commits(root, max_commits, author, include, exclude, name, left_out)
            before = report.read
            noted = _noting_gaps(commits, known, oversized, shallow, selecting)
            seen = ingest_documents(store, noted, known, report, progress)
            if left_out and not selecting and any(uri in known for uri in left_out):
                # a mistyped pattern, not every change to go: as ingest-notes refuses one selecting no note
                patterns = [f"--include {p!r}" for p in include or []] + [f"--exclude {p!r}" for p in exclude or []]
                report.failures.append(
                    f"{root}: {' '.join(patterns)} select none of its commits "
                    "(hint: check the patterns; nothing was removed)"
                )
                continue
            if report.read == before:
                report.notices.append(f"{root}: no commits" + (f" by {author!r}" if author else "") + " to read")
            if oversized:
                report.notices.append(
                    f"{root}: the diffs of {counted(len(oversized), 'changed file')} over "
                    f"{git.MAX_FILE_DIFF_CHARS:,} characters were left out, their names kept (e.g. {oversized[0]})"
                )
            if shallow:
                report.notices.append(_shallow_notice(root, shallow))
            _remove_dropped_commits(store, root, known, seen, left_out, report)
        except CMRAGError as error:
            report.failures.append(str(error))
            if progress:
                progress(report)
    return report
