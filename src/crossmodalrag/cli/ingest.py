"""`mem ingest-*`, `mem seed-sample` and embedding new chunks (sync reuses it): the commands that write sources."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.progress import EmbedProgress, ProgressLine
from crossmodalrag.cli.render import print_json
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport


def _finish_ingest(args: argparse.Namespace, report: "IngestReport", progress: ProgressLine, store: Store) -> int:
    """Embed what is new (when a model is available), print per-item errors and the summary."""
    progress.clear()  # errors must not land after a half-drawn progress line
    for failure in report.failures:
        notice(f"error: {failure}")
    for message in report.notices:
        notice(f"note: {message}")
    progress.finish(report)
    if report.removed:
        note_orphaned_events(store)
    embedded = embed_new_chunks(store, _settings(args)) if embedding_due(store, report.chunks) else None
    if args.json:
        print_json({**report.to_dict(), "embedded": embedded.chunks if embedded else 0})
    return 1 if report.failed else 0


def note_orphaned_events(store: Store) -> None:
    """After an ingest or sync removed sources: say how many memory events lost theirs (every command alike)."""
    from crossmodalrag.memory.stats import events_with_source_gone

    orphans = events_with_source_gone(store.conn)
    if orphans:
        lost = "1 memory event lost its source" if orphans == 1 else f"{orphans} memory events lost their source"
        notice(f"note: {lost}; `mem build-memory` lists and removes them")


def embedding_due(store: Store, new_chunks: int) -> bool:
    """Whether to embed after a run: new chunks, or chunks an interrupted run left without vectors (the
    same ingest again found every file unchanged and left them so until a sync)."""
    from crossmodalrag.index.embeddings import has_unembedded

    return bool(new_chunks) or has_unembedded(store)


def embed_new_chunks(store: Store, settings: Settings):
    """Embed chunks without vectors when the embeddings extra and a model are available."""
    from crossmodalrag.retrieval.semantic import embeddings_installed, model_missing

    if not embeddings_installed():
        return None
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing, unembedded_count
    from crossmodalrag.index.models import ModelUnavailable
    from crossmodalrag.wording import counted

    try:
        embedder = load_embedder(settings)
    except ModelUnavailable as error:
        # Counted, not "new chunks": a sync that changed nothing still tries the chunks left without vectors.
        waiting = counted(unembedded_count(store), "chunk")
        have = "has" if waiting.startswith("1 ") else "have"
        notice(f"note: {waiting} {have} no vectors yet: {model_missing(store, settings, error)}")
        return None
    progress = EmbedProgress()
    report = embed_missing(store, embedder, settings.embed_batch_size, progress, progress.waiting)
    progress.finish(report)
    return report


def seed_sample(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import IngestReport
    from crossmodalrag.sample.seed import seed_sample as seed

    settings = _settings(args)
    workspace = args.workspace_dir or settings.db_path.parent / "sample"
    progress = ProgressLine("seed-sample")
    with _open(settings) as store:
        report = seed(store, workspace, force=args.force, progress=progress)
        embedded = embed_new_chunks(store, settings)
        where = store.location
    for message in report.notices:
        notice(f"note: {message}")
    combined = IngestReport()
    for part in (report.notes, report.git, *report.files):
        if part:
            for name in ("added", "updated", "unchanged", "removed", "moved", "chunks"):
                setattr(combined, name, getattr(combined, name) + getattr(part, name))
            combined.failures += part.failures
    if args.json:  # as `mem sync --json` says it: the chunks given vectors (0 without a model)
        print_json({**report.to_dict(), "embedded": embedded.chunks if embedded else 0})
    progress.finish(combined)
    notice(
        f"sample written to {report.workspace}; {report.queries} eval queries loaded into {where}.\n"
        'next: mem eval --query-prefix "[sample]"   or   mem ask "Why did I change the parser?" --no-llm'
    )
    return 1 if combined.failed else 0


def _paths(given: list[Path], configured: list[Path], what: str, variable: str) -> list[Path]:
    """The paths to ingest. When none of them exists (a mistyped path), an error before the database
    is opened: the failed ingest used to leave a new, empty database behind."""
    paths = given or configured
    if not paths:
        raise CMRAGError(
            f"no {what} given", f"pass paths, or set {variable}_1 in .env or [connectors] in crossmodalrag.toml"
        )
    if not any(_exists(path) for path in paths):
        more = f" (and {len(paths) - 1} more paths, none of them there either)" if len(paths) > 1 else ""
        raise CMRAGError(
            f"{paths[0].expanduser()}: no such file or folder{more}", "check the path; nothing was stored or removed"
        )
    return paths


def _exists(path: Path) -> bool:
    """Whether a path is there, or cannot be looked at (the ingest then says why for that path)."""
    try:
        return path.expanduser().exists()
    except OSError:
        return True


def ingest_notes(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import ingest_notes as ingest

    settings = _settings(args)
    roots = _paths(args.paths, settings.notes_paths, "vault folders", "OBSIDIAN_VAULT_PATH")
    progress = ProgressLine("ingest-notes")
    with _open(settings) as store:
        include, exclude = args.include or settings.notes_include, args.exclude or settings.notes_exclude
        typed = bool(args.include or args.exclude)
        report = ingest(store, roots, include, exclude, progress, args.allow_mass_delete, say_unmatched_globs=typed)
        return _finish_ingest(args, report, progress, store)


def ingest_git(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import ingest_git as ingest

    settings = _settings(args)
    repos = _paths(args.paths, settings.git_paths, "repositories", "REPO_PATH")
    max_commits = settings.git_max_commits if args.max_commits is None else args.max_commits
    progress = ProgressLine("ingest-git")
    with _open(settings) as store:
        report = ingest(
            store,
            repos,
            max_commits or None,
            args.author,
            args.include or settings.git_include,
            args.exclude or settings.git_exclude,
            progress,
        )
        return _finish_ingest(args, report, progress, store)


def ingest_pdf(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import ingest_pdfs

    return _ingest_files(args, "ingest-pdf", ingest_pdfs, "pdf_paths", "PDF files or folders", "PDF_PATH")


def ingest_images(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import ingest_images

    return _ingest_files(args, "ingest-images", ingest_images, "image_paths", "image files or folders", "IMAGE_PATH")


def _ingest_files(args: argparse.Namespace, label: str, ingest, configured: str, what: str, variable: str) -> int:
    """PDFs and images: given or configured paths, one ingest call with the configured OCR engine."""
    settings = _settings(args)
    paths = _paths(args.paths, getattr(settings, configured), what, variable)
    progress = ProgressLine(label)
    with _open(settings) as store:
        report = ingest(store, paths, progress, settings.ocr_engine, args.allow_mass_delete)
        return _finish_ingest(args, report, progress, store)
