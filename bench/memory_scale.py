#!/usr/bin/env python3
"""Scale of the deterministic memory levels: episodes, concepts, graph, drift, distill over synthetic events.

    nice -n 5 python bench/memory_scale.py [--events 20000] [--baseline 2000] [--seed 0]

Synthetic but shaped like a memory: events spread over 2 years and 50 projects (a few a day per
project, so episodes form), each linked to 1-2 of 10 chunks of its own source, with 384-d unit
vectors drawn around 300 topic centres (so concepts form) with noise. Every level is built by the
product's own code; we report build seconds per level and the process's peak RSS, for the full
size and for a baseline size in the same run (the ratio shows how it scales).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib import clean_environment, log, machine, source_state

from crossmodalrag.config import Settings
from crossmodalrag.memory.nodes import Link, Node, stable_id, write_nodes
from crossmodalrag.store import open_store

DAY = 86400.0
DIM, TOPICS, PROJECTS, CHUNKS_PER_SOURCE = 384, 300, 50, 10


def synthetic_store(path: Path, events: int, seed: int):
    rng = np.random.default_rng(seed)
    store = open_store(path)
    sources = max(1, events // 4)  # ~4 events per source
    start = 1_700_000_000.0
    with store.transaction() as conn:
        for s in range(sources):
            project = f"/synthetic/project-{s % PROJECTS}"
            when = start + rng.uniform(0, 730) * DAY
            source_id = conn.execute(
                "INSERT INTO sources (source_type, uri, fingerprint, timestamp, title, ingested_at)"
                " VALUES ('note', ?, 'x', ?, ?, 0)",
                (f"{project}/note-{s}.md", when, f"note {s}"),
            ).lastrowid
            conn.executemany(
                "INSERT INTO chunks (source_id, chunk_index, text, char_start, char_end) VALUES (?, ?, ?, 0, 10)",
                [(source_id, i, f"note {s}\nchunk {i} text") for i in range(CHUNKS_PER_SOURCE)],
            )
    rows = store.conn.execute(
        "SELECT s.id, s.uri, s.timestamp, MIN(c.id) FROM sources s JOIN chunks c ON c.source_id = s.id GROUP BY s.id"
    ).fetchall()
    centres = rng.normal(size=(TOPICS, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    nodes = []
    for e in range(events):
        source_id, uri, when, first_chunk = rows[e % len(rows)]
        vector = centres[rng.integers(TOPICS)] + rng.normal(scale=0.8 / np.sqrt(DIM), size=DIM)  # cos ~0.78
        vector /= np.linalg.norm(vector)
        chunks = {first_chunk + int(rng.integers(CHUNKS_PER_SOURCE)) for _ in range(int(rng.integers(1, 3)))}
        statement = f"synthetic event {e} about topic"
        nodes.append(
            Node(
                id=stable_id("event", uri, statement), level="event", title=statement, statement=statement,
                kind="fact", project=uri.rsplit("/", 1)[0], first_time=when + e % 4 * 3600, last_time=when,
                source_id=source_id, source_uri=uri, vector=vector.astype(np.float32).tobytes(),
                links=[Link(c, "cited", 0.8) for c in sorted(chunks)],
            )
        )  # fmt: skip
    with store.transaction() as conn:
        write_nodes(conn, nodes)
    return store


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def build_levels(store, settings: Settings) -> dict:
    from crossmodalrag.memory import concepts, distill, drift, episodes, graph

    seconds, counts = {}, {}
    started = time.perf_counter()
    events = episodes.load_events(store.conn)
    seconds["load_events"] = time.perf_counter() - started
    steps = {
        "episode": lambda: episodes.build_episodes(store, settings.episode_gap_hours, events),
        "concept": lambda: concepts.build_concepts(store, settings.concept_sim_threshold, None, events),
        "graph": lambda: graph.build_graph(store),
        "drift": lambda: drift.build_drift(store, settings.drift_window_days),
        "distill": lambda: distill.build_distill(store, settings.distill_compression_ratio),
    }
    for level, step in steps.items():
        started = time.perf_counter()
        counts[level] = step()
        seconds[level] = time.perf_counter() - started
    started = time.perf_counter()
    steps["episode"]()
    steps["concept"]()
    seconds["rebuild_unchanged_episode_concept"] = time.perf_counter() - started
    return {"seconds": {k: round(v, 3) for k, v in seconds.items()}, "counts": counts}


def measure(events: int, seed: int, workdir: Path) -> dict:
    settings = Settings(db_path=workdir / f"scale-{events}.db")
    started = time.perf_counter()
    store = synthetic_store(settings.db_path, events, seed)
    made = time.perf_counter() - started
    result = build_levels(store, settings)
    total = sum(v for k, v in result["seconds"].items() if not k.startswith("rebuild"))
    store.close()
    log(f"{events} events: {round(total, 2)} s to build the levels, peak RSS {peak_rss_mb()} MB")
    return {"events": events, "synthesis_seconds": round(made, 2), "build_seconds": round(total, 3),
            "peak_rss_mb_so_far": peak_rss_mb(), **result}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--baseline", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-scale-"))
    baseline = measure(args.baseline, args.seed, workdir)
    full = measure(args.events, args.seed, workdir)
    result = {
        "benchmark": "memory_scale",
        "machine": machine(),
        "source": source_state(),
        "baseline": baseline,
        "full": full,
        "ratio_build_seconds": round(full["build_seconds"] / max(baseline["build_seconds"], 1e-9), 2),
        "ratio_events": round(args.events / args.baseline, 2),
    }
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
