#!/usr/bin/env python3
"""LoCoMo dev (5 conversations): turn- and session-level evidence recall, lexical vs hybrid.

    python bench/locomo.py [--shared DIR] [--workdir DIR] [--lexical-only]

Every turn is indexed through the product's own ingest path as one source (`locomo:<conv>:<dia_id>`,
text = "speaker: text" plus the image caption if any, timestamp = the session's date), one store per
conversation. Each question (categories 1-4; category 5 is adversarial and has no evidence to find)
is run through `crossmodalrag.retrieval.search.search` exactly as `mem ask` would, with the product's
defaults. Reported per category and overall:
  turn recall@5 / @10      fraction of the question's evidence turns among the top-k turns
  session recall@5         fraction of the gold sessions among the sessions of the top-5 turns
  session hit@5            1 if any gold session is among them ("any gold session" definition)
Lexical and hybrid (offline MiniLM; embedded in the same run) are measured in the same run.
Published reference (full set): BM25 over turns turn R@10 ~0.58, session R@5 ~0.82.
Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

from crossmodalrag.config import Settings
from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import open_store
from crossmodalrag.types import Document

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def session_time(text: str) -> float | None:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def load_locomo(shared: Path) -> list[dict]:
    """The LoCoMo dev conversations, read in place from the shared data folder."""
    return json.loads((shared / "data" / "locomo" / "locomo_dev.json").read_text(encoding="utf-8"))


def turn_documents(index: int, conversation: dict) -> list[Document]:
    docs = []
    for key, turns in conversation.items():
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        when = session_time(conversation.get(f"{key}_date_time", ""))
        for turn in turns:
            caption = f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
            docs.append(
                Document(
                    uri=f"locomo:{index}:{turn['dia_id']}",
                    source_type="turn",
                    title=f"{turn['speaker']} ({conversation.get(f'{key}_date_time', key)})",
                    text=f"{turn['speaker']}: {turn['text']}{caption}",
                    format="plain",
                    timestamp=when,
                    locator=turn["dia_id"],
                )
            )
    return docs


def session_of(dia_id: str) -> str:
    return dia_id.split(":")[0]


def score_question(ranked_turns: list[str], evidence: list[str]) -> dict[str, float]:
    gold_turns = set(evidence)
    gold_sessions = {session_of(d) for d in evidence}
    top5_sessions = {session_of(d) for d in ranked_turns[:5]}
    return {
        "turn_recall@5": len(gold_turns & set(ranked_turns[:5])) / len(gold_turns),
        "turn_recall@10": len(gold_turns & set(ranked_turns[:10])) / len(gold_turns),
        "session_recall@5": len(gold_sessions & top5_sessions) / len(gold_sessions),
        "session_hit@5": 1.0 if gold_sessions & top5_sessions else 0.0,
    }


def summarize(rows: list[tuple[int, dict[str, float]]]) -> dict:
    by_category: dict[str, list[dict]] = defaultdict(list)
    for category, metrics in rows:
        by_category[CATEGORIES[category]].append(metrics)
        by_category["overall"].append(metrics)
    return {
        name: {"questions": len(items), **{k: round(sum(m[k] for m in items) / len(items), 4) for k in items[0]}}
        for name, items in by_category.items()
    }


def run(data: list[dict], workdir: Path, hybrid: bool) -> dict:
    rows: list[tuple[int, dict[str, float]]] = []
    latencies: list[float] = []
    embed_seconds = 0.0
    options = SearchOptions(top_k=10, max_chunks_per_source=1)
    for index, sample in enumerate(data):
        settings = Settings(db_path=workdir / f"{'hybrid' if hybrid else 'lexical'}-{index}.db")
        store = open_store(settings.db_path)
        ingest_documents(store, turn_documents(index, sample["conversation"]), {}, IngestReport())
        semantic = None
        if hybrid:
            from crossmodalrag.index.embed import load_embedder
            from crossmodalrag.index.embeddings import embed_missing
            from crossmodalrag.index.models import install_offline
            from crossmodalrag.retrieval.semantic import SemanticIndex

            install_offline(settings)
            embedder = load_embedder(settings)
            embed_seconds += embed_missing(store, embedder).seconds
            semantic = SemanticIndex(store, embedder, settings)
        questions = [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]
        for question in questions:
            started = time.perf_counter()
            result = search(store, question["question"], options, semantic)
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = [hit.source_uri.split(":", 2)[2] for hit in result.hits]
            rows.append((question["category"], score_question(ranked, question["evidence"])))
        log(f"[{'hybrid' if hybrid else 'lexical'}] conversation {index}: {len(questions)} questions")
        store.close()
    latencies.sort()
    return {
        "metrics": summarize(rows),
        "query_ms_p50": round(latencies[len(latencies) // 2], 2),
        "embed_seconds": round(embed_seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--lexical-only", action="store_true")
    args = parser.parse_args()
    clean_environment()
    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="locomo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "locomo",
        "conversations": len(data),
        "machine": machine(),
        "source": source_state(),
        "lexical": run(data, workdir, hybrid=False),
    }
    if not args.lexical_only:
        result["hybrid"] = run(data, workdir, hybrid=True)
        lexical, hybrid = result["lexical"]["metrics"]["overall"], result["hybrid"]["metrics"]["overall"]
        result["ratio_hybrid_vs_lexical"] = {
            k: round(hybrid[k] / lexical[k], 3) for k in lexical if k != "questions" and lexical[k]
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
