"""`ingest_pdfs` and `ingest_images`: files or folders of one kind, apart from notes and git."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Iterable, Iterator

from crossmodalrag.connectors.files import confined
from crossmodalrag.file_moves import FileMoves, known_files
from crossmodalrag.ingest.reading import _read_changed
from crossmodalrag.ingest.report import IngestReport, Progress
from crossmodalrag.ingest.storing import _still_stored, ingest_documents, remove_gone
from crossmodalrag.store import Store, documents
from crossmodalrag.store.documents import known_fingerprints
from crossmodalrag.types import Document


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
    read_before: set[str] = set()  # files read for an earlier path of this run
    for path in paths:
        path = Path(path).expanduser().resolve()
        if missing := _not_there(path):
            report.failures.append(missing)
            continue
        prefix = f"{path}/" if path.is_dir() else str(path)
        known = known_fingerprints(store, prefix, kind)
        reader = confined(read, path) if confine else read
        again: set[str] = set()
        found = _not_read_yet(find(path), read_before, again)
        items = _read_changed(found, reader, known_files(store, prefix, kind), extractor)
        before = report.read
        seen = ingest_documents(store, items, known, report, progress, FileMoves(store, kind)) | again
        read_before |= seen
        if report.read == before and not known and not again:
            report.notices.append(f"{path}: no {kind} files in it")
        if not path.is_dir():
            known = {}  # a single file: nothing else under it can have gone
        gone = [uri for uri in known if uri not in seen and not _kept(uri, seen)]
        leaving.append((path, prefix, gone, len(known)))
    for path, prefix, gone, stored in leaving:  # once every folder was read (_still_stored)
        remove_gone(store, path, _still_stored(store, prefix, kind, gone), stored, report, allow_mass_delete)
    return report


def _not_read_yet(found: Iterable[Path], read_before: set[str], again: set[str]) -> Iterator[Path]:
    """The files found that no earlier path of this run read (those go to `again`, seen but not read):
    `ingest-pdf spec.pdf papers/` read spec.pdf twice and counted one file as two."""
    for path in found:
        if str(path) in read_before:
            again.add(str(path))
        else:
            yield path


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
