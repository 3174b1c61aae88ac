#!/usr/bin/env python3
"""FinanceBench dev: PDF ingest speed and page-level retrieval over 74 real filings (lexical).

    python bench/financebench.py [--shared DIR] [--workdir DIR]

Ingests every PDF of ../shared/data/financebench/pdfs through the product's `ingest_pdfs` (pages/s,
total time), then runs the 62 dev questions through `retrieval.search.search` as `mem ask` would.
A hit at page level is a retrieved chunk from one of the question's evidence pages (0-based in the
data, 1-based in our locators) of the right document; document level is any chunk of the right
document. Reported with the product default (at most 3 chunks per source, each further one at 0.8 of
its score), without that cap, and without the discount (before session 23).
Baseline in the same run: a plain FTS5 `fts5(text)` table with one row per page (unicode61),
queried with an OR of the question's non-stopword tokens, ranked by `bm25()`.
Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

from crossmodalrag.ingest import ingest_pdfs
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.stopwords import STOPWORDS
from crossmodalrag.store import open_store

WORD = re.compile(r"\w+")


def load_questions(root: Path) -> list[dict]:
    lines = (root / "questions_dev.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def gold_pages(question: dict) -> set[int]:
    return {e["evidence_page_num"] + 1 for e in question["evidence"]}


def score(ranked: list[tuple[str, int | None]], question: dict, k: int) -> dict[str, float]:
    doc, pages = question["doc_name"], gold_pages(question)
    top = ranked[:k]
    return {
        f"page_hit@{k}": float(any(d == doc and p in pages for d, p in top)),
        f"doc_hit@{k}": float(any(d == doc for d, _ in top)),
    }


def evaluate(rank, questions: list[dict]) -> dict:
    totals: dict[str, float] = {}
    latencies = []
    for question in questions:
        started = time.perf_counter()
        ranked = rank(question["question"])
        latencies.append((time.perf_counter() - started) * 1000)
        for k in (5, 10):
            for name, value in score(ranked, question, k).items():
                totals[name] = totals.get(name, 0.0) + value
    latencies.sort()
    result = {name: round(value / len(questions), 4) for name, value in sorted(totals.items())}
    result["query_ms_p50"] = round(latencies[len(latencies) // 2], 2)
    return result


def mem_ranker(store, options: SearchOptions, semantic=None):
    def rank(text: str) -> list[tuple[str, int | None]]:
        return [(Path(h.source_uri).stem, h.page) for h in search(store, text, options, semantic).hits]

    return rank


def undiscounted(options: SearchOptions) -> SearchOptions:
    """`options` with a source's further chunks ranked at their own score (before session 23)."""
    return replace(options, repeat_source_factor=1.0)


def hybrid(store, options: SearchOptions, questions: list[dict]) -> dict:
    """Embed every chunk with the offline MiniLM (what `mem reindex-embeddings` runs), then search."""
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.retrieval.semantic import SemanticIndex

    settings = Settings(db_path=store.path)
    install_offline(settings)
    embedder = load_embedder(settings)
    log("hybrid: embedding every chunk (slow: ~15 chunks/s on 2 cores)")
    report = embed_missing(store, embedder, settings.embed_batch_size)
    semantic = SemanticIndex(store, embedder, settings)
    result = evaluate(mem_ranker(store, options, semantic), questions)
    # The same vectors without session 20's query shift: what it does to PDF pages, in the same run.
    result["without_query_shift"] = evaluate(mem_ranker(store, replace(options, rocchio_hits=0), semantic), questions)
    # ... and without session 23's discount on a filing's further pages.
    result["without_repeat_discount"] = evaluate(mem_ranker(store, undiscounted(options), semantic), questions)
    result["embedding"] = {"chunks": report.chunks, "vectors": report.pieces, "seconds": round(report.seconds, 1)}
    return result


def baseline(pdfs: list[Path], questions: list[dict]) -> dict:
    import pypdfium2

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE p USING fts5(doc UNINDEXED, page UNINDEXED, text)")
    for path in pdfs:
        document = pypdfium2.PdfDocument(str(path))
        for index in range(len(document)):
            text = document[index].get_textpage().get_text_range()
            conn.execute("INSERT INTO p VALUES (?, ?, ?)", (path.stem, index + 1, text))
        document.close()

    def rank(text: str) -> list[tuple[str, int | None]]:
        tokens = list(dict.fromkeys(t for t in WORD.findall(text.lower()) if t not in STOPWORDS))
        expression = " OR ".join(f'"{t}"' for t in tokens)
        rows = conn.execute("SELECT doc, page FROM p WHERE p MATCH ? ORDER BY bm25(p) LIMIT 10", (expression,))
        return [(doc, page) for doc, page in rows]

    return evaluate(rank, questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--hybrid", action="store_true", help="also embed all chunks and score hybrid (~40 min)")
    args = parser.parse_args()
    clean_environment()
    root = args.shared / "data" / "financebench"
    pdfs = sorted((root / "pdfs").glob("*.pdf"))
    questions = load_questions(root)
    with tempfile.TemporaryDirectory(prefix="bench-financebench-", dir=args.workdir) as tmp:
        store = open_store(Path(tmp) / "fb.db")
        log(f"ingesting {len(pdfs)} PDFs")
        started = time.perf_counter()
        report = ingest_pdfs(store, [root / "pdfs"])
        seconds = time.perf_counter() - started
        pages = sum(json.loads(m)["pages"] for (m,) in store.conn.execute("SELECT metadata FROM sources"))
        empty = sum(len(json.loads(m)["empty_pages"]) for (m,) in store.conn.execute("SELECT metadata FROM sources"))
        ingest = {
            "pdfs": report.added,
            "failed": report.failed,
            "pages": pages,
            "pages_without_text": empty,
            "chunks": report.chunks,
            "seconds": round(seconds, 2),
            "pages_per_second": round(pages / seconds, 1),
        }
        log("searching")
        options = SearchOptions(top_k=10)
        default = evaluate(mem_ranker(store, options), questions)
        uncapped = evaluate(mem_ranker(store, replace(options, max_chunks_per_source=0)), questions)
        undiscounted_run = evaluate(mem_ranker(store, undiscounted(options)), questions)
        semantic_run = hybrid(store, options, questions) if args.hybrid else None
        store.close()
    log("baseline")
    plain = baseline(pdfs, questions)
    result = {
        "benchmark": "financebench",
        "questions": len(questions),
        "machine": machine(),
        "source": source_state(),
        "ingest": ingest,
        "mem_lexical": default,
        "mem_lexical_uncapped": uncapped,
        "mem_lexical_without_repeat_discount": undiscounted_run,
        "baseline_fts5_pages": plain,
        "ratio_page_hit@5_vs_baseline": round(default["page_hit@5"] / plain["page_hit@5"], 3)
        if plain["page_hit@5"]
        else None,
    }
    if semantic_run is not None:
        result["mem_hybrid"] = semantic_run
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
