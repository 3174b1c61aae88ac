#!/usr/bin/env python3
"""L1 event extraction on LoCoMo dev sessions with a real model: recall, grounding and cost.

    nice -n 5 python bench/memory_events.py [--sessions 30] [--limit N] [--start N] [--only I:S,...] [--seed 0] [--free]
                                            [--model GGUF] [--threads N] [--timeout S] [--rows ROWS.jsonl [--resume]]
                                            [--cache OUTPUTS.jsonl]

A fixed seeded sample of sessions that have gold events. Each session is one source whose chunks
are its turns ("Speaker: text", locator = the turn's dia_id); events are extracted by the product's
own `build_events` in the windows `mem build-memory` uses (CMRAG_EXTRACT_WINDOW_CHARS, 4,500: one call
for most sessions; MiniLM provenance check), then scored with MiniLM. `--captions` gives each turn a
shared photo's caption as `mem ingest-chat` stores it ("[shares a photo: ...]"); off, the turns are
the spoken text alone (as every run before session 7 measured them):
  event recall@0.70 (@0.65)  share of the session's gold `event_summary` events whose best cosine
                             to an extracted event of the same session is >= 0.70 (0.65)
  schema-valid rate          sources whose output validated (after the one retry); failures are
                             stored and counted, never dropped
  supported share            events whose best link passes CMRAG_EVENT_SUPPORT_MIN_COSINE
  provenance hit             for extracted events matched (cosine >= 0.70) to a gold `observation`,
                             do the event's links (at most 3) include that observation's turn?
  cost                       LLM calls, prompt/completion tokens, seconds per 1k source tokens (CPU
                             seconds, and the CPU seconds to the first token: reading the prompt)
Reference points (DESIGN.md): a random other session 0.075, raw turns copied as events 0.19,
gpt-3.5's own observations 0.85; target >= 0.60. `--free` also runs without the schema grammar.
Per-session rows go to --rows (JSON lines, appended as they finish); the summary JSON to stdout.
`--cache` keeps every model output by prompt and schema: a second run of another tree on the same
cache (PYTHONPATH=OTHER/src) measures a change after the model on the same outputs, calling the model
only for prompts it has not seen (`cached_calls` in the rows; their CPU seconds are not the model's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import load_locomo, session_time

from crossmodalrag.config import Settings
from crossmodalrag.store import Store, open_store

MATCH, LOOSE = 0.70, 0.65


def sessions_with_events(data: list[dict]) -> list[tuple[int, str]]:
    found = []
    for index, sample in enumerate(data):
        for key, value in sample["event_summary"].items():
            session = key.removeprefix("events_")
            if (
                any(events for speaker, events in value.items() if speaker != "date")
                and session in sample["conversation"]
            ):
                found.append((index, session))
    return found


def store_session(store: Store, uri: str, title: str, turns: list[dict], when: float | None) -> None:
    """One source whose chunks are the session's turns (so links resolve to turn ids)."""
    lines = [f"{t['speaker']}: {t['text']}" for t in turns]
    text, offsets, position = "\n".join(lines), [], 0
    for line in lines:
        offsets.append((position, position + len(line)))
        position += len(line) + 1
    with store.transaction() as conn:
        source = conn.execute(
            "INSERT INTO sources (source_type, uri, fingerprint, timestamp, title, metadata, ingested_at)"
            " VALUES ('conversation', ?, ?, ?, ?, ?, ?)",
            (uri, str(hash(text)), when, title, json.dumps({"session": uri}), time.time()),
        ).lastrowid
        conn.executemany(
            "INSERT INTO chunks (source_id, chunk_index, text, locator, char_start, char_end)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(source, i, f"{title}\n{line}", t["dia_id"], s, e)
             for i, (line, t, (s, e)) in enumerate(zip(lines, turns, offsets, strict=True))],
        )  # fmt: skip


def gold_events(sample: dict, session: str) -> list[str]:
    value = sample["event_summary"].get(f"events_{session}", {})
    return [e for speaker, events in value.items() if speaker != "date" for e in events]


def observations(sample: dict, session: str) -> list[tuple[str, set[str]]]:
    value = sample["observation"].get(f"{session}_observation", {})
    out = []
    for items in value.values():
        for text, turn in items:
            out.append((text, set(turn if isinstance(turn, list) else [turn])))
    return out


class CountingLLM:
    """The model, summing what each call reports in `usage` (prompt tokens read, tokens written,
    guesses accepted, threads) so a session's row says where its seconds went."""

    def __init__(self, llm) -> None:
        self.llm, self.totals, self.prompt_cpu = llm, {}, 0.0

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def stream(self, messages, generation):
        started, first = time.process_time(), True
        for piece in self.llm.stream(messages, generation):
            if first:  # CPU seconds to the first token: reading the prompt (and one decoding step)
                self.prompt_cpu, first = self.prompt_cpu + time.process_time() - started, False
            yield piece
        for key, value in self.llm.usage.items():
            known = self.totals.get(key, 0)
            self.totals[key] = max(value, known) if key == "threads" else known + value


