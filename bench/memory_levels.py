#!/usr/bin/env python3
"""Retrieval at each memory level on LoCoMo dev, without an LLM: gold events stand in for L1.

    nice -n 5 python bench/memory_levels.py [--lexical-only] [--events ROWS.jsonl [--gold-events]] [--workdir DIR]

Every turn is one source (`conversation`, one session = one project, timestamp = the session's
date), embedded with the offline MiniLM unless --lexical-only. Each gold `observation` (a sentence
and the turn it comes from) becomes an L1 event linked to that turn's chunk; then the product's own
code builds episodes, concepts and the graph. Each question (categories 1-4) is retrieved through
`--level evidence` (plain hybrid search), `event` (event drill-down fused with plain retrieval by
RRF), `episode` and `concept` (matched nodes, drilled down), top 10, one chunk per source, and
scored by turn recall@10 per category (what `mem eval --level` scores: only the top-k chunks).
Targets: event >= evidence + 3 points overall and + 4 on multi-hop; single-hop never below - 1.

`--events ROWS.jsonl` uses the events a model extracted instead (the per-session rows that
`memory_events.py --rows` writes: statement, supported, linked turns). Only those sessions have
events, so only the questions whose evidence turns all lie in them are asked; `--gold-events` asks
the same questions with the gold observations of the same sessions, for comparison.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo, score_question, session_time, summarize

from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.config import Settings
from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.retrieval.search import SearchOptions
from crossmodalrag.store import open_store
from crossmodalrag.types import Document

LEVELS = ("evidence", "event", "episode", "concept")


def turn_documents(index: int, conversation: dict) -> list[Document]:
    docs = []
    for key, turns in conversation.items():
        if not key.startswith("session_") or not isinstance(turns, list):
            continue
        stamp = conversation.get(f"{key}_date_time", key)
        for turn in turns:
            caption = f" [image: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
            docs.append(
                Document(
                    uri=f"locomo:{index}:{turn['dia_id']}",
                    source_type="conversation",
                    title=f"{turn['speaker']} ({stamp})",
                    text=f"{turn['speaker']}: {turn['text']}{caption}",
                    format="plain",
                    timestamp=session_time(stamp),
                    locator=turn["dia_id"],
                    metadata={"session": f"locomo:{index}:{key}"},
                )
            )
    return docs


def gold_event_nodes(store, index: int, sample: dict, embedder):
    """One L1 node per gold observation, linked to the exact chunk of its turn."""
    from crossmodalrag.memory.nodes import Link, Node, stable_id

    chunk_of = {
        row[0]: (row[1], row[2], row[3])
        for row in store.conn.execute(
            "SELECT s.uri, c.id, s.id, s.timestamp FROM chunks c JOIN sources s ON s.id = c.source_id"
        )
    }
    nodes = []
    for key, speakers in sample["observation"].items():
        session = key.removesuffix("_observation")
        for items in speakers.values():
            for text, turn in items:
                turns = turn if isinstance(turn, list) else [turn]
                found = [chunk_of[f"locomo:{index}:{t}"] for t in turns if f"locomo:{index}:{t}" in chunk_of]
                if not found:
                    continue
                nodes.append(
                    Node(
                        id=stable_id("event", f"locomo:{index}:{session}", text.lower()),
                        level="event",
                        title=text[:80],
                        statement=text,
                        kind="fact",
                        project=f"locomo:{index}:{session}",
                        first_time=found[0][2],
                        last_time=found[0][2],
                        source_id=found[0][1],
                        links=[Link(chunk, "cited", 1.0) for chunk, _, _ in found],
                    )
                )
    if embedder is not None:
        for node, vector in zip(nodes, embedder.embed([n.statement for n in nodes]), strict=True):
            node.vector = vector.astype("float32").tobytes()
    return nodes


def read_extracted(path: Path) -> dict[int, dict[str, list]]:
    """conversation index -> session -> [statement, supported, [turn ids], (confidence)] from memory_events rows
    (the constrained run's row where a session has both)."""
    found: dict[int, dict[str, list]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        index, session = row["session"].split(":", 1)
        if row.get("constrained", True) or session not in found.get(int(index), {}):
            found.setdefault(int(index), {})[session] = row["extracted"]
    return found


def extracted_event_nodes(store, index: int, sessions: dict[str, list], embedder):
    """One L1 node per extracted event, linked to the chunks of the turns it was linked to."""
    from crossmodalrag.memory.nodes import Link, Node, stable_id

    chunk_of = {
        row[0]: (row[1], row[2], row[3])
        for row in store.conn.execute(
            "SELECT s.uri, c.id, s.id, s.timestamp FROM chunks c JOIN sources s ON s.id = c.source_id"
        )
    }
    nodes = []
    for session, events in sessions.items():
        for statement, supported, turns, *_ in events:  # rows since session 4 add the confidence
            # The rows list an event's linked turns best first (memory_evidence by score): keep that order.
            found = [chunk_of[f"locomo:{index}:{t}"] for t in turns if f"locomo:{index}:{t}" in chunk_of]
            if found:
                nodes.append(
                    Node(
                        id=stable_id("event", f"locomo:{index}:{session}", statement.lower()),
                        level="event", title=statement[:80], statement=statement, kind="fact",
                        project=f"locomo:{index}:{session}", first_time=found[0][2], last_time=found[0][2],
                        source_id=found[0][1], supported=bool(supported),
                        links=[Link(chunk, "cited", 1.0 - rank / 100) for rank, (chunk, _, _) in enumerate(found)],
                    )
                )  # fmt: skip
    if embedder is not None:
        for node, vector in zip(nodes, embedder.embed([n.statement for n in nodes]), strict=True):
            node.vector = vector.astype("float32").tobytes()
    return nodes


def only_sessions(sample: dict, sessions: set[str]) -> dict:
    """The sample with only the observations of `sessions` (gold events for the same sessions)."""
    kept = {k: v for k, v in sample["observation"].items() if k.removesuffix("_observation") in sessions}
    return {**sample, "observation": kept}


def asked(question: dict, sessions: set[str] | None) -> bool:
    """With extracted events (of some sessions only): the questions whose evidence all lies in them."""
    if sessions is None:
        return True
    return all(f"session_{turn.split(':')[0].removeprefix('D')}" in sessions for turn in question["evidence"])


def build_conversation(index: int, sample: dict, workdir: Path, embedder, extracted=None) -> tuple:
    from crossmodalrag.memory import concepts, episodes, graph
    from crossmodalrag.memory.nodes import delete_nodes, write_nodes
    from crossmodalrag.retrieval.semantic import SemanticIndex

    settings = Settings(db_path=workdir / f"levels-{index}.db")
    store = open_store(settings.db_path)
    known = dict(store.conn.execute("SELECT uri, fingerprint FROM sources"))  # a reused --workdir: not again
    ingest_documents(store, turn_documents(index, sample["conversation"]), known, IngestReport())
    semantic = None
    if embedder is not None:
        from crossmodalrag.index.embeddings import embed_missing

        embed_missing(store, embedder)
        semantic = SemanticIndex(store, embedder, settings)
    with store.transaction() as conn:  # a reused --workdir: the events of this run only
        delete_nodes(conn, [row[0] for row in conn.execute("SELECT id FROM memory_nodes")])
        if extracted is None:
            write_nodes(conn, gold_event_nodes(store, index, sample, embedder))
        else:
            write_nodes(conn, extracted_event_nodes(store, index, extracted, embedder))
    events = episodes.load_events(store.conn)
    built = {
        "episode": episodes.build_episodes(store, settings.episode_gap_hours, events),
        "concept": concepts.build_concepts(store, settings.concept_sim_threshold, None, events),
        "graph": graph.build_graph(store),
    }
    return store, semantic, settings, built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--events", type=Path, help="memory_events.py --rows output: use these extracted events")
    parser.add_argument("--gold-events", action="store_true", help="with --events: gold events of the same sessions")
    args = parser.parse_args()
    clean_environment()
    from crossmodalrag.memory.retrieve import LevelRetriever

    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-levels-"))
    workdir.mkdir(parents=True, exist_ok=True)
    embedder = None
    if not args.lexical_only:
        from crossmodalrag.index.embed import load_embedder
        from crossmodalrag.index.models import install_offline

        install_offline(Settings(db_path=workdir / "models.db"))
        embedder = load_embedder(Settings(db_path=workdir / "models.db"))
    rows: dict[str, list] = {level: [] for level in LEVELS}
    latency: dict[str, float] = {level: 0.0 for level in LEVELS}
    nodes = []
    extracted = read_extracted(args.events) if args.events else None
    for index, sample in enumerate(data):
        sessions = set(extracted.get(index, {})) if extracted is not None else None
        if sessions == set():
            continue
        if sessions is not None and args.gold_events:
            store, semantic, settings, built = build_conversation(
                index, only_sessions(sample, sessions), workdir, embedder
            )
        else:
            events = extracted[index] if extracted is not None else None
            store, semantic, settings, built = build_conversation(index, sample, workdir, embedder, events)
        nodes.append(built)
        base = Retriever(store, SearchOptions(top_k=10, max_chunks_per_source=1), semantic)
        retrievers = {"evidence": base, **{lv: LevelRetriever(base, lv, 180.0) for lv in LEVELS[1:]}}
        questions = [
            q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence") and asked(q, sessions)
        ]
        for question in questions:
            for level, retriever in retrievers.items():
                started = time.perf_counter()
                hits = retriever.search(question["question"]).hits
                latency[level] += time.perf_counter() - started
                ranked = [hit.source_uri.split(":", 2)[2] for hit in hits]
                rows[level].append((question["category"], score_question(ranked, question["evidence"])))
        log(f"conversation {index}: {len(questions)} questions, {built}")
        store.close()
    metrics = {level: summarize(rows[level]) for level in LEVELS}
    base = metrics["evidence"]
    result = {
        "benchmark": "memory_levels",
        "retrieval": "lexical" if args.lexical_only else "hybrid (MiniLM)",
        "events": "gold observations" if extracted is None or args.gold_events else f"extracted ({args.events.name})",
        "questions": len(rows["evidence"]),
        "machine": machine(),
        "source": source_state(),
        "built": nodes,
        "turn_recall@10": {lv: {c: m["turn_recall@10"] for c, m in metrics[lv].items()} for lv in LEVELS},
        "points_vs_evidence": {
            lv: {c: round(100 * (m["turn_recall@10"] - base[c]["turn_recall@10"]), 1) for c, m in metrics[lv].items()}
            for lv in LEVELS[1:]
        },
        "query_ms_mean": {lv: round(1000 * latency[lv] / max(1, len(rows[lv])), 1) for lv in LEVELS},
        "metrics": metrics,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
