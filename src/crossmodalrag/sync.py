"""`mem sync`: re-ingest every configured connector in one incremental pass.

Each connector runs through its own ingest function, so unchanged sources are fingerprint-skipped
and sources whose files are gone leave the memory. One connector's trouble (a bad path, a missing
extra) is reported in its part of the report and never stops the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from crossmodalrag import ingest, versioning
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.ingest import IngestReport
from crossmodalrag.left_behind import left_behind_notices
from crossmodalrag.store import Store

CONNECTORS = ("notes", "git", "pdf", "image", "chat")
PATH_SETTINGS = {
    "notes": "notes_paths",
    "git": "git_paths",
    "pdf": "pdf_paths",
    "image": "image_paths",
    "chat": "chat_paths",
}
VARIABLES = {
    "notes": "OBSIDIAN_VAULT_PATH",
    "git": "REPO_PATH",
    "pdf": "PDF_PATH",
    "image": "IMAGE_PATH",
    "chat": "CHAT_PATH",
}
TOML_KEYS = {"notes": "notes", "git": "git", "pdf": "pdf", "image": "images", "chat": "chats"}
COUNTS = ("added", "updated", "unchanged", "removed", "moved", "empty", "chunks")


@dataclass
class ConnectorSync:
    """One connector's part of a sync: its paths and counts, or why it was skipped."""

    connector: str
    paths: list[Path]
    report: IngestReport = field(default_factory=IngestReport)
    skipped: str | None = None  # the missing extra, with the install hint

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        return "failed" if self.report.failed else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "paths": [str(path) for path in self.paths],
            **self.report.to_dict(),
            "skipped": self.skipped,
        }


@dataclass
class SyncReport:
    """Every connector's result, in the order they ran."""

    connectors: list[ConnectorSync] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(part.report.failed for part in self.connectors)

    @property
    def total(self) -> IngestReport:
        combined = IngestReport()
        for part in self.connectors:
            add_report(combined, part.report)
        return combined

    def to_dict(self) -> dict[str, Any]:
        return {**self.total.to_dict(), "connectors": {part.connector: part.to_dict() for part in self.connectors}}


class SyncProgress(Protocol):
    """Live counts while a connector ingests, and its result when it is done."""

    def step(self, connector: str, report: IngestReport) -> None: ...

    def done(self, result: ConnectorSync) -> None: ...


def add_report(total: IngestReport, part: IngestReport) -> IngestReport:
    """Add part's counts, failures and notices to total; returns total."""
    for name in COUNTS:
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.failures += part.failures
    total.notices += part.notices
    return total


def configured_paths(settings: Settings, only: tuple[str, ...] | list[str] = ()) -> dict[str, list[Path]]:
    """Connector → its configured paths (deduplicated), for the selected connectors.

    Raises CMRAGError when none of the selected connectors has a path.
    """
    chosen = [name for name in CONNECTORS if not only or name in only]
    found = {}
    for name in chosen:
        paths = list(dict.fromkeys(Path(p).expanduser().resolve() for p in getattr(settings, PATH_SETTINGS[name])))
        if paths:
            found[name] = paths
    if found:
        return found
    if only:
        variables = ", ".join(f"{VARIABLES[name]}_1" for name in chosen)
        keys = ", ".join(TOML_KEYS[name] for name in chosen)
        raise CMRAGError(
            f"nothing to sync: no {' or '.join(chosen)} connector is configured",
            f"set {variables} in .env, or {keys} under [connectors] in crossmodalrag.toml",
        )
    raise CMRAGError(
        "nothing to sync: no connector is configured",
        "set OBSIDIAN_VAULT_PATH_1, REPO_PATH_1, PDF_PATH_1 or IMAGE_PATH_1 in .env,"
        " or notes/git/pdf/images lists under [connectors] in crossmodalrag.toml",
    )


def git_commit_limit(settings: Settings, max_commits: int | None) -> int | None:
    """The newest N commits per repository: the flag, else the setting; 0 means all (None)."""
    limit = settings.git_max_commits if max_commits is None else max_commits
    return limit or None


def run_ingest(
    store: Store,
    settings: Settings,
    connector: str,
    paths: list[Path],
    max_commits: int | None = None,
    progress: ingest.Progress | None = None,
    allow_mass_delete: bool = False,
) -> IngestReport:
    """One connector's ingest with the configured globs and OCR engine. Raises MissingExtraError."""
    if connector == "notes":
        include, exclude = settings.notes_include, settings.notes_exclude
        return ingest.ingest_notes(store, paths, include, exclude, progress, allow_mass_delete)
    if connector == "git":
        limit = git_commit_limit(settings, max_commits)
        return ingest.ingest_git(store, paths, limit, None, settings.git_include, settings.git_exclude, progress)
    if connector == "pdf":
        return ingest.ingest_pdfs(store, paths, progress, settings.ocr_engine, allow_mass_delete)
    if connector == "image":
        return ingest.ingest_images(store, paths, progress, settings.ocr_engine, allow_mass_delete)
    if connector == "chat":  # sessions that grew are re-read incrementally (conversations.py)
        from crossmodalrag.conversations import ingest_conversations

        return ingest_conversations(store, paths, progress)
    raise CMRAGError(f"unknown connector {connector!r}", f"use one of {', '.join(CONNECTORS)}")


def sync_connector(
    store: Store,
    settings: Settings,
    connector: str,
    paths: list[Path],
    max_commits: int | None = None,
    progress: Callable[[IngestReport], None] | None = None,
    allow_mass_delete: bool = False,
) -> ConnectorSync:
    """Ingest one connector's paths; a missing extra skips it, any other failure is recorded."""
    result = ConnectorSync(connector, paths)
    try:
        result.report = run_ingest(store, settings, connector, paths, max_commits, progress, allow_mass_delete)
        result.report.notices += left_behind_notices(store, connector, paths)
    except MissingExtraError as error:
        result.skipped = str(error)
        result.report.notices.append(f"{connector} skipped: {error}")
    except CMRAGError as error:
        result.report.failures.append(str(error))
    return result


def sync(
    store: Store,
    settings: Settings,
    only: tuple[str, ...] | list[str] = (),
    max_commits: int | None = None,
    progress: SyncProgress | None = None,
    allow_mass_delete: bool = False,
) -> SyncReport:
    """Every configured connector (or those in `only`), in one pass. Raises CMRAGError if none is configured."""
    report = SyncReport()
    with versioning.acting(store.conn, "sync"):
        for connector, paths in configured_paths(settings, only).items():
            step = (lambda counts, name=connector: progress.step(name, counts)) if progress else None
            result = sync_connector(store, settings, connector, paths, max_commits, step, allow_mass_delete)
            report.connectors.append(result)
            if progress:
                progress.done(result)
    return report
