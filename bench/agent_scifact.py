#!/usr/bin/env python3
"""SciFact train nDCG@10 per recall strategy: do the conversational strategies hurt other retrieval? (issue 13)

    python bench/agent_scifact.py [--shared DIR] [--split train]

The corpus goes through the product's ingest as in bench/scifact.py (lexical: no embedding model), then
every judged query is ranked by `search` (what `mem ask` does by default, `direct`, the baseline of the
same run) and by `agent.recall.recall` with `episodic` and `fusion` (top 10 each). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from scifact import evaluate, index_with_mem, load_corpus, load_qrels, load_queries, mem_ranker

from crossmodalrag.agent.recall import recall
from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.retrieval.search import SearchOptions


def strategy_ranker(store, options: SearchOptions, strategy: str):
    retriever = Retriever(store, options, None)

    def rank(query: str) -> list[str]:
        uris = [hit.source_uri for hit in recall(retriever, query, strategy).hits]
        return [uri.removeprefix("scifact:") for uri in dict.fromkeys(uris)]

    return rank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--split", default="train")
    args = parser.parse_args()
    clean_environment()
    root = args.shared / "data" / "scifact"
    corpus, queries, qrels = load_corpus(root), load_queries(root), load_qrels(root, args.split)
    options = SearchOptions(top_k=10)
    result = {"benchmark": "agent_scifact", "split": args.split, "machine": machine(), "source": source_state()}
    with tempfile.TemporaryDirectory(prefix="agent-scifact-") as tmp:
        store, _ = index_with_mem(Path(tmp) / "scifact.db", corpus)
        result["direct"] = evaluate("direct", mem_ranker(store, options), queries, qrels)
        for strategy in ("episodic", "fusion"):
            log(f"{strategy}: ranking {len(qrels)} queries")
            result[strategy] = evaluate(strategy, strategy_ranker(store, options, strategy), queries, qrels)
        store.close()
    result["ndcg10_minus_direct"] = {
        s: round(result[s]["ndcg@10"] - result["direct"]["ndcg@10"], 4) for s in ("episodic", "fusion")
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
