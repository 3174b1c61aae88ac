#!/usr/bin/env python3
"""May retrieval go through the distilled stand-ins instead of whole nodes? A measured gate.

    mem build-memory && python scripts/distill_gate.py [--db-path PATH] [--level episode] [--top-k 5]

Runs the stored eval queries (with gold) through `--level episode` (or concept) retrieval twice:
drilling down through every chunk of the matched nodes, and only through their distilled stand-ins
(`mem distill`, sized by CMRAG_DISTILL_COMPRESSION_RATIO). Prints both Recall@K, their gap and the
achieved compression as JSON, then `GATE: FIRE` only when the stand-ins lose at most
CMRAG_DISTILL_EPSILON of recall at (or under) the target ratio, else `GATE: HOLD`. It changes nothing:
`mem ask` keeps drilling through whole nodes either way.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.cli.arguments import positive
from crossmodalrag.cli.main import fail
from crossmodalrag.config import load_settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.evals.queries import list_queries
from crossmodalrag.evals.retrieval import evaluate
from crossmodalrag.memory.distill import distill_view
from crossmodalrag.memory.retrieve import LevelRetriever, require_level
from crossmodalrag.store import open_store

RATIO_SLACK = 0.05  # stand-ins are rounded up to one chunk per node: small nodes overshoot a little


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db-path", type=Path)
    parser.add_argument("--level", choices=("episode", "concept"), default="episode")
    parser.add_argument("--top-k", type=positive, default=5)
    parser.add_argument("--query-prefix", help="only queries starting with this text")
    args = parser.parse_args()
    try:
        return gate(args)
    except CMRAGError as error:  # no database, a hierarchy not built, a bad setting: one line, as `mem` says it
        return fail(error.message, error.hint)


def gate(args: argparse.Namespace) -> int:
    settings = load_settings({"db_path": args.db_path})
    with open_store(settings.db_path, create=False) as store:
        require_level(store, args.level)
        queries = [q for q in list_queries(store, args.query_prefix) if q.expected_source_uris]
        if not queries:
            which = f" starting with {args.query_prefix!r}" if args.query_prefix else ""
            return fail(
                f"no stored eval query{which} names its expected sources",
                "`mem seed-sample` stores the sample's; `mem eval --load-queries FILE` stores yours",
            )
        base = open_retriever(store, settings, args.top_k)
        recall = {}
        for stand_ins in (False, True):
            retriever = LevelRetriever(base, args.level, settings.recency_half_life_days, stand_ins=stand_ins)
            recall[stand_ins] = evaluate(retriever, queries).overall()["recall"] or 0.0
        nodes = [n for n in distill_view(store, top=100_000) if n["level"] == args.level]
    kept, total = sum(len(n["stand_ins"]) for n in nodes), sum(n["chunks_total"] for n in nodes)
    ratio = kept / total if total else 1.0
    loss = recall[False] - recall[True]
    compressed = ratio <= settings.distill_compression_ratio + RATIO_SLACK
    fire = bool(queries) and loss <= settings.distill_epsilon and compressed
    print(json.dumps({
        "level": args.level, "queries": len(queries), "top_k": args.top_k,
        "recall_full_nodes": round(recall[False], 4), "recall_stand_ins": round(recall[True], 4),
        "recall_loss": round(loss, 4), "epsilon": settings.distill_epsilon,
        "achieved_ratio": round(ratio, 4), "target_ratio": settings.distill_compression_ratio,
    }, indent=2))  # fmt: skip
    print("GATE: FIRE" if fire else "GATE: HOLD")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
