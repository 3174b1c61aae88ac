#!/usr/bin/env python3
"""`memory_search` compact vs full results: tokens per result and follow-up reads (issue 13, benchmark 3).

    python bench/agent_compact.py [--shared DIR] [--workdir DIR]

The LoCoMo dev conversations are ingested as in bench/agent_locomo.py (reusing its work dir's
memories when --workdir points at one). Every question of categories 1-4 is searched through the
library function behind the MCP tool (`agent.tools.search_memory`, limit 10), once compact and once
full. Tokens are estimated as JSON characters / 4 (the same estimate `max_tokens` packs by).
Follow-up reads: among questions whose gold turn is in the 10 results, the share where a compact
preview does not hold that turn's whole text, so an agent must call `memory_get` to read it.
Full results are the baseline of the same run (they never need a follow-up).
The chars/4 estimate undercounts JSON (digits, quotes, `·`): with `--tokenizer GGUF` (default: the
README's Qwen2.5 model under data/models/llm/, if installed) every result is also counted by that
model's own BPE tokenizer (vocabulary only, no weights run), reported as `bpe_tokens_per_result`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from agent_locomo import CATEGORIES, ingest
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import load_locomo

from crossmodalrag.agent.tools import search_memory, tokens
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_store


def gold_turns(store, chunk_ids: list[int]) -> dict[int, tuple[str, str]]:
    marks = ",".join("?" * len(chunk_ids))
    rows = store.conn.execute(
        f"SELECT id, json_extract(metadata, '$.turn_id'), text FROM chunks WHERE id IN ({marks})", chunk_ids
    ).fetchall()
    return {chunk: (turn, text.split("\n", 1)[-1]) for chunk, turn, text in rows}


README_LLM = Path(__file__).resolve().parents[1] / "data" / "models" / "llm"
MODES = ("compact", "full")


def per_result(totals: dict, key: str) -> dict[str, float]:
    return {mode: round(totals[mode][key] / max(1, totals[mode]["results"]), 1) for mode in MODES}


def bpe_counter(path: Path | None):
    """A function counting a JSON value's tokens with a GGUF model's tokenizer, or None."""
    if path is None or not path.exists():
        return None
    from llama_cpp import Llama

    vocabulary = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda value: len(vocabulary.tokenize(json.dumps(value, ensure_ascii=False).encode(), add_bos=False))


def measure(db: Path, sample: dict, totals: dict, bpe=None) -> None:
    settings = load_settings({"db_path": db})
    with open_store(db, create=False) as store:
        for question in (q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")):
            compact = search_memory(open_retriever(store, settings), question["question"], limit=10)
            full = search_memory(open_retriever(store, settings), question["question"], limit=10, compact=False)
            for mode, found in (("compact", compact), ("full", full)):
                totals[mode]["tokens"] += sum(tokens(r) for r in found["results"])
                totals[mode]["bpe"] += sum(bpe(r) for r in found["results"]) if bpe else 0
                totals[mode]["results"] += len(found["results"])
            turns = gold_turns(store, [r["chunk_id"] for r in compact["results"]]) if compact["results"] else {}
            for result in compact["results"]:
                turn, body = turns.get(result["chunk_id"], ("", ""))
                if turn in question["evidence"]:
                    totals["found"] += 1
                    totals["follow_up"] += " ".join(body.split()) != result["preview"]
                    break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--tokenizer", type=Path, default=next(README_LLM.glob("*.gguf"), None))
    args = parser.parse_args()
    bpe = bpe_counter(args.tokenizer)
    env = clean_environment()
    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-compact-"))
    workdir.mkdir(parents=True, exist_ok=True)
    totals: dict = {mode: {"tokens": 0, "bpe": 0, "results": 0} for mode in MODES}
    totals.update(found=0, follow_up=0)
    for index, sample in enumerate(data):
        db = workdir / f"memory-{index}.db"
        if not db.exists():
            db, _ = ingest(sample, index, workdir, env, lexical_only=True)
        measure(db, sample, totals, bpe)
        log(f"conversation {index} done")
    per = per_result(totals, "tokens")
    result = {
        "benchmark": "agent_compact",
        "machine": machine(),
        "source": source_state(),
        "tokens_per_result": per,
        "ratio_full_vs_compact": round(per["full"] / per["compact"], 2),
        "bpe_tokenizer": args.tokenizer.name if bpe else None,
        "bpe_tokens_per_result": per_result(totals, "bpe") if bpe else None,
        "questions_with_gold_in_results": totals["found"],
        "compact_follow_up_share": round(totals["follow_up"] / max(1, totals["found"]), 3),
        "full_follow_up_share": 0.0,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
