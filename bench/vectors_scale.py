#!/usr/bin/env python3
"""Vector search at scale: exact numpy search vs the usearch HNSW index, on seeded synthetic unit vectors.

    python bench/vectors_scale.py [--sizes 100000 1000000] [--queries 200] [--dtype f16]
                                  [--data clustered uniform] [--skip-approximate] [--workdir DIR]

For each size N (clustered data: 1,000 gaussian centres + noise, the realistic case):
  - exact search (crossmodalrag.index.vectors.ExactIndex) latency p50/p95 in a warm process, and
    batched throughput (search_batch, queries per second);
For the largest N and each --data kind (clustered first; uniform random unit vectors is the hard case):
  - ApproximateIndex build time, save time, file size, load (mmap view) time, latency p50/p95,
    recall@10 against exact search over the same queries, and a sweep of the search beam width;
  - the approximate-vs-exact latency ratio measured in the same run.
Peak RSS (ru_maxrss) is recorded after each phase. Prints one JSON object on stdout; progress
(and each phase's figures as they come) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib import latency_summary, log, machine

from crossmodalrag.index.vectors import ApproximateIndex, ExactIndex, usearch_available

DIM = 384
CENTERS = 1000
NOISE = 0.5  # per dimension; a point's cosine to its own centre is ~0.9, to a sibling ~0.8
TARGETS = {"exact_p50_ms_at_100k": 15.0, "approximate_p50_ms_at_1m": 5.0, "approximate_recall_at_10": 0.95}
BEAMS = (64, 128, 256)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux reports KiB


def rss_now_mb() -> float | None:
    """Resident set now (Linux): the peak alone hides a phase that stays below an earlier one."""
    try:
        resident_pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return round(resident_pages * resource.getpagesize() / 2**20, 1)


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def make_data(kind: str, n: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (n, DIM) data and (queries, DIM) queries, generated in blocks to bound float64 temporaries."""
    rng = np.random.default_rng(seed)
    middles = rng.standard_normal((CENTERS, DIM)).astype(np.float32)

    def draw(count: int) -> np.ndarray:
        out = np.empty((count, DIM), dtype=np.float32)
        for start in range(0, count, 100_000):
            stop = min(count, start + 100_000)
            noise = rng.standard_normal((stop - start, DIM), dtype=np.float32)
            if kind == "clustered":
                out[start:stop] = middles[rng.integers(0, CENTERS, stop - start)] + NOISE * noise
            else:
                out[start:stop] = noise
        return unit(out)

    # Queries come from the same topics as the data (fresh points), as real questions do.
    return draw(n), draw(queries)


def time_searches(index, queries: np.ndarray, k: int = 10) -> list[float]:
    for query in queries[:10]:  # warm caches and (for a mapped file) the pages on the hot path
        index.search(query, k)
    timings = []
    for query in queries:
        start = time.perf_counter()
        index.search(query, k)
        timings.append((time.perf_counter() - start) * 1000)
    return timings


def recall_at_k(found: list[np.ndarray], truth: list[np.ndarray], k: int = 10) -> float:
    hits = sum(len(set(f[:k].tolist()) & set(t[:k].tolist())) for f, t in zip(found, truth, strict=True))
    return round(hits / (k * len(truth)), 4)


def bench_exact(n: int, queries: int, seed: int) -> dict:
    log(f"[exact n={n}] generating clustered data")
    vectors, query_rows = make_data("clustered", n, queries, seed)
    keys = np.arange(n, dtype=np.int64) * 2 + 1
    start = time.perf_counter()
    index = ExactIndex(keys, vectors)
    setup_s = time.perf_counter() - start
    single = latency_summary(time_searches(index, query_rows))
    start = time.perf_counter()
    index.search_batch(query_rows, 10)
    batch_s = time.perf_counter() - start
    result = {
        "n": n, "setup_s": round(setup_s, 3), "latency": single,
        "batched_qps": round(queries / batch_s, 1), "batched_ms_per_query": round(batch_s * 1000 / queries, 3),
        "matrix_mb": round(vectors.nbytes / 2**20, 1), "peak_rss_mb": peak_rss_mb(), "rss_mb": rss_now_mb(),
    }  # fmt: skip
    log(f"[exact n={n}] {json.dumps(result)}")
    return result


