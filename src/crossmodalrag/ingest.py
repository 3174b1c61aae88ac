"""Connector → chunks → store → FTS index, each source one unit of a write batch (the sources of
~0.25 s share a commit; store.batched).

Each source is fingerprinted (content, title and CHUNKER_VERSION): an unchanged source is skipped,
a changed one is re-chunked in place. A crash between sources leaves every committed source whole
and no half-written one. Notes that left a vault are removed on the next ingest of that vault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

from crossmodalrag import vaults, versioning
from crossmodalrag.connectors import git, notes
from crossmodalrag.connectors.files import check_name, confined
from crossmodalrag.errors import CMRAGError
from crossmodalrag.file_moves import (
    FileMoves,
    StoredFile,
    file_sha256,
    hash_to_keep,
    known_files,
    regular_file_stat,
    unsettled,
    unsettled_stamp,
)
from crossmodalrag.repository_moves import RepositoryMoves
from crossmodalrag.store import Store, documents
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


def ingest_notes(
    store: Store,
    roots: list[Path],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    progress: Progress | None = None,
    allow_mass_delete: bool = False,
    confine: bool = False,
    only: Path | None = None,
) -> IngestReport:
    """Ingest vaults; notes gone from a vault (deleted, renamed, now excluded) leave the memory,
    unless more than half of a vault would go (see remove_gone). `confine`: a note that links to a
    file outside its vault fails instead of being read (connectors/files.py `confined`). `only`: a
    note or folder inside the vault given: just its notes are read, and just those gone from it
    leave, each as the whole vault's ingest reads it (its locator, the vault's globs)."""
    report = IngestReport()
    leaving: list[tuple[Path, list[str], int]] = []  # (vault, its notes gone, how many it held)
    for root in _outermost(roots, report):
        if not root.is_dir():
            what = "a file, not a vault folder" if root.exists() else "no such folder"
            report.failures.append(f"{root}: {what} (hint: give the vault's folder; nothing was removed)")
            continue
        known = _within(known_fingerprints(store, f"{root}/", "note"), only)
        before = report.read
        vault = vaults.stored_vault(store, root)
        if vault != root:
            report.notices.append(f"{root} is inside the vault {vault}: its notes are read as part of that vault")
        folder_links: list[Path] = []
        stamped = _within(known_files(store, f"{root}/", "note"), only)
        items = _read_vault(root, include, exclude, confine, vault, folder_links, stamped, only)
        seen = ingest_documents(store, items, known, report, progress, vaults.Moves(store))
        if folder_links:
            report.notices.append(
                f"{root}: {counted(len(folder_links), 'linked folder')} not followed (e.g. {folder_links[0]}; "
                "symbolic links to folders are skipped: ingest the folder itself as a vault)"
            )
        nothing_in_it = report.read == before and not known
        # A mistyped pattern, not every note deleted; on a first ingest, not a vault without notes.
        if include and not seen and (known or (nothing_in_it and _holds_notes(root))):
            shown = " ".join(f"--include {pattern!r}" for pattern in include)
            report.failures.append(
                f"{root}: {shown} selects none of its notes (hint: check the pattern; nothing was removed)"
            )
            continue
        if nothing_in_it:
            report.notices.append(f"{root}: no notes (.md, .markdown) in it")
        # A folder that could not be listed fails as a whole: the notes under it are not gone.
        gone = [uri for uri in known if uri not in seen and not any(str(p) in seen for p in Path(uri).parents)]
        leaving.append((root, gone, len(known)))
    for root, gone, stored in leaving:
        gone = _still_stored(store, f"{root}/", "note", gone)
        refused = len(gone) * 2 > stored  # remove_gone's rule: only then is the cause said
        causes = vaults.why_notes_left(root, gone, include or [], exclude or []) if refused else None
        remove_gone(store, root, gone, stored, report, allow_mass_delete, causes)
    return report


def _within(stored: dict[str, Any], only: Path | None) -> dict[str, Any]:
    """The stored notes (by uri) at or under `only`; all of them without it."""
    if only is None:
        return stored
    return {uri: value for uri, value in stored.items() if uri == str(only) or uri.startswith(f"{only}/")}


def _still_stored(store: Store, prefix: str, kind: str, gone: list[str]) -> list[str]:
    """The sources gone from a folder that are still stored under their old uri once every folder of
    the run was read: one moved to a folder read after its own is met there as a move (it keeps its id)
    only if its own folder's removals wait until then."""
    stored = known_fingerprints(store, prefix, kind) if gone else {}
    return [uri for uri in gone if uri in stored]


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
    from crossmodalrag.connectors import images, pdf

    version = pdf.extractor_version_or_raise(ocr_engine)
    read_by = _file_extractor(f"pdf-reader {pdf.READER_VERSION} ocr-reader {images.READER_VERSION}", version)
    read = partial(pdf.read_pdf, ocr_engine=ocr_engine)
    return _ingest_files(store, paths, "pdf", pdf.find_pdfs, read, progress, read_by, allow_mass_delete, confine)


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

    read_by = _file_extractor(f"ocr-reader {images.READER_VERSION}", images.extractor_version(engine))
    read = partial(images.read_image, engine=engine)
    heic: list[Path] = []
    find = partial(images.find_images, unsupported=heic)
    report = _ingest_files(store, paths, "image", find, read, progress, read_by, allow_mass_delete, confine)
    if heic:
        report.notices.append(images.heic_notice(heic))
    return report


