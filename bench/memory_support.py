#!/usr/bin/env python3
"""Calibrates the event support threshold (`CMRAG_EVENT_SUPPORT_MIN_COSINE`) on LoCoMo dev.

    python bench/memory_support.py [--shared DIR] [--keep 0.95]

An event is kept for retrieval only if one of its linked chunks reaches this MiniLM cosine, as a
whole or by one of its pieces (its body without the breadcrumb, a line, a sentence with its speaker:
`memory.provenance.text_pieces`), scored here exactly so. LoCoMo's gold `observation`s are events
written by people with the turn each one rests on, so they give both sides of the choice without a
language model:
  supported     score of each observation on its own evidence turn(s) (best of them);
  unsupported   its best cosine over every turn of a session of another conversation (other
                people, other lives: nothing there supports it), the session with the same index.
The threshold is the highest one that keeps `--keep` of the supported side (a quantile), reported
beside what it lets through of the unsupported side, with a table over round thresholds.
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
from memory_events import observations


def sessions(conversation: dict) -> dict[str, list[dict]]:
    return {k: v for k, v in conversation.items() if k.startswith("session_") and isinstance(v, list)}


def turn_vectors(embedder, sample: dict, name: str) -> list[np.ndarray]:
    """Per turn, the vectors the product scores an event against: the chunk as memory_events.py
    stores it (the session's title line, then "Speaker: text"), then each of its pieces."""
    from crossmodalrag.memory.provenance import text_pieces

    stamp = sample["conversation"].get(f"{name}_date_time", "")
    lines = [f"{t['speaker']}: {t['text']}" for t in sample["conversation"][name]]
    texts = [[f"Conversation, {stamp}\n{line}", *text_pieces(line)] for line in lines]
    flat = embedder.embed([text for group in texts for text in group])
    bounds = np.cumsum([0] + [len(group) for group in texts])
    return [flat[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]


def scores(statements: np.ndarray, turns: list[np.ndarray]) -> np.ndarray:
    """statements x turns: each turn's best cosine over its vectors (whole chunk or a piece)."""
    return np.stack([(statements @ vectors.T).max(axis=1) for vectors in turns], axis=1)


def best_rank(scores: np.ndarray, rows: list[int]) -> int:
    """0-based rank of the best-placed of `rows` when every turn is ordered by score."""
    order = np.argsort(-scores, kind="stable")
    return int(min(np.flatnonzero(np.isin(order, rows))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--keep", type=float, default=0.95, help="share of supported events to keep")
    args = parser.parse_args()
    clean_environment()
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.models import install_offline

    settings = Settings(db_path=Path(tempfile.mkdtemp(prefix="memory-support-")) / "models.db")
    install_offline(settings)  # the offline MiniLM that `mem models install --offline` assembles
    embedder = load_embedder(settings)
    data = load_locomo(args.shared)
    turns: dict[tuple[int, str], tuple[list[str], list[np.ndarray]]] = {}
    for index, sample in enumerate(data):
        for name, session in sessions(sample["conversation"]).items():
            turns[(index, name)] = ([t["dia_id"] for t in session], turn_vectors(embedder, sample, name))
        log(f"conversation {index}: {len(sessions(sample['conversation']))} sessions embedded")
    supported, unsupported, ranks = [], [], {"whole chunk": [], "chunk or piece": []}
    for index, sample in enumerate(data):
        other = (index + 1) % len(data)
        for name in sessions(sample["conversation"]):
            observed = observations(sample, name)
            if not observed or (other, name) not in turns:
                continue
            ids, vectors = turns[(index, name)]
            position = {dia_id: row for row, dia_id in enumerate(ids)}
            statements = embedder.embed([text for text, _ in observed])
            cosines, foreign = scores(statements, vectors), scores(statements, turns[(other, name)][1])
            for row, (_, evidence) in enumerate(observed):
                rows = [position[e] for e in evidence if e in position]
                if rows:
                    supported.append(float(cosines[row, rows].max()))
                    unsupported.append(float(foreign[row].max()))
                    whole = statements[row] @ np.stack([v[0] for v in vectors]).T
                    ranks["whole chunk"].append(best_rank(whole, rows))
                    ranks["chunk or piece"].append(best_rank(cosines[row], rows))
    supported_array, unsupported_array = np.array(supported), np.array(unsupported)
    threshold = float(np.quantile(supported_array, 1 - args.keep))
    table = [
        {
            "threshold": t,
            "supported_kept": round(float((supported_array >= t).mean()), 4),
            "unsupported_passed": round(float((unsupported_array >= t).mean()), 4),
        }
        for t in np.round(np.arange(0.20, 0.61, 0.05), 2).tolist()
    ]
    print(json.dumps({
        "benchmark": "memory_support", "machine": machine(), "source": source_state(),
        "observations": len(supported), "keep": args.keep,
        "calibrated_threshold": round(threshold, 4),
        "at_calibrated": {"supported_kept": round(float((supported_array >= threshold).mean()), 4),
                          "unsupported_passed": round(float((unsupported_array >= threshold).mean()), 4)},
        "configured_threshold": settings.event_support_min_cosine,
        "at_configured": {
            "supported_kept": round(float((supported_array >= settings.event_support_min_cosine).mean()), 4),
            "unsupported_passed": round(float((unsupported_array >= settings.event_support_min_cosine).mean()), 4),
        },
        "supported_quantiles": {q: round(float(np.quantile(supported_array, q)), 4) for q in (0.05, 0.1, 0.25, 0.5)},
        "unsupported_quantiles": {q: round(float(np.quantile(unsupported_array, q)), 4) for q in (0.5, 0.9, 0.95)},
        "table": table,
        # where the observation's own turn ranks among its session's turns: the nearest links
        "evidence_turn_first": {k: round(float(np.mean([r == 0 for r in v])), 4) for k, v in ranks.items()},
        "evidence_turn_in_top_3": {k: round(float(np.mean([r < 3 for r in v])), 4) for k, v in ranks.items()},
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
