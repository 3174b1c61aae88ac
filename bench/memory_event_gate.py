#!/usr/bin/env python3
"""The event gate's cosine on each embedding model's own scale, without an LLM.

    nice -n 5 python bench/memory_event_gate.py [--models NAME ...] [--top 10] [--workdir DIR]

At `--level event` an event joins the fusion only when its cosine to the question reaches the
model's `memory.retrieve.EVENT_MIN_COSINES` value. MiniLM's 0.55 was chosen on LoCoMo dev with
benchmark 3 (bench/memory_levels.py); other models put the same pairs at other cosines
(multilingual-e5 puts even unrelated text near 0.8), so one number gates one model and not another.
This carries MiniLM's operating point over by share: every LoCoMo dev question (categories 1-4)
against the gold observations of its own conversation (the events benchmark 3 stands in for L1), the
`--top` closest of them per question (the events the gate decides on); MiniLM's value lets through
a share of those pairs, and each other model's threshold is the cosine that lets through the same
share. Prints each model's share at MiniLM's value, its fitted threshold and its quantiles.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo

from crossmodalrag.config import Settings

REFERENCE = "sentence-transformers/all-MiniLM-L6-v2"
MODELS = (REFERENCE, "multilingual-e5-small", "nomic-embed-text-v1.5")


def texts(sample: dict) -> tuple[list[str], list[str]]:
    """A conversation's questions (categories 1-4) and its gold observations."""
    questions = [str(q["question"]) for q in sample["qa"] if q.get("category") in CATEGORIES]
    observed = [text for value in sample["observation"].values() for items in value.values() for text, _ in items]
    return questions, observed


def top_cosines(embedder, data: list[dict], top: int):
    """Per question, the cosines of its conversation's `top` closest observations (one flat array)."""
    import numpy as np

    from crossmodalrag.index.embed import embed_queries

    found = []
    for sample in data:
        questions, observed = texts(sample)
        similarity = embed_queries(embedder, questions) @ embedder.embed(observed).T
        found.append(-np.sort(-similarity, axis=1)[:, :top].ravel())
    return np.concatenate(found)


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--top", type=int, default=10, help="the closest events per question that the gate judges")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    clean_environment()
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.memory.retrieve import EVENT_MIN_COSINES

    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-event-gate-"))
    reference = EVENT_MIN_COSINES[REFERENCE]
    share, result = None, {"benchmark": "memory_event_gate", "machine": machine(), "source": source_state()}
    for name in sorted(args.models, key=lambda m: m != REFERENCE):  # the reference first: it sets the share
        settings = Settings(db_path=workdir / "models.db", embed_model=None if name == REFERENCE else name)
        install_offline(settings)
        cosines = top_cosines(load_embedder(settings), data, args.top)
        share = float((cosines >= reference).mean()) if share is None else share
        row = {
            "pairs": int(cosines.size),
            "share_at_reference": round(float((cosines >= reference).mean()), 4),
            "fitted": round(float(np.quantile(cosines, 1 - share)), 3),
            "in_use": EVENT_MIN_COSINES.get(name),
            "quantiles": {q: round(float(np.quantile(cosines, q)), 3) for q in (0.1, 0.5, 0.9)},
        }
        result[name] = row
        log(f"{name}: {json.dumps(row)}")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