def _file_extractor(readers: str, version: str) -> str:
    """What besides a file's bytes decides what is stored of it, for its stamp: our readers' versions,
    the libraries' (`version`, in the fingerprint too) and the chunker. Without the first and the last,
    an upgraded reader or chunker never re-read an unchanged PDF or image."""
    return f"{readers} {version} chunker {documents.CHUNKER_VERSION}"


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
    leaving: list[tuple[Path, str, list[str], int]] = []  # (folder, its uri prefix, files gone, how many it held)
    for path in paths:
        path = Path(path).expanduser().resolve()
        if missing := _not_there(path):
            report.failures.append(missing)
            continue
        prefix = f"{path}/" if path.is_dir() else str(path)
        known = known_fingerprints(store, prefix, kind)
        reader = confined(read, path) if confine else read
        items = _read_changed(find(path), reader, known_files(store, prefix, kind), extractor)
        before = report.read
        seen = ingest_documents(store, items, known, report, progress, FileMoves(store, kind))
        if report.read == before and not known:
            report.notices.append(f"{path}: no {kind} files in it")
        if not path.is_dir():
            known = {}  # a single file: nothing else under it can have gone
        gone = [uri for uri in known if uri not in seen and not _kept(uri, seen)]
        leaving.append((path, prefix, gone, len(known)))
    for path, prefix, gone, stored in leaving:  # once every folder was read (_still_stored)
        remove_gone(store, path, _still_stored(store, prefix, kind, gone), stored, report, allow_mass_delete)
    return report


def _not_there(path: Path) -> str | None:
    """Why a path given to ingest cannot be read at all (a failure's message), or None."""
    try:
        if path.exists():
            return None
    except OSError as exc:  # a folder above it unreadable
        return f"{path}: cannot read ({exc.strerror}) (hint: check the permissions of the folders above it)"
    return f"{path}: no such file or folder (hint: check the path; nothing was removed)"


def _kept(uri: str, seen: set[str]) -> bool:
    """Whether a stored file the walk did not read is still there: under a folder that could not be
    listed (its failure is in `seen`), or on disk, ingested by its own path (a hidden file, another
    extension). One that cannot be looked at (a folder above it unreadable) is kept: not gone."""
    if any(str(parent) in seen for parent in Path(uri).parents):
        return True
    try:
        return Path(uri).is_file()
    except OSError:
        return True


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


def _holds_notes(root: Path) -> bool:
    """Does the folder hold any note, whatever --include and --exclude select? Stops at the first."""
    return next(notes.find_notes(root, [], []), None) is not None


def _read_vault(
    root: Path,
    include: list[str] | None,
    exclude: list[str] | None,
    confine: bool = False,
    vault: Path | None = None,
    folder_links: list[Path] | None = None,
    stamped: dict[str, StoredFile] | None = None,
    only: Path | None = None,
) -> Iterable[Document | Failure | Unchanged | Skipped]:
    """The notes under root, each read as a note of `vault` (root itself unless it lies inside one);
    symlinked folders skipped are added to `folder_links`. Notes whose file stamp matches the one
    `stamped` holds are not read again: a save under `mem sync --watch` re-parsed the whole vault.
    `only`: just the notes at or under it (the whole vault is listed: its globs are the vault's)."""
    vault = vault or root
    read = partial(notes.read_note, vault)
    found = notes.find_notes(root, include or [], exclude or [], folder_links)
    if only is not None:  # a folder above `only` that could not be listed is kept: it fails, nothing is gone
        found = (path for path in found if path == only or only in path.parents or path in only.parents)
    reader = confined(read, root) if confine else read
    return _read_changed(found, reader, stamped or {}, _note_extractor(vault), notes_mode=True)


def _note_extractor(vault: Path) -> str:
    """What besides a note's bytes decides what is stored of it, for its file stamp: the reader, the
    chunker the fingerprint names, and the vault it is read in (its locator is relative to that)."""
    return f"note-reader {notes.READER_VERSION} chunker {documents.CHUNKER_VERSION} vault {vault}"


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
    from crossmodalrag import repositories  # it builds on this module's reports and removals

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
            commits = repositories.read_repository(
                store, root, name, known, (max_commits, author, include, exclude), left_out
            )
            before = report.read
            noted = repositories.noting_gaps(commits, known, oversized, shallow, selecting)
            seen = ingest_documents(store, noted, known, report, progress, RepositoryMoves(store))
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
                report.notices.append(repositories.shallow_notice(root, shallow))
            repositories.remove_dropped_commits(store, root, known, seen, left_out, report)
        except CMRAGError as error:
            report.failures.append(str(error))
            if progress:
                progress(report)
    return report
