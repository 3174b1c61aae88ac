"""Where one hybrid ask's time goes on PostgreSQL (issue 16): statements, client CPU, server CPU.

    python bench/postgres.py profile --workdir DIR [--asks 200] [--top 12] [--results FILE]

DIR is a `postgres.py scale --workdir DIR` build (its server is started and stopped again). One
process asks make_vault's questions in turn (balanced profile, evidence answer, no LLM, as the scale
benchmark's clients) and reports per ask: wall ms, the client's CPU ms, its server backend's CPU ms
(/proc), statements sent, and each statement's share (time in `execute`, i.e. the round trip and the
server's work, grouped by the statement's first words); then, in a second pass of as many asks, the
client functions with the most CPU (cProfile on CPU time, by own time), so the Python side's cost is
named too without the profiler's overhead in the figures above.

--results FILE also writes what retrieval returned for ~200 queries (the 20 questions, and words of
the memory's own lexicon drawn with a fixed seed: 1-4 words, prefixes, quoted pairs) in modes any and
all and hybrid: every hit's id, score and score components, the coverage and similarity. Two trees'
files compare with `cmp` (run both with the same PYTHONHASHSEED: retrieval/coverage.py sums over a
set, which moves a coverage by one ulp from one process to the next).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import re
import time
from collections import defaultdict
from pathlib import Path

import postgres_embedded
from benchlib import clean_environment, latency_summary, log, print_result
from postgres_ingest import cpu_seconds
from postgres_scale import LABEL, backend_pid, database, open_backend, retriever


def timed_statements(conn) -> dict[str, list[float]]:
    """Wrap conn.execute: milliseconds per statement, keyed by its first words."""
    spent: dict[str, list[float]] = defaultdict(list)
    execute = conn.execute

    def timing(sql, *args, **kwargs):
        started = time.perf_counter()
        try:
            return execute(sql, *args, **kwargs)
        finally:
            key = re.sub(r"\s+", " ", sql)[:70]
            spent[key].append((time.perf_counter() - started) * 1000)

    conn.execute = timing
    return spent


def retrieval_results(store, questions: list[str]) -> dict:
    """What search returns for the questions and for lexicon words drawn with a fixed seed."""
    from crossmodalrag.retrieval.search import SearchOptions, search

    words = [w for (w,) in store.conn.execute("SELECT DISTINCT lexeme FROM chunk_postings ORDER BY 1")]
    draw = random.Random(7)
    draw.shuffle(words)
    queries = questions + [" ".join(draw.sample(words, draw.randint(1, 4))) for _ in range(150)]
    queries += [w[:4] + "*" for w in words[:30]] + ['"' + " ".join(draw.sample(words, 2)) + '"' for _ in range(10)]
    ask, results = retriever(store), {}
    for query in queries:
        for name, options, semantic in (
            ("any", SearchOptions(top_k=20), None),
            ("all", SearchOptions(top_k=20, match="all"), None),
            ("hybrid", ask.options, ask.semantic),
        ):
            found = search(store, query, options, semantic)
            hits = [[h.chunk_id, h.score, sorted(h.components.items())] for h in found.hits]
            results[f"{name}|{query}"] = {"hits": hits, "coverage": found.coverage, "similarity": found.similarity}
    return results


def profile(location: str, questions: list[str], asks: int, top: int, sort: str = "tottime") -> dict:
    from crossmodalrag.answer.evidence import ask_without_llm

    with open_backend("postgresql", location) as store:
        ask = retriever(store)
        for question in questions:  # warm: caches, the HNSW index's pages
            ask_without_llm(ask, question)
        spent = timed_statements(store.conn)
        backend, times = backend_pid(store), []
        server, cpu = cpu_seconds(backend), time.process_time()
        for n in range(asks):
            started = time.perf_counter()
            ask_without_llm(ask, questions[n % len(questions)])
            times.append((time.perf_counter() - started) * 1000)
        server, cpu = cpu_seconds(backend) - server, time.process_time() - cpu
        spent = {sql: list(ms) for sql, ms in spent.items()}  # the first pass's
        profiler = cProfile.Profile(time.process_time)  # a second pass: the profiler's own cost stays out above
        profiler.enable()
        for n in range(asks):
            ask_without_llm(ask, questions[n % len(questions)])
        profiler.disable()
    statements = {
        sql: {"per_ask": round(len(ms) / asks, 2), "ms_per_ask": round(sum(ms) / asks, 2)}
        for sql, ms in sorted(spent.items(), key=lambda item: -sum(item[1]))
    }
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(top)
    return {
        "asks": asks,
        **latency_summary(times),
        "client_cpu_ms_per_ask": round(1000 * cpu / asks, 2),
        "server_cpu_ms_per_ask": round(1000 * server / asks, 2),
        "statements_per_ask": round(sum(len(ms) for ms in spent.values()) / asks, 2),
        "statement_ms_per_ask": round(sum(sum(ms) for ms in spent.values()) / asks, 2),
        "statements": statements,
        "client_profile": [line for line in out.getvalue().splitlines() if line.strip()][: top + 8],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="postgres.py profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="a `postgres.py scale --workdir` build")
    parser.add_argument("--asks", type=int, default=200)
    parser.add_argument("--top", type=int, default=12, help="client functions listed")
    parser.add_argument("--results", type=Path, help="also write the retrieval results of ~200 queries here")
    args = parser.parse_args(argv)
    clean_environment()
    folder = args.workdir.resolve()
    rows = json.loads((folder / "vault_queries.json").read_text(encoding="utf-8"))
    questions = [LABEL.sub("", row["query_text"], count=1) for row in rows]
    server, settings = postgres_embedded.start(folder / "pgdata", keep=True)
    try:
        log(f"profile: {args.asks} asks")
        result = {"benchmark": "postgres-ask-profile", "workdir": str(folder), "server_settings": settings}
        url = database(server, "scale", fresh=False)
        result.update(profile(url, questions, args.asks, args.top))
        if args.results:
            with open_backend("postgresql", url) as store:
                found = retrieval_results(store, questions)
            args.results.write_text(json.dumps(found, sort_keys=True), encoding="utf-8")
            result["results"] = {"file": str(args.results), "queries": len(found)}
        from crossmodalrag.store.postgres.connection import close_pools

        close_pools()
    finally:
        server.cleanup()
    return print_result(result)


if __name__ == "__main__":
    raise SystemExit(main())
