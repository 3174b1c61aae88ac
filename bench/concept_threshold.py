#!/usr/bin/env python3
"""Fits the concept threshold of an embedding model to MiniLM's (`CMRAG_CONCEPT_SIM_THRESHOLD`).

    python bench/concept_threshold.py [--shared DIR] [--model multilingual-e5-small] [--thresholds 0.85 0.9]

Concepts (memory/concepts.py) cluster events whose cosine to a cluster's centroid reaches the
threshold. Cosines are on each model's own scale (multilingual-e5 puts unrelated text near 0.8), so
one threshold for every model put all of e5's events into one concept. LoCoMo dev's gold events
(`event_summary`, each conversation's events, oldest first) are clustered per conversation by MiniLM
at 0.6, the reference, and by `--model` at each candidate threshold; the candidate whose clusters
agree best with MiniLM's (pairwise F1: two events in one concept or not) is the model's threshold.
Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import load_locomo

REFERENCE = 0.6  # MiniLM's threshold, the behaviour other models are fitted to


def gold_events(sample: dict) -> list[str]:
    def number(item: tuple[str, dict]) -> int:
        return int(item[0].rsplit("_", 1)[1])

    sessions = sorted(sample["event_summary"].items(), key=number)
    return [text for _, session in sessions for who, said in session.items() if who != "date" for text in said]


def vectors(settings, conversations: list[list[str]]) -> list[np.ndarray]:
    from crossmodalrag.index.embed import load_embedder

    embedder = load_embedder(settings)
    out = []
    for events in conversations:
        matrix = np.asarray(embedder.embed(events), dtype=np.float32)
        out.append(matrix / np.linalg.norm(matrix, axis=1, keepdims=True))
    return out


def same_concept(matrix: np.ndarray, threshold: float) -> set[tuple[int, int]]:
    """The pairs of events the product puts into one concept (a cluster of at least MIN_MEMBERS)."""
    from crossmodalrag.memory.concepts import MIN_MEMBERS, cluster
    from crossmodalrag.memory.episodes import EventRow

    rows = [EventRow(str(i), "", float(i), "", "fact", "note", row) for i, row in enumerate(matrix)]
    groups = [sorted(int(e.id) for e in g) for g in cluster(rows, threshold) if len(g) >= MIN_MEMBERS]
    return {(a, b) for group in groups for i, b in enumerate(group) for a in group[:i]}


def agreement(reference: list[set], candidate: list[set]) -> float:
    both = sum(len(r & c) for r, c in zip(reference, candidate, strict=True))
    either = sum(len(r) + len(c) for r, c in zip(reference, candidate, strict=True))
    return 2 * both / max(1, either)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--model", default="multilingual-e5-small")
    default = [round(0.80 + 0.005 * i, 3) for i in range(27)]
    parser.add_argument("--thresholds", type=float, nargs="+", default=default)
    args = parser.parse_args()
    clean_environment()
    from crossmodalrag.config import Settings
    from crossmodalrag.index.models import install_offline

    folder = Path(tempfile.mkdtemp(prefix="concept-threshold-"))
    minilm = Settings(db_path=folder / "minilm.db")
    install_offline(minilm)  # the offline MiniLM that `mem models install --offline` assembles
    other = Settings(db_path=folder / "other.db", embed_model=args.model)
    install_offline(other)
    conversations = [gold_events(sample) for sample in load_locomo(args.shared)]
    log(f"{sum(map(len, conversations))} gold events in {len(conversations)} conversations")
    reference = [same_concept(m, REFERENCE) for m in vectors(minilm, conversations)]
    candidates = vectors(other, conversations)
    table = {t: round(agreement(reference, [same_concept(m, t) for m in candidates]), 3) for t in args.thresholds}
    best = max(table, key=lambda t: (table[t], -abs(t - REFERENCE)))
    print(json.dumps({
        "benchmark": "concept_threshold", "machine": machine(), "source": source_state(),
        "model": args.model, "events": sum(map(len, conversations)), "reference": REFERENCE,
        "best": best, "pair_f1": table,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
