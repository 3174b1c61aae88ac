"""The lexical side of an ask at scale on PostgreSQL (issue 16, session 8): every match scored
(lexical.SERVER_BM25, sessions 6-7) vs the exact top-k (topk.top_bm25), on a `scale` build.

    python bench/postgres.py topk --workdir DIR [--url URL] [--rounds 3] [--limit 50]

DIR is a `postgres.py scale --workdir DIR` build; its server is started (and stopped again) unless
--url names a database already running (e.g. while the build still writes: both figures are then
beside its load). The schema is used as found (no migration), so the same command measures a
schema-6 memory (postings read from the heap) and a schema-7 one (index-only). For make_vault's 20
questions, `--rounds` times each in turn: wall ms, the server backend's CPU ms (/proc) and rows
received for each path; and whether the top `--limit` (an ask's default: max(min_candidates,
3 x top_k) = 50) is identical, ids, scores and order.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import postgres_embedded
from benchlib import clean_environment, latency_summary, log, print_result
from postgres_ingest import cpu_seconds
from postgres_scale import LABEL


def measure(pid: int, run, *args) -> tuple[float, float, object]:
    wall, server = time.perf_counter(), cpu_seconds(pid)
    result = run(*args)
    return (time.perf_counter() - wall) * 1000, (cpu_seconds(pid) - server) * 1000, result


def compare(conn, questions: list[str], rounds: int, limit: int) -> dict:
    from crossmodalrag.index import fts
    from crossmodalrag.store.postgres import lexical, topk

    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    paths = {
        "every_match": lambda *a: lexical.bm25_scores(conn, *a, "any", None),
        "top_k": lambda *a: topk.top_bm25(conn, *a, limit),
    }
    figures = {path: {"wall": [], "server": [], "rows": []} for path in paths}
    identical = 0
    for round_number in range(rounds):
        for question in questions:
            terms = fts.query_terms(question)
            analyzed = [sorted(s) for s in fts.analyze(lexical.analyzer(), [t.word for t in terms])]
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")  # both paths see one snapshot
            found = {}
            for path in sorted(paths, reverse=round_number % 2 == 1):  # each goes first every other round
                wall, server, found[path] = measure(pid, paths[path], question, terms, analyzed)
                rows = found[path] if path == "every_match" else {**found[path].scores, **found[path].idf}
                for name, value in (("wall", wall), ("server", server), ("rows", len(rows))):
                    figures[path][name].append(value)
            conn.execute("COMMIT")
            best = sorted(found["every_match"].items(), key=lambda item: (-item[1], item[0]))[:limit]
            identical += list(found["top_k"].scores.items()) == best
    summary = {
        path: {
            "wall_ms": latency_summary(f["wall"]),
            "server_cpu_ms_mean": round(sum(f["server"]) / len(f["server"]), 1),
            "server_cpu_ms_max": round(max(f["server"]), 1),
            "rows_mean": round(sum(f["rows"]) / len(f["rows"]), 1),
            "rows_max": max(f["rows"]),
        }
        for path, f in figures.items()
    }
    return {**summary, "identical_top": f"{identical}/{rounds * len(questions)}", "limit": limit}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="postgres.py topk", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="a `postgres.py scale --workdir` build")
    parser.add_argument("--url", help="its database, when its server already runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=50)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import psycopg

    from crossmodalrag.store.postgres.connection import PgConnection

    args = parse_args(argv)
    clean_environment()
    rows = json.loads((args.workdir / "vault_queries.json").read_text(encoding="utf-8"))
    questions = [LABEL.sub("", row["query_text"], count=1) for row in rows]
    server, url = None, args.url
    if url is None:
        server, _ = postgres_embedded.start(args.workdir / "pgdata", keep=True)
        url = server.get_uri("scale")
    try:
        with psycopg.connect(url, autocommit=True) as raw:
            conn = PgConnection(raw)  # not open_postgres_store: the schema is measured as found
            result = {
                "benchmark": "postgres-topk",
                "chunks": conn.execute("SELECT COALESCE(SUM(chunks), 0)::bigint FROM chunk_stats").fetchone()[0],
                "schema": conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0],
            }
            log(f"topk: {result['chunks']} chunks, schema {result['schema']}, {len(questions)} questions")
            result.update(compare(conn, questions, args.rounds, args.limit))
    finally:
        if server is not None:
            server.cleanup()
    return print_result(result)
