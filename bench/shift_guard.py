#!/usr/bin/env python3
"""When a hybrid search may shift its query toward its best hits (retrieval/search.py `_shifted_query`).

    python bench/shift_guard.py [--shared DIR] [--workdir DIR] [--sets zh,ja,de,es,vi,scifact] [--per-group 300]

In process, through the search `mem ask` runs (top-k 10, MiniLM), over bench/calibrate_gate.py's stores
(the same workdir: built and embedded there on first use, cached after): each set's answerable
questions, nDCG@10 of the evidence with the guard as shipped (no shift when another first-pass hit is
SHIFT_GAP closer in meaning than every best hit), at other gaps, with no guard, with no shift at all,
and with the rejected alternative (shift only toward best hits at or above the model's cosine floor).
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from benchlib import DEFAULT_SHARED, log, machine, source_state
from calibrate_gate import multilingual_set, open_memory, scifact_set, semantic_for
from scifact import ndcg_at

from crossmodalrag.answer.evidence import search_options
from crossmodalrag.config import Settings
from crossmodalrag.retrieval import search as search_module
from crossmodalrag.retrieval.gate import MODEL_COSINES

SHIPPED = search_module._shifted_query


def floor_only(known, vector, hits, options):
    """The rejected alternative: feedback only from best hits at or above MiniLM's cosine floor."""
    floor = MODEL_COSINES["sentence-transformers/all-MiniLM-L6-v2"].floor
    best = [h for h in hits[: options.rocchio_hits] if h.components.get("cosine", 0.0) >= floor]
    return SHIPPED(known, vector, best, replace(options, rocchio_hits=len(best))) if best else None


def variants(gap: float) -> dict:
    """name -> (options change, _shifted_query to use, SHIFT_GAP)."""
    return {
        "shipped": ({}, SHIPPED, gap),
        "gap_0.15": ({}, SHIPPED, 0.15),
        "gap_0.25": ({}, SHIPPED, 0.25),
        "no_guard": ({}, SHIPPED, float("inf")),
        "no_shift": ({"rocchio_hits": 0}, SHIPPED, gap),
        "floor_only": ({}, floor_only, float("inf")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/calibrate-gate"))
    parser.add_argument("--sets", default="zh,ja,de,es,vi,scifact")
    parser.add_argument("--per-group", type=int, default=300)
    args = parser.parse_args()
    gap, out = search_module.SHIFT_GAP, {}
    for name in args.sets.split(","):
        if name == "scifact":
            spec = scifact_set(args.shared, args.workdir, args.per_group)
        else:
            spec = multilingual_set(args.shared, args.workdir, name, args.per_group)
        store, settings = open_memory(args.workdir, name, spec)
        semantic = semantic_for(store, settings, "minilm")
        base = search_options(Settings(), top_k=10)
        scores: dict[str, list[float]] = {variant: [] for variant in variants(gap)}
        for question, _, _, gold in spec["questions"]:
            if not gold:
                continue
            for variant, (change, shift, shift_gap) in variants(gap).items():
                search_module._shifted_query, search_module.SHIFT_GAP = shift, shift_gap
                hits = search_module.search(store, question, replace(base, **change), semantic).hits
                ranked = list(dict.fromkeys(spec["names"].get(Path(h.source_uri).stem, "") for h in hits))
                scores[variant].append(ndcg_at(ranked, gold, 10))
        search_module._shifted_query, search_module.SHIFT_GAP = SHIPPED, gap
        out[name] = {v: round(sum(s) / len(s), 4) for v, s in scores.items()} | {"questions": len(scores["shipped"])}
        log(f"{name}: {out[name]}")
    result = {"benchmark": "shift_guard", "machine": machine(), "source": source_state(), "sets": out}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
