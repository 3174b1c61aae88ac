#!/usr/bin/env python3
"""LoCoMo dev through MCP over stdio: `memory_store` per turn, `memory_search` per question (issue 13, benchmark 2).

    python bench/agent_mcp.py [--shared DIR] [--workdir DIR] [--conversations N] [--strategy episodic]
                              [--via store|digest] [--bare]

A real `mem mcp` process (the README's command) is driven by the MCP SDK's own client over stdio, one
fresh memory per conversation (the offline MiniLM installed first, so stores are embedded and compared at
once). Every turn is stored with `memory_store` ("speaker: text", session_id = its session, tags = its
dia_id, `when` = its session's date, `context` = the turn before it in the session, as an agent storing a
conversation knows both; `--bare` leaves `when` and `context` out); every question of categories 1-4 is
asked with `memory_search` (limit 10, compact). Scored as bench/agent_locomo.py scores `mem ask` (turn
recall@10, session recall@5, session hit@5), mapping each result's memory id back to the turn it stored;
a turn merged into an earlier identical one counts as that one. Also reported: tool-call latency p50/p95
per tool, how many stores were merged or deduplicated, and how many stored turns ended up superseded by a
later one (LoCoMo turns hardly ever restate a fact), and the overall figures of conversations 0-2 and 3-4.
`--via digest` instead hands each conversation's LoCoMo JSON to `memory_digest_session` (a job, polled
with `memory_job`; the work dir is the configured chat folder) and maps results to turns by chunk id:
the MCP server over the path `mem ingest-chat` takes, so its figures should equal bench/agent_locomo.py's.
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from agent_locomo import by_split, score
from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, machine, source_state
from locomo import CATEGORIES, load_locomo, session_time, summarize
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def turns_of(conversation: dict, bare: bool = False) -> list[tuple[str, str, dict]]:
    """(session key, dia_id, memory_store arguments) of every turn, in order: "speaker: text", the
    session, and (unless bare) when it was said (the session's date) and the turn it replies to."""
    found = []
    for key, turns in conversation.items():
        if key.startswith("session_") and isinstance(turns, list):
            when = session_time(conversation.get(f"{key}_date_time", ""))
            previous = ""
            for turn in turns:
                caption = f" [shares a photo: {turn['blip_caption']}]" if turn.get("blip_caption") else ""
                text = f"{turn['speaker']}: {turn['text']}{caption}"
                arguments = {"content": text, "session_id": key, "tags": [turn["dia_id"].replace(":", "-")]}
                if not bare:
                    arguments["context"] = previous
                    if when is not None:
                        arguments["when"] = datetime.fromtimestamp(when, timezone.utc).isoformat()
                found.append((key, turn["dia_id"], arguments))
                previous = text
    return found


async def timed(client, tool: str, arguments: dict, latencies: dict) -> dict:
    started = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    latencies.setdefault(tool, []).append((time.perf_counter() - started) * 1000)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return result.structured_content


async def run_conversation(
    sample: dict, db: Path, env: dict, strategy: str, latencies: dict, counts: dict, bare: bool = False
) -> list:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "crossmodalrag", "mcp"], env={**env, "CMRAG_DB_PATH": str(db)}
    )
    dia_of: dict[int, str] = {}
    async with Client(params) as client:
        for _, dia_id, arguments in turns_of(sample["conversation"], bare):
            stored = await timed(client, "memory_store", arguments, latencies)
            counts[stored["status"]] = counts.get(stored["status"], 0) + 1
            dia_of.setdefault(stored["id"], dia_id)
        return await search_questions(client, sample, strategy, latencies, lambda result: dia_of.get(result["id"]))


async def search_questions(client, sample: dict, strategy: str, latencies: dict, turn_of) -> list:
    """memory_search for every scored question; `turn_of(result)` names the turn a result is (or None)."""
    rows = []
    for question in (q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")):
        found = await timed(
            client, "memory_search", {"query": question["question"], "limit": 10, "strategy": strategy}, latencies
        )
        turns = [turn for result in found["results"] if (turn := turn_of(result))]
        rows.append((question["category"], score(turns, question["evidence"])))
    return rows


async def run_digest(sample: dict, db: Path, env: dict, strategy: str, latencies: dict, counts: dict) -> list:
    """The conversation's JSON through memory_digest_session, then memory_search per question."""
    export = db.with_name(db.stem.replace("memory", "conversation") + ".json")
    export.write_text(json.dumps([sample]), encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "crossmodalrag", "mcp"],
        env={**env, "CMRAG_DB_PATH": str(db), "CHAT_PATH_1": str(db.parent)},
    )
    async with Client(params) as client:
        job = await timed(client, "memory_digest_session", {"path": str(export)}, latencies)
        while job["status"] in ("queued", "running"):
            await asyncio.sleep(1)
            job = await timed(client, "memory_job", {"job_id": job["job_id"]}, latencies)
        counts[job["status"]] = counts.get(job["status"], 0) + 1
        with sqlite3.connect(db) as conn:
            turn_of = dict(conn.execute("SELECT id, json_extract(metadata, '$.turn_id') FROM chunks"))
        return await search_questions(
            client, sample, strategy, latencies, lambda result: turn_of.get(result["chunk_id"])
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--strategy", default="episodic", choices=("direct", "episodic", "fusion"))
    parser.add_argument("--via", default="store", choices=("store", "digest"))
    parser.add_argument("--bare", action="store_true", help="memory_store without `when` and `context`")
    args = parser.parse_args()
    env = clean_environment()
    data = load_locomo(args.shared)[: args.conversations]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-mcp-"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows_per_conversation, latencies, counts = [], {}, {}
    for index, sample in enumerate(data):
        db = workdir / f"memory-{index}.db"
        subprocess.run(
            [sys.executable, "-m", "crossmodalrag", "models", "install", "--offline", "--db-path", str(db)],
            env=env,
            check=True,
            capture_output=True,
        )
        if args.via == "store":
            rows = asyncio.run(run_conversation(sample, db, env, args.strategy, latencies, counts, args.bare))
        else:
            rows = asyncio.run(run_digest(sample, db, env, args.strategy, latencies, counts))
        rows_per_conversation.append(rows)
        with sqlite3.connect(db) as conn:  # turns a later turn was taken to update (agent/updates.py)
            superseded = conn.execute("SELECT COUNT(*) FROM agent_memories WHERE superseded_by IS NOT NULL")
            counts["superseded"] = counts.get("superseded", 0) + superseded.fetchone()[0]
        log(f"conversation {index}: {sum(map(len, rows_per_conversation))} questions so far, stores {counts}")
    via = "memory_store per turn" + (" (bare: no when, no context)" if args.bare else " (when, context)")
    print(
        json.dumps(
            {
                "benchmark": "agent_mcp",
                "transport": "stdio (mem mcp)",
                "via": "memory_digest_session" if args.via == "digest" else via,
                "strategy": args.strategy,
                "conversations": len(data),
                "machine": machine(),
                "source": source_state(),
                "stores": counts,
                "metrics": summarize([row for rows in rows_per_conversation for row in rows]),
                "splits": by_split(rows_per_conversation),
                "latency_ms": {tool: latency_summary(values) for tool, values in latencies.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
