#!/usr/bin/env python3
"""SciFact (BEIR) retrieval benchmark: `mem`'s own ingest + search against plain FTS5 BM25.

    python bench/scifact.py [--shared DIR] [--workdir DIR] [--split train] [--sweep]

Indexes the 5,183 abstracts through `crossmodalrag.ingest.ingest_documents` into a fresh store,
runs every judged query of the split through `crossmodalrag.retrieval.search.search`, aggregates
chunks to documents (first occurrence of each source uri) and scores nDCG@10 (graded gains,
log2 discount, as pytrec_eval/BEIR) and recall@100. The baseline, measured in the same run, is a
plain FTS5 table `fts5(title, text)` (unicode61, and a porter variant) queried with an OR of the
query's lowercase non-stopword tokens, ranked by bm25(d).

Prints one JSON object on stdout; progress goes to stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sqlite3
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from benchlib import DEFAULT_SHARED, clean_environment, fastembed_alone, log, machine, percentile, source_state

from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.stopwords import STOPWORDS
from crossmodalrag.store import open_store
from crossmodalrag.types import Document

WORD = re.compile(r"\w+")
SWEEP_TITLE_WEIGHTS = (0.0, 0.5, 1.0, 2.0)
Ranker = Callable[[str], list[str]]


# ---------------------------------------------------------------- data


def load_corpus(root: Path) -> list[dict]:
    with (root / "corpus.jsonl").open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def load_queries(root: Path) -> dict[str, str]:
    with (root / "queries.jsonl").open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return {row["_id"]: row["text"] for row in rows}


def load_qrels(root: Path, split: str) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with (root / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for query_id, doc_id, score in reader:
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    return qrels


# ---------------------------------------------------------------- metrics


def ndcg_at(ranked: Sequence[str], gains: dict[str, int], k: int) -> float:
    """nDCG@k with graded gains and a log2(rank + 1) discount, as pytrec_eval's ndcg_cut."""
    dcg = sum(gains.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal_gains = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: Sequence[str], gains: dict[str, int], k: int) -> float:
    relevant = {doc for doc, g in gains.items() if g > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def evaluate(name: str, rank: Ranker, queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict:
    """Run every judged query once through `rank` and aggregate quality and latency."""
    ndcgs, recalls, latencies = [], [], []
    for n, query_id in enumerate(sorted(qrels, key=int), 1):
        started = time.perf_counter()
        ranked = rank(queries[query_id])
        latencies.append((time.perf_counter() - started) * 1000)
        ndcgs.append(ndcg_at(ranked, qrels[query_id], 10))
        recalls.append(recall_at(ranked, qrels[query_id], 100))
        if n % 200 == 0:
            log(f"  {name}: {n}/{len(qrels)} queries")
    return {
        "ndcg@10": round(sum(ndcgs) / len(ndcgs), 4),
        "recall@100": round(sum(recalls) / len(recalls), 4),
        "latency_ms_p50": round(percentile(latencies, 0.50), 3),
        "latency_ms_p95": round(percentile(latencies, 0.95), 3),
        "latency_ms_mean": round(sum(latencies) / len(latencies), 3),
    }


# ---------------------------------------------------------------- mem


def to_documents(corpus: list[dict]) -> list[Document]:
    return [
        Document(
            uri=f"scifact:{row['_id']}",
            source_type="abstract",
            title=row.get("title", ""),
            text=row.get("text", ""),
            format="plain",
            modality="text",
        )
        for row in corpus
    ]


def index_with_mem(db_path: Path, corpus: list[dict]):
    """Ingest through the product path; returns (store, figures)."""
    store = open_store(db_path)
    docs = to_documents(corpus)
    report = IngestReport()
    started = time.perf_counter()
    ingest_documents(store, docs, known={}, report=report)
    seconds = time.perf_counter() - started
    if report.failures:
        raise SystemExit(f"ingest failed: {report.failures[:3]}")
    sources = store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
    chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    return store, {
        "ingest_seconds": round(seconds, 3),
        "sources": sources,
        "chunks": chunks,
        "chunks_per_second": round(chunks / seconds, 1),
    }


def mem_ranker(store, options: SearchOptions, semantic=None) -> Ranker:
    def rank(query: str) -> list[str]:
        uris = [hit.source_uri for hit in search(store, query, options, semantic).hits]
        return [uri.removeprefix("scifact:") for uri in dict.fromkeys(uris)]

    return rank


# ---------------------------------------------------------------- baseline


def baseline_expression(query: str, distinct: bool = True) -> str:
    """OR of the query's lowercase \\w+ tokens that are not stopwords, each double-quoted.

    With distinct=False a token repeated in the query is repeated in the OR, which FTS5's bm25()
    counts once per occurrence (the issue's 0.698 figure was measured that way, with porter).
    """
    tokens = [t for t in WORD.findall(query.lower()) if t not in STOPWORDS]
    return " OR ".join(f'"{t}"' for t in (dict.fromkeys(tokens) if distinct else tokens))


def index_baseline(corpus: list[dict], tokenizer: str | None) -> tuple[sqlite3.Connection, list[str], float]:
    conn = sqlite3.connect(":memory:")
    tokenize = f", tokenize = '{tokenizer}'" if tokenizer else ""
    started = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE d USING fts5(title, text{tokenize})")
    with conn:
        conn.executemany(
            "INSERT INTO d (rowid, title, text) VALUES (?, ?, ?)",
            ((i, row.get("title", ""), row.get("text", "")) for i, row in enumerate(corpus)),
        )
    return conn, [row["_id"] for row in corpus], time.perf_counter() - started


def baseline_ranker(conn: sqlite3.Connection, doc_ids: list[str], distinct: bool) -> Ranker:
    def rank(query: str) -> list[str]:
        expression = baseline_expression(query, distinct)
        if not expression:
            return []
        rows = conn.execute("SELECT rowid FROM d WHERE d MATCH ? ORDER BY bm25(d) LIMIT 100", (expression,))
        return [doc_ids[rowid] for (rowid,) in rows]

    return rank


def run_baseline(name: str, corpus, queries, qrels, tokenizer: str | None, distinct: bool = True) -> dict:
    log(f"{name}: indexing {len(corpus)} abstracts (tokenizer: {tokenizer or 'unicode61 (default)'})")
    conn, doc_ids, seconds = index_baseline(corpus, tokenizer)
    figures = {
        "tokenizer": tokenizer or "unicode61",
        "query_terms": "distinct" if distinct else "repeated",
        "index_seconds": round(seconds, 3),
    }
    figures.update(evaluate(name, baseline_ranker(conn, doc_ids, distinct), queries, qrels))
    conn.close()
    return figures


# ---------------------------------------------------------------- main


def embedding_throughput(store, settings, embedder, sample: int) -> dict:
    """The product pipeline (split to the window, length-sorted batches, SQLite writes) against
    fastembed alone on the very same piece texts, on the first `sample` chunks."""
    from crossmodalrag.index.embed import pieces

    rows = store.conn.execute("SELECT text FROM chunks ORDER BY id LIMIT ?", (sample,)).fetchall()
    texts = [part for (text,) in rows for part in pieces(embedder, text)]
    fastembed = fastembed_alone(settings)
    started = time.perf_counter()
    list(fastembed.passage_embed(texts, batch_size=32))
    raw = time.perf_counter() - started
    return {
        "sample_chunks": len(rows),
        "sample_pieces": len(texts),
        "fastembed_seconds": round(raw, 2),
        "fastembed_chunks_per_second": round(len(rows) / raw, 2),
    }


def run_hybrid(store, tmp: Path, options: SearchOptions, queries, qrels, sample: int) -> dict:
    """Embed the corpus with the offline MiniLM, then score vector alone, each profile and RRF."""
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.retrieval import profiles
    from crossmodalrag.retrieval.semantic import SemanticIndex

    settings = Settings(db_path=store.path)
    install_offline(settings)
    embedder = load_embedder(settings)
    log(f"hybrid: raw fastembed throughput on the first {sample} chunks")
    throughput = embedding_throughput(store, settings, embedder, sample)
    log("hybrid: embedding the corpus through the product pipeline (mem reindex-embeddings' code)")
    report = embed_missing(store, embedder, settings.embed_batch_size)
    pipeline_rate = report.chunks / report.seconds
    throughput.update(
        corpus_chunks=report.chunks,
        corpus_vectors=report.pieces,
        pipeline_seconds=round(report.seconds, 1),
        pipeline_chunks_per_second=round(pipeline_rate, 2),
        pipeline_vs_fastembed=round(throughput["fastembed_chunks_per_second"] / pipeline_rate, 3),
    )
    semantic = SemanticIndex(store, embedder, settings)
    # Diagnostic only: a profile that is all vector, to report "vector alone" through the same code.
    profiles.PROFILES.setdefault("vector_only", {"vector": 1.0, "lexical": 0.0, "recency": 0.0, "usage": 0.0})
    variants = {"vector_only": replace(options, profile="vector_only", title_boost_weight=0.0)}
    variants.update({name: replace(options, profile=name) for name in ("balanced", "relevant", "recent", "usage")})
    variants["rrf"] = replace(options, fusion="rrf")
    scores = {}
    for name, variant in variants.items():
        log(f"hybrid: {name}")
        scores[name] = evaluate(name, mem_ranker(store, variant, semantic), queries, qrels)
    return {"model": embedder.identity.name, "embedding": throughput, "runs": scores}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (data/scifact inside)")
    parser.add_argument("--workdir", type=Path, help="where the temporary database goes (default: a temp dir)")
    parser.add_argument("--split", default="train", help="qrels split to score (default: train)")
    parser.add_argument(
        "--title-weight",
        type=float,
        default=None,
        help="SearchOptions.title_column_weight (default: the product default)",
    )
    parser.add_argument(
        "--candidates", type=int, default=None, help="SearchOptions.min_candidates (default: the product default)"
    )
    parser.add_argument(
        "--sweep", action="store_true", help=f"also score title_column_weight in {SWEEP_TITLE_WEIGHTS} (diagnostic)"
    )
    parser.add_argument("--limit", type=int, default=None, help="score only the first N judged queries (smoke runs)")
    parser.add_argument(
        "--hybrid", action="store_true", help="also embed with the offline MiniLM and score hybrid runs"
    )
    parser.add_argument(
        "--embed-sample", type=int, default=1000, help="chunks for the raw-vs-pipeline throughput check"
    )
    return parser.parse_args(argv)


def search_options(args: argparse.Namespace) -> SearchOptions:
    options = SearchOptions(top_k=100, max_chunks_per_source=1, recency_weight=0.0, dedupe_threshold=0)
    if args.title_weight is not None:
        options = replace(options, title_column_weight=args.title_weight)
    if args.candidates is not None:
        options = replace(options, min_candidates=args.candidates)
    return options


def options_dict(options: SearchOptions) -> dict:
    return {name: getattr(options, name) for name in options.__dataclass_fields__}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clean_environment()
    root = args.shared / "data" / "scifact"
    if not (root / "corpus.jsonl").is_file():
        log(f"error: no SciFact corpus at {root} (hint: pass --shared DIR)")
        return 2
    corpus, queries, qrels = load_corpus(root), load_queries(root), load_qrels(root, args.split)
    if args.limit:
        qrels = {q: qrels[q] for q in sorted(qrels, key=int)[: args.limit]}
    log(f"scifact: {len(corpus)} abstracts, {len(qrels)} judged {args.split} queries")

    options = search_options(args)
    with tempfile.TemporaryDirectory(prefix="bench-scifact-", dir=args.workdir) as tmp:
        log("mem: ingesting through crossmodalrag.ingest.ingest_documents")
        store, ingest = index_with_mem(Path(tmp) / "scifact.db", corpus)
        log(f"mem: {ingest['chunks']} chunks in {ingest['ingest_seconds']} s; searching")
        mem = {"options": options_dict(options), **ingest}
        mem.update(evaluate("mem", mem_ranker(store, options), queries, qrels))
        sweep = None
        if args.sweep:
            sweep = {}
            for weight in SWEEP_TITLE_WEIGHTS:
                log(f"sweep: title_column_weight={weight}")
                swept = replace(options, title_column_weight=weight)
                sweep[str(weight)] = evaluate(f"sweep {weight}", mem_ranker(store, swept), queries, qrels)
        hybrid = run_hybrid(store, Path(tmp), options, queries, qrels, args.embed_sample) if args.hybrid else None
        store.close()

    baseline = run_baseline("baseline_fts5", corpus, queries, qrels, None)
    porter = run_baseline("baseline_fts5_porter", corpus, queries, qrels, "porter unicode61")
    repeated = run_baseline("baseline_fts5_porter_repeated_terms", corpus, queries, qrels, "porter unicode61", False)

    result = {
        "benchmark": "scifact",
        "split": args.split,
        "queries": len(qrels),
        "corpus": len(corpus),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "source": source_state(),
        "mem": mem,
        "baseline_fts5": baseline,
        "baseline_fts5_porter": porter,
        "baseline_fts5_porter_repeated_terms": repeated,
        "ratio_ndcg10_vs_baseline": round(mem["ndcg@10"] / baseline["ndcg@10"], 4),
        "ratio_ndcg10_vs_baseline_porter": round(mem["ndcg@10"] / porter["ndcg@10"], 4),
        "ratio_recall100_vs_baseline": round(mem["recall@100"] / baseline["recall@100"], 4),
        "ratio_latency_p50_vs_baseline": round(mem["latency_ms_p50"] / baseline["latency_ms_p50"], 2),
    }
    if sweep is not None:
        result["sweep_title_column_weight"] = sweep
    if hybrid is not None:
        result["hybrid"] = hybrid
        lexical = mem["ndcg@10"]
        result["ratio_ndcg10_hybrid_vs_lexical"] = {
            k: round(v["ndcg@10"] / lexical, 4) for k, v in hybrid["runs"].items()
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
