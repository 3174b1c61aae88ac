"""`ingest_notes`: vaults of markdown notes, apart from the other connectors' ingest."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Iterable

from crossmodalrag import vaults
from crossmodalrag.connectors import globs, notes, obsidian
from crossmodalrag.connectors.files import confined
from crossmodalrag.file_moves import StoredFile, known_files
from crossmodalrag.ingest.reading import _read_changed
from crossmodalrag.ingest.report import Failure, IngestReport, Progress, Skipped, Unchanged
from crossmodalrag.ingest.storing import _still_stored, ingest_documents, remove_gone
from crossmodalrag.store import Store, documents
from crossmodalrag.store.documents import known_fingerprints
from crossmodalrag.types import Document
from crossmodalrag.wording import counted


def ingest_notes(
    store: Store,
    roots: list[Path],
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    progress: Progress | None = None,
    allow_mass_delete: bool = False,
    confine: bool = False,
    only: Path | None = None,
    say_unmatched_globs: bool = False,
) -> IngestReport:
    """Ingest vaults; notes gone from a vault (deleted, renamed, now excluded) leave the memory,
    unless more than half of a vault would go (see remove_gone). `confine`: a note that links to a
    file outside its vault fails instead of being read (connectors/files.py `confined`). `only`: a
    note or folder inside the vault given: just its notes are read, and just those gone from it
    leave, each as the whole vault's ingest reads it (its locator, the vault's globs).
    `say_unmatched_globs`: a notice names each pattern that matches none of a vault's notes (those
    typed as --include/--exclude; configured ones serve many vaults, and would repeat it every sync)."""
    report = IngestReport()
    leaving: list[tuple[Path, list[str], int, list[str]]] = []  # (vault, its notes gone, how many it held, excludes)
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
        canvases: list[Path] = []
        stamped = _within(known_files(store, f"{root}/", "note"), only)
        left_out = [*(exclude or []), *_templates_left_out(root, vault, report, known)]
        items = _read_vault(root, include, left_out, confine, vault, folder_links, stamped, only, canvases)
        seen = ingest_documents(store, items, known, report, progress, vaults.Moves(store))
        if folder_links:
            report.notices.append(
                f"{root}: {counted(len(folder_links), 'linked folder')} not followed (e.g. {folder_links[0]}; "
                "symbolic links to folders are skipped: ingest the folder itself as a vault)"
            )
        if canvases:
            report.notices.append(
                f"{root}: {counted(len(canvases), 'canvas file')} not read (e.g. {canvases[0].name}; "
                "Obsidian canvases are not notes: keep what should be remembered in a note)"
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
        for flag, pattern in _matching_nothing(root, include or [], exclude or []) if say_unmatched_globs else ():
            report.notices.append(
                f"{root}: {flag} {pattern!r} matches none of its notes (hint: paths are relative to the vault;"
                " `private` or `private/` is that folder at any depth, `/private` the one at the top)"
            )
        # A folder that could not be listed fails as a whole: the notes under it are not gone.
        gone = [uri for uri in known if uri not in seen and not any(str(p) in seen for p in Path(uri).parents)]
        leaving.append((root, gone, len(known), left_out))
    for root, gone, stored, left_out in leaving:
        gone = _still_stored(store, f"{root}/", "note", gone)
        refused = len(gone) * 2 > stored  # remove_gone's rule: only then is the cause said
        causes = vaults.why_notes_left(root, gone, include or [], left_out) if refused else None
        remove_gone(store, root, gone, stored, report, allow_mass_delete, causes)
    return report


def _within(stored: dict[str, Any], only: Path | None) -> dict[str, Any]:
    """The stored notes (by uri) at or under `only`; all of them without it."""
    if only is None:
        return stored
    return {uri: value for uri, value in stored.items() if uri == str(only) or uri.startswith(f"{only}/")}


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


def _templates_left_out(root: Path, vault: Path, report: IngestReport, known: dict[str, str]) -> list[str]:
    """Exclude patterns (relative to root) for the vault's configured templates folders, which hold
    templates, not notes: stored, `{{title}}` was found among the notes. Said on a vault's first
    ingest, and when templates stored before leave the memory."""
    patterns = []
    for folder in obsidian.templates_folders(vault):
        where = vault / folder
        if where.is_dir() and where != root and where.is_relative_to(root):
            patterns.append(f"/{where.relative_to(root).as_posix()}/")
            if not known or any(uri.startswith(f"{where}/") for uri in known):
                report.notices.append(
                    f"{root}: {folder}/ is not read: it is Obsidian's templates folder (set in {vault}/.obsidian)"
                )
    return patterns


def _matching_nothing(root: Path, include: list[str], exclude: list[str]) -> list[tuple[str, str]]:
    """(flag, pattern) of each --include and --exclude that matches none of the vault's notes: an
    exclude that keeps nothing out looks just like one that worked, and private notes were stored."""
    waiting = [("--include", pattern) for pattern in include] + [("--exclude", pattern) for pattern in exclude]
    for path in notes.find_notes(root, [], []) if waiting else ():
        relative = path.relative_to(root).as_posix()
        waiting = [(flag, pattern) for flag, pattern in waiting if not globs.matches(relative, pattern)]
        if not waiting:
            break
    return waiting


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
    canvases: list[Path] | None = None,
) -> Iterable[Document | Failure | Unchanged | Skipped]:
    """The notes under root, each read as a note of `vault` (root itself unless it lies inside one);
    symlinked folders skipped are added to `folder_links`, canvases to `canvases`. Notes whose file
    stamp matches the one `stamped` holds are not read again: a save under `mem sync --watch` re-parsed the whole vault.
    `only`: just the notes at or under it (the whole vault is listed: its globs are the vault's)."""
    vault = vault or root
    read = partial(notes.read_note, vault)
    found = notes.find_notes(root, include or [], exclude or [], folder_links, canvases)
    if only is not None:  # a folder above `only` that could not be listed is kept: it fails, nothing is gone
        found = (path for path in found if path == only or only in path.parents or path in only.parents)
    reader = confined(read, root) if confine else read
    return _read_changed(found, reader, stamped or {}, _note_extractor(vault), notes_mode=True)


def _note_extractor(vault: Path) -> str:
    """What besides a note's bytes decides what is stored of it, for its file stamp: the reader, the
    chunker the fingerprint names, and the vault it is read in (its locator is relative to that)."""
    return f"note-reader {notes.READER_VERSION} chunker {documents.CHUNKER_VERSION} vault {vault}"
