"""`mem eval` and `mem eval-generation`: the measuring commands, apart from everyday use."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.render import print_json, render_eval, render_generation_eval
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.evals.queries import gold_warnings, list_queries, load_queries_file, upsert_queries
from crossmodalrag.memory.retrieve import at_level
from crossmodalrag.store import Store
from crossmodalrag.wording import counted


def evaluate(args: argparse.Namespace) -> int:
    from crossmodalrag.evals.report import run_retrieval_eval

    settings = _settings(args)
    with _open(settings, create=args.load_queries is not None) as store:
        _load_queries(args, store)
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


def _load_queries(args: argparse.Namespace, store: Store) -> None:
    """--load-queries FILE: upsert its queries before the run."""
    if args.load_queries:
        loaded = load_queries_file(args.load_queries)
        upsert_queries(store, loaded)
        notice(f"loaded {counted(len(loaded), 'query', 'queries')} from {args.load_queries}")


def _eval_queries(args: argparse.Namespace, store: Store) -> list:
    """Stored eval queries (after loading --load-queries), filtered by --query-prefix; warns on bad gold."""
    _load_queries(args, store)
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