class ReplayLLM:
    """The model behind a cache of its outputs, keyed on the messages and the schema (`--cache`): a
    change after the model (validation, attribution, provenance) is measured on the same outputs, and
    only a prompt or schema the cache has not seen calls the model. A cached call costs no CPU, so
    cost figures come from the run that filled the cache."""

    def __init__(self, llm, path: Path) -> None:
        self.llm, self.path, self.usage, self.cached, self.cached_cpu = llm, path, {}, 0, 0.0
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        self.outputs = {entry["key"]: entry for entry in map(json.loads, filter(str.strip, lines))}

    def __getattr__(self, name):
        return getattr(self.llm, name)

    def stream(self, messages, generation):
        key = hashlib.sha256(json.dumps([messages, generation.json_schema, generation.max_tokens]).encode()).hexdigest()
        if key in self.outputs:
            self.cached += 1
            self.cached_cpu += self.outputs[key].get("cpu_seconds", 0.0)
            self.usage = self.outputs[key]["usage"]
            yield self.outputs[key]["text"]
            return
        started, pieces = time.process_time(), []
        for piece in self.llm.stream(messages, generation):  # streamed: CountingLLM times the first token
            pieces.append(piece)
            yield piece
        cpu = round(time.process_time() - started, 2)
        self.usage = dict(self.llm.usage)
        self.outputs[key] = {"key": key, "text": "".join(pieces), "usage": self.usage, "cpu_seconds": cpu}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(self.outputs[key]) + "\n")


def user_turns(turns: list[dict], captions: bool) -> list[dict]:
    """The turns as `mem ingest-chat` reads them: with a shared photo's caption appended (`captions`)."""
    from crossmodalrag.connectors.chats.exports import locomo_turn

    return [{**t, "text": locomo_turn(t).text} for t in turns] if captions else turns


def run_session(
    sample: dict, index: int, session: str, llm, embedder, workdir: Path, constrained: bool, captions: bool = False
) -> dict:
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.memory.events import Extraction, build_events, list_events
    from crossmodalrag.retrieval.semantic import SemanticIndex

    settings = Settings(db_path=workdir / f"{index}-{session}-{'c' if constrained else 'f'}.db")
    turns = user_turns(sample["conversation"][session], captions)
    stamp = sample["conversation"].get(f"{session}_date_time", "")
    with open_store(settings.db_path) as store:
        store_session(store, f"locomo:{index}:{session}", f"Conversation, {stamp}", turns, session_time(stamp))
        embed_missing(store, embedder)
        counted = CountingLLM(llm)
        semantic = SemanticIndex(store, embedder, settings)
        # Windows as `mem build-memory` cuts them (extract_window_chars), not one call per session.
        how = Extraction(counted, semantic, settings.extract_window_chars, settings.event_support_min_cosine)
        how.constrained = constrained
        source_tokens = llm.count_tokens("\n".join(f"{t['speaker']}: {t['text']}" for t in turns))
        load, started, cpu = os.getloadavg()[0], time.monotonic(), time.process_time()
        cached, cached_cpu = getattr(llm, "cached", 0), getattr(llm, "cached_cpu", 0.0)
        report = build_events(store, how)
        seconds, cpu = time.monotonic() - started, time.process_time() - cpu
        events = list_events(store, limit=100)
        written = [
            [json.loads(meta)["written"], statement]
            for statement, meta in store.conn.execute("SELECT statement, metadata FROM memory_nodes ORDER BY id")
            if "written" in json.loads(meta)
        ]
    row = {
        "session": f"{index}:{session}",
        "constrained": constrained,
        "turns": len(turns),
        "source_tokens": source_tokens,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "prompt_cpu_seconds": round(counted.prompt_cpu, 2),
        "load": round(load, 1),
        "llm_calls": report.llm_calls,
        "cached_calls": getattr(llm, "cached", 0) - cached,  # answered by --cache: no model time
        "cached_cpu_seconds": round(getattr(llm, "cached_cpu", 0.0) - cached_cpu, 2),  # what they took when made
        "prompt_tokens_est": report.prompt_chars // 4,
        "completion_tokens": report.completion_tokens,
        **{f"llm_{key}": value for key, value in counted.totals.items()},
        "valid": not report.failed,
        "events": len(events),
        "supported": sum(e["supported"] for e in events),
        "extracted": [
            [e["statement"], e["supported"], [x["locator"] for x in e["evidence"]], e["confidence"], e["people"]]
            for e in events
        ],
        "rewritten": written,  # [the model's sentence, the stored one] where the subject was corrected
    }
    row.update(score(embedder, events, gold_events(sample, session), observations(sample, session)))
    return row