def bench_approximate(kind: str, n: int, queries: int, dtype: str, seed: int, workdir: Path) -> dict:
    log(f"[approximate {kind} n={n}] generating data")
    vectors, query_rows = make_data(kind, n, queries, seed)
    keys = np.arange(n, dtype=np.int64) * 2 + 1
    exact = ExactIndex(keys, vectors)
    exact_ms = latency_summary(time_searches(exact, query_rows))
    truth = [found for found, _ in exact.search_batch(query_rows, 10)]
    result: dict = {"data": kind, "n": n, "dtype": dtype, "exact_latency": exact_ms}
    result["peak_rss_mb_data"], result["rss_mb_data"] = peak_rss_mb(), rss_now_mb()
    log(f"[approximate {kind} n={n}] building ({dtype}); this takes minutes at 1M on 2 cores")
    start = time.perf_counter()
    built = ApproximateIndex.build(keys, vectors, dtype=dtype)
    result["build_s"] = round(time.perf_counter() - start, 1)
    result["peak_rss_mb_build"], result["rss_mb_after_build"] = peak_rss_mb(), rss_now_mb()
    log(f"[approximate {kind} n={n}] built in {result['build_s']} s")
    path = workdir / f"vectors-{kind}-{n}-{dtype}.usearch"
    start = time.perf_counter()
    built.save(path, stamp="bench")
    result["save_s"] = round(time.perf_counter() - start, 2)
    result["file_mb"] = round(path.stat().st_size / 2**20, 1)
    del built
    start = time.perf_counter()
    index = ApproximateIndex.load(path, "bench", view=True)
    result["load_view_s"] = round(time.perf_counter() - start, 4)
    result["rss_mb_after_load"] = rss_now_mb()
    assert index is not None, "freshly saved index failed to load"
    result["latency"] = latency_summary(time_searches(index, query_rows))
    result["recall_at_10"] = recall_at_k([index.search(q, 10)[0] for q in query_rows], truth)
    result["expansion_search"] = index.expansion_search
    result["beam_sweep"] = []
    for beam in BEAMS:
        index.expansion_search = beam
        result["beam_sweep"].append({
            "expansion_search": beam, "p50_ms": latency_summary(time_searches(index, query_rows))["ms_p50"],
            "recall_at_10": recall_at_k([index.search(q, 10)[0] for q in query_rows], truth),
        })  # fmt: skip
    result["peak_rss_mb_search"], result["rss_mb_after_search"] = peak_rss_mb(), rss_now_mb()
    result["speedup_exact_over_approximate_p50"] = round(exact_ms["ms_p50"] / result["latency"]["ms_p50"], 1)
    result["meets_targets"] = {
        "p50_ms<=5": result["latency"]["ms_p50"] <= TARGETS["approximate_p50_ms_at_1m"],
        "recall_at_10>=0.95": result["recall_at_10"] >= TARGETS["approximate_recall_at_10"],
    }
    log(f"[approximate {kind} n={n}] {json.dumps(result)}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dtype", choices=["f16", "i8", "f32"], default="f16")
    parser.add_argument("--data", nargs="+", choices=["clustered", "uniform"], default=["clustered", "uniform"])
    parser.add_argument("--skip-approximate", action="store_true")
    parser.add_argument("--workdir", type=Path, help="where index files go (default: a temp dir, removed)")
    parser.add_argument("--seed", type=int, default=20240501)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="vectors-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report: dict = {
        "benchmark": "vectors_scale", "machine": machine(), "dim": DIM, "queries": args.queries,
        "data": {"clustered": f"{CENTERS} gaussian centres + N(0, {NOISE}^2) noise", "uniform": "gaussian"},
        "targets": TARGETS, "exact": {}, "approximate": {},
    }  # fmt: skip
    try:
        for n in sorted(args.sizes):
            report["exact"][str(n)] = bench_exact(n, args.queries, args.seed)
        if args.skip_approximate:
            report["approximate"] = "skipped (--skip-approximate)"
        elif not usearch_available():
            report["approximate"] = "skipped: usearch is not installed (pip install 'crossmodalrag[embeddings]')"
        else:
            n = max(args.sizes)
            for kind in args.data:
                report["approximate"][kind] = bench_approximate(kind, n, args.queries, args.dtype, args.seed, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    smallest = report["exact"].get("100000")
    if smallest:
        report["exact_meets_target_at_100k"] = smallest["latency"]["ms_p50"] <= TARGETS["exact_p50_ms_at_100k"]
    report["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
