#!/usr/bin/env python3
"""Where #13 benchmark 2's gap lies: LoCoMo dev through `mem ingest-chat` + `mem ask` beside the same
turns stored one by one with `memory_store` + `memory_search`, question by question (episodic).

    python bench/agent_paths.py [--shared DIR] [--workdir DIR] [--crumb first-line|date-only|words-only]

Each conversation becomes two memories in the work dir: its LoCoMo JSON through `mem ingest-chat` (as
bench/agent_locomo.py) and its turns through `remember()`, the function `memory_store` calls, in this
process (the arguments bench/agent_mcp.py sends: "speaker: text", session, dia_id tag, session date, the
turn before as context; the MCP transport adds nothing to what is stored or found). Every question of
categories 1-4 is then answered by both through the functions `mem ask --json` and `memory_search` call.
`--crumb` stores the memories with another first line for their chunks (an experiment on what the gap
is made of; the product's is `first-line`): `date-only` drops the memory's first line from it,
`words-only` keeps it for the lexical index but not in the vector. Prints one JSON object: both paths'
overall figures, per conversation, and the questions where they differ in session recall@5.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from agent_locomo import MEM, ask, score
from agent_mcp import turns_of
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo

from crossmodalrag.agent import memories
from crossmodalrag.agent.tools import parse_when, search_memory
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.chunking import turns as turn_chunks
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_store

METRICS = ("turn_recall@10", "session_recall@5", "session_hit@5")


def use_crumb(kind: str) -> None:
    """Make stored memories' chunks open with another first line (see the module docstring)."""
    if kind == "first-line":
        return
    product = memories.memory_document

    def dated_only(text, key, when, attributes):
        doc = product(text, key, when, attributes)
        doc.metadata["_breadcrumb"] = doc.metadata["_breadcrumb"][len(doc.title) + len(" · ") :]  # "title · day…"
        return doc

    def words_only(text: str) -> str:  # the first line's title part left out of the vector
        plain = semantic(text)
        head, _, body = plain.partition("\n")
        title, _, rest = head.rpartition(" · ")
        return f"{rest}\n{body}" if title and body.startswith(title.rstrip("…")) else plain

    semantic = turn_chunks.semantic_text
    if kind == "date-only":
        memories.memory_document = dated_only
    else:
        turn_chunks.semantic_text = words_only
        for module in list(sys.modules.values()):
            if getattr(module, "semantic_text", None) is semantic:
                module.semantic_text = words_only


def chat_memory(sample: dict, index: int, workdir: Path, env: dict) -> Path:
    db = workdir / f"chat-{index}.db"
    if not db.exists():
        export = workdir / f"conversation-{index}.json"
        export.write_text(json.dumps([sample]), encoding="utf-8")
        subprocess.run([*MEM, "models", "install", "--offline", "--db-path", str(db)], env=env, check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*MEM, "ingest-chat", str(export), "--db-path", str(db)], env=env, check=True,
                       capture_output=True)  # fmt: skip
    return db


def stored_memory(sample: dict, index: int, workdir: Path, env: dict, crumb: str) -> Path:
    db = workdir / f"memories-{crumb}-{index}.db"
    if db.exists():
        return db
    subprocess.run([*MEM, "models", "install", "--offline", "--db-path", str(db)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    settings = load_settings({"db_path": db})
    with open_store(db, create=True) as store:
        embedder = memories.load_memory_embedder(settings)[0]
        for _, _, turn in turns_of(sample["conversation"]):
            memories.remember(store, turn["content"], turn["tags"], session_id=turn["session_id"],
                              embedder=embedder, when=parse_when(turn.get("when"), "when"),
                              context=turn.get("context", ""))  # fmt: skip
    return db


def searched_turns(db: Path, question: str) -> list[str]:
    """memory_search's results (limit 10, episodic) as the dia_ids their memories were stored with."""
    settings = load_settings({"db_path": db})
    with open_store(db, create=False) as store:
        tags = store.conn.execute("SELECT source_id, tags FROM agent_memories")
        dia = {source: json.loads(tagged)[0] for source, tagged in tags}
        found = search_memory(open_retriever(store, settings, 10), question, limit=10, strategy="episodic")
    return [dia[result["id"]].replace("-", ":").upper() for result in found["results"] if result["id"] in dia]


def mean(rows: list[dict], path: str) -> dict[str, float]:
    return {metric: round(sum(row[path][metric] for row in rows) / len(rows), 4) for metric in METRICS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--crumb", default="first-line", choices=("first-line", "date-only", "words-only"))
    args = parser.parse_args()
    env = clean_environment()
    use_crumb(args.crumb)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-paths-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for index, sample in enumerate(load_locomo(args.shared)):
        chat, stored = chat_memory(sample, index, workdir, env), stored_memory(sample, index, workdir, env, args.crumb)
        for question in (q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")):
            text, evidence = question["question"], question["evidence"]
            asked, searched = ask(chat, text, "episodic")["turns"], searched_turns(stored, text)
            rows.append({"conversation": index, "category": question["category"], "question": text,
                         "ask": score(asked, evidence), "memory_search": score(searched, evidence)})  # fmt: skip
        log(f"conversation {index}: {len(rows)} questions so far")
    change = [(row, row["memory_search"]["session_recall@5"] - row["ask"]["session_recall@5"]) for row in rows]
    lost, gained = [(r, -d) for r, d in change if d < 0], [(r, d) for r, d in change if d > 0]
    print(json.dumps({
        "benchmark": "agent_paths", "crumb": args.crumb, "machine": machine(), "source": source_state(),
        "mem_ask": mean(rows, "ask"), "memory_search": mean(rows, "memory_search"),
        "per_conversation": {
            index: {"mem_ask": mean(part, "ask"), "memory_search": mean(part, "memory_search")}
            for index in sorted({row["conversation"] for row in rows})
            if (part := [row for row in rows if row["conversation"] == index])
        },
        "session_recall@5_differs": {
            "lost": len(lost), "lost_units": round(sum(d for _, d in lost), 2),
            "gained": len(gained), "gained_units": round(sum(d for _, d in gained), 2),
            "lost_by_category": {c: sum(1 for r, _ in lost if r["category"] == c) for c in sorted(CATEGORIES)},
        },
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
