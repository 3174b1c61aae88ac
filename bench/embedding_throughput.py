#!/usr/bin/env python3
"""Embedding throughput: the product pipeline against fastembed alone, on the same texts.

    python bench/embedding_throughput.py [--shared DIR] [--abstracts 500] [--rounds 2]

The first N SciFact abstracts are ingested through the product path; then, alternating (to cancel
drift on a shared machine), the same chunks are embedded (a) by fastembed directly, passing the
chunk texts to `passage_embed` in batches of 32 (fastembed truncates what does not fit), and
(b) by the product pipeline (`embed_missing`: split to the 256-token window, length-sorted batches
of 32, SQLite writes), into a fresh copy each round. Reports chunks/s, tokens covered, and the
pipeline's cost relative to fastembed per chunk and per token embedded.
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, fastembed_alone, log, machine, source_state

from crossmodalrag.config import Settings
from crossmodalrag.index.embed import load_embedder, pieces
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.index.models import install_offline
from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.store import open_store
from crossmodalrag.types import Document


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--abstracts", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    clean_environment()
    rows = (args.shared / "data" / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus = [json.loads(line) for line in rows[: args.abstracts]]
    work = Path(tempfile.mkdtemp(prefix="bench-embed-"))
    settings = Settings(db_path=work / "base.db")
    install_offline(settings)
    with open_store(settings.db_path) as store:
        docs = (Document(f"scifact:{d['_id']}", "abstract", d["title"], d["text"], "plain") for d in corpus)
        ingest_documents(store, docs, {}, IngestReport())
        texts = [text for (text,) in store.conn.execute("SELECT text FROM chunks ORDER BY id")]
    embedder, fastembed = load_embedder(settings), fastembed_alone(settings)
    split = [part for text in texts for part in pieces(embedder, text)]
    tokenizer = embedder._tokenizer
    raw_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts))  # truncated at the window
    piece_tokens = sum(len(e.ids) for e in tokenizer.encode_batch(split))
    raw_times, pipeline_times = [], []
    for round_number in range(args.rounds):
        log(f"round {round_number + 1}: fastembed alone")
        started = time.perf_counter()
        list(fastembed.passage_embed(texts, batch_size=32))
        raw_times.append(time.perf_counter() - started)
        log(f"round {round_number + 1}: product pipeline")
        copy = work / f"round{round_number}.db"
        shutil.copy(settings.db_path, copy)
        with open_store(copy) as store:
            pipeline_times.append(embed_missing(store, embedder, 32).seconds)
    raw, pipeline = min(raw_times), min(pipeline_times)
    result = {
        "benchmark": "embedding_throughput",
        "model": embedder.identity.name,
        "machine": machine(),
        "source": source_state(),
        "chunks": len(texts),
        "pieces": len(split),
        "fastembed": {
            "seconds": round(raw, 2),
            "chunks_per_second": round(len(texts) / raw, 2),
            "tokens_embedded": raw_tokens,
            "tokens_per_second": round(raw_tokens / raw),
        },
        "pipeline": {
            "seconds": round(pipeline, 2),
            "chunks_per_second": round(len(texts) / pipeline, 2),
            "tokens_embedded": piece_tokens,
            "tokens_per_second": round(piece_tokens / pipeline),
        },
        "pipeline_time_vs_fastembed": round(pipeline / raw, 3),
        "pipeline_time_per_token_vs_fastembed": round((pipeline / piece_tokens) / (raw / raw_tokens), 3),
        "rounds": {
            "fastembed_seconds": [round(t, 2) for t in raw_times],
            "pipeline_seconds": [round(t, 2) for t in pipeline_times],
        },
    }
    print(json.dumps(result, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
