#!/usr/bin/env python3
"""Where `mem ask`'s SciFact nDCG@10 goes: the evidence slots a source takes, the candidate pool.

    python bench/ask_scifact.py --hybrid --workdir DIR      # builds DIR/memory.db (abstracts as notes)
    python bench/ask_scifact_slots.py --workdir DIR

Over the memory `bench/ask_scifact.py` built, every judged train claim is searched in process (the
function `mem ask` calls, no gate, so no abstention scores 0) with the product's options and with
one option changed at a time:
  product              today's options (top-k 10, at most 3 chunks per source, each further one at 0.8
                       of its score, a pool of 50, the shift)
  one chunk a source   max_chunks_per_source 1: ten slots hold ten abstracts
  pool 100             min_candidates 100 (the normalisation spans more candidates)
  both                 the two together
  no shift             rocchio_hits 0: the query is not moved toward its best hits (before session 20)
  shift from N hits    rocchio_hits N (the product: 3), weight 1
  shift weight W       rocchio_weight W (the product: 1.0), from 3 hits
  no repeat discount   repeat_source_factor 1.0: a source's second chunk at its own score; "repeat
                       factor F" at F (the product: 0.8); "before session 23": no discount, cap 2
  best chunk, pool 100 the 100 best chunks of any source, each source ranked by its best chunk
                       (MaxP), and with `--sibling S` also S x its second-best chunk's score
nDCG@10 is over the distinct sources in evidence order, as in ask_scifact.py. An abstract longer than
MAX_CHUNK_CHARS is two chunks, so the cap per source can spend two of ten slots on one abstract.
Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from scifact import load_qrels, load_queries, ndcg_at

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.retrieval.search import search
from crossmodalrag.store import open_store

VARIANTS = {
    "product": {},
    "one chunk a source": {"max_chunks_per_source": 1},
    "pool 100": {"min_candidates": 100},
    "both": {"max_chunks_per_source": 1, "min_candidates": 100},
    "no shift": {"rocchio_hits": 0},
    "shift from 1 hit": {"rocchio_hits": 1},
    "shift from 5 hits": {"rocchio_hits": 5},
    "shift weight 0.5": {"rocchio_weight": 0.5},
    "shift weight 2.0": {"rocchio_weight": 2.0},
    "no repeat discount": {"repeat_source_factor": 1.0},
    "before session 23": {"repeat_source_factor": 1.0, "max_chunks_per_source": 2},
    "repeat factor 0.9": {"repeat_source_factor": 0.9},
    "repeat factor 0.7": {"repeat_source_factor": 0.7},
}
DEEP = {"top_k": 100, "max_chunks_per_source": 0, "min_candidates": 100}


def corpus_id(hit) -> str:
    """The abstract a hit is from: ask_scifact.py names each note after its corpus id."""
    return Path(hit.source_uri).stem


def best_chunk_ranking(hits, sibling: float) -> list[str]:
    """Sources by their best chunk's score (plus `sibling` x their second best); hits come best first."""
    scores: dict[str, list[float]] = {}
    for hit in hits:
        scores.setdefault(corpus_id(hit), []).append(hit.score)
    total = {doc: s[0] + sibling * (s[1] if len(s) > 1 else 0.0) for doc, s in scores.items()}
    return sorted(total, key=lambda doc: -total[doc])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, required=True, help="an ask_scifact.py work dir (memory.db)")
    parser.add_argument("--sibling", type=float, nargs="*", default=[0.0, 0.1])
    args = parser.parse_args()
    clean_environment()
    root = args.shared / "data" / "scifact"
    queries, qrels = load_queries(root), load_qrels(root, "train")
    ids = sorted(qrels, key=int)
    db = args.workdir / "memory.db"
    result: dict = {
        "benchmark": "ask_scifact_slots",
        "claims": len(ids),
        "machine": machine(),
        "source": source_state(),
    }
    with open_store(db, create=False) as store:
        retriever = open_retriever(store, load_settings({"db_path": db}), 10)
        result["retrieval"] = "hybrid" if retriever.semantic is not None else "lexical"
        for name, changes in VARIANTS.items():
            options = replace(retriever.options, **changes)
            gains = []
            for query_id in ids:
                hits = search(store, queries[query_id], options, retriever.semantic).hits[:10]
                gains.append(ndcg_at(list(dict.fromkeys(map(corpus_id, hits))), qrels[query_id], 10))
            result[name] = round(sum(gains) / len(gains), 4)
            log(f"{name}: {result[name]}")
        deep = replace(retriever.options, **DEEP)
        gains = {share: [] for share in args.sibling}
        for query_id in ids:
            hits = search(store, queries[query_id], deep, retriever.semantic).hits
            for share in args.sibling:
                gains[share].append(ndcg_at(best_chunk_ranking(hits, share), qrels[query_id], 10))
        for share, values in gains.items():
            result[f"best chunk, pool 100, sibling {share}"] = round(sum(values) / len(values), 4)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