def score(embedder, events: list[dict], gold: list[str], observed: list[tuple[str, set[str]]]) -> dict:
    statements = [e["statement"] for e in events]
    if not statements:
        return {"gold": len(gold), "found@0.70": 0, "found@0.65": 0, "matched_observations": 0, "provenance_hits": 0}
    extracted = embedder.embed(statements)
    best = (embedder.embed(gold) @ extracted.T).max(axis=1) if gold else []
    hits = matched = 0
    if observed:
        similarity = extracted @ embedder.embed([text for text, _ in observed]).T
        for event, row in zip(events, similarity, strict=True):
            if row.max() >= MATCH:
                matched += 1
                linked = {e["locator"] for e in event["evidence"]}
                hits += bool(linked & observed[int(row.argmax())][1])
    return {
        "gold": len(gold),
        "found@0.70": int(sum(b >= MATCH for b in best)),
        "found@0.65": int(sum(b >= LOOSE for b in best)),
        "matched_observations": matched,
        "provenance_hits": hits,
    }


def summarize(rows: list[dict]) -> dict:
    if not rows:
        return {}
    total = lambda key: sum(r[key] for r in rows)  # noqa: E731
    gold, events = total("gold"), total("events")
    return {
        "sessions": len(rows),
        "event_recall@0.70": round(total("found@0.70") / gold, 4),
        "event_recall@0.65": round(total("found@0.65") / gold, 4),
        "schema_valid_rate": round(sum(r["valid"] for r in rows) / len(rows), 4),
        "supported_share": round(total("supported") / events, 4) if events else None,
        "provenance_hit": round(total("provenance_hits") / total("matched_observations"), 4)
        if total("matched_observations")
        else None,
        "events_per_session": round(events / len(rows), 2),
        "llm_calls_per_source": round(total("llm_calls") / len(rows), 3),
        "seconds_per_1k_source_tokens": round(total("seconds") / total("source_tokens") * 1000, 2),
        "cpu_seconds_per_1k_source_tokens": round(total("cpu_seconds") / total("source_tokens") * 1000, 2),
        "prompt_cpu_seconds_per_1k_source_tokens": round(
            sum(r.get("prompt_cpu_seconds", 0) for r in rows) / total("source_tokens") * 1000, 2
        ),
        "load_average": [min(r["load"] for r in rows), max(r["load"] for r in rows)],
        "threads": sorted({r.get("llm_threads", 0) for r in rows}),
        "completion_tokens": total("completion_tokens"),
        "prompt_tokens_est": total("prompt_tokens_est"),
        "seconds_per_session": sorted(r["seconds"] for r in rows),
    }


def done_rows(args) -> list[dict]:
    """The rows of an earlier, interrupted run (--resume): its sessions are not run again."""
    if not (args.resume and args.rows and args.rows.is_file()):
        return []
    return [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--limit", type=int, help="run only the first N drawn sessions (the draw stays the same)")
    parser.add_argument("--start", type=int, default=0, help="skip the first N drawn sessions (split a run)")
    parser.add_argument("--only", help="these sessions instead of the draw, e.g. 3:session_11,4:session_5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", type=Path, default=Path("data/models/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: the cores free)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one model call may take")
    parser.add_argument("--free", action="store_true", help="also run without constrained decoding")
    parser.add_argument("--free-limit", type=int, help="the run without constraints covers only the first N sessions")
    parser.add_argument("--only-free", action="store_true", help="run only without constrained decoding")
    parser.add_argument("--captions", action="store_true", help="turns with their photo captions (ingest-chat)")
    parser.add_argument("--rows", type=Path, help="append per-session rows here (JSON lines)")
    parser.add_argument("--cache", type=Path, help="model outputs kept here and reused (JSON lines, ReplayLLM)")
    parser.add_argument("--resume", action="store_true", help="skip sessions already in --rows; summarize them all")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    clean_environment()
    from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.models import install_offline

    data = load_locomo(args.shared)
    chosen = sorted(random.Random(args.seed).sample(sessions_with_events(data), args.sessions))[: args.limit]
    chosen = chosen[args.start :]
    if args.only:  # a trial subset (e.g. sessions outside the draw, to try a prompt on)
        chosen = [(int(i), session) for i, session in (item.split(":", 1) for item in args.only.split(","))]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memory-events-"))
    settings = Settings(db_path=workdir / "models.db")
    install_offline(settings)
    embedder = load_embedder(settings)
    llm = LlamaCppLLM(args.model.resolve(), 4096, args.timeout, args.threads)
    if args.cache:
        llm = ReplayLLM(llm, args.cache)
    result = {"benchmark": "memory_events", "seed": args.seed, "model": args.model.name, "machine": machine(),
              "source": source_state(), "captions": args.captions,
              "sessions": [f"{i}:{s}" for i, s in chosen]}  # fmt: skip
    for constrained in (False,) if args.only_free else (True, False) if args.free else (True,):
        rows = [r for r in done_rows(args) if r["constrained"] == constrained]
        for index, session in chosen if constrained else chosen[: args.free_limit]:
            if any(r["session"] == f"{index}:{session}" for r in rows):
                continue
            row = run_session(data[index], index, session, llm, embedder, workdir, constrained, args.captions)
            rows.append(row)
            log(f"{'constrained' if constrained else 'free'} {row['session']}: {row['events']} events, "
                f"{row['found@0.70']}/{row['gold']} gold found, {row['seconds']} s")  # fmt: skip
            if args.rows:
                with args.rows.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
        result["constrained" if constrained else "free"] = summarize(rows)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
