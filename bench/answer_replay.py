#!/usr/bin/env python3
"""LoCoMo questions asked in one process, every model call kept in a cache: change the checks, ask
again, and only the prompts that changed reach the model.

    python bench/answer_replay.py --model PATH.gguf [--per-category 4] [--seed 1] [--workdir DIR]
        [--cache FILE] [--set NAME=VALUE ...]

The questions, memories and rows are bench/generation.py's (the same draw for the same seed, one
`mem ingest-chat` memory per conversation, reused when the workdir has it); each question goes
through `question_retriever` and `ask_with_llm`, the code path of `mem chat`. The model's streamed
answer and its yes/no margins are stored per prompt in `--cache` (JSON Lines), so a change to the
verifier (answer/verify.py, answer/subjects.py) is measured on the very answers the model wrote
before, and a run of another tree (PYTHONPATH=OTHER/src) on the same cache compares the two on the
same answers. A change to what the model sees (answer/prompt.py) misses the cache: it is a new run.
Prints bench/generation.py's summary (and `--rows`) as JSON on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, source_state
from generation import _setting, ingest_conversation, locomo_row, pick_questions, summarize
from locomo import load_locomo


class CachedLLM:
    """The real model behind a cache of its answers (per prompt) and margins (per prompt)."""

    def __init__(self, llm, path: Path) -> None:
        self.llm, self.path = llm, path
        self.provider, self.model, self.usage = llm.provider, llm.model, {}
        self.entries: dict[str, object] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry["value"]
        self.calls = {"stream_cached": 0, "stream_new": 0, "margins_cached": 0, "margins_new": 0}

    def check(self) -> str:
        return self.llm.check()

    def stream(self, messages, generation):
        key = _key("stream", messages, generation.max_tokens, generation.temperature)
        if key in self.entries:
            self.calls["stream_cached"] += 1
            yield from self.entries[key]
            return
        self.calls["stream_new"] += 1
        pieces: list[str] = []
        try:
            for piece in self.llm.stream(messages, generation):
                pieces.append(piece)
                yield piece
        except GeneratorExit:  # the caller stopped reading (a long answer): it stops there again
            self._keep(key, pieces)
            raise
        self.usage = dict(self.llm.usage)
        self._keep(key, pieces)

    def support_margins(self, prompts):
        keys = [_key("margin", messages) for messages in prompts]
        missing = [i for i, key in enumerate(keys) if key not in self.entries]
        self.calls["margins_cached"] += len(prompts) - len(missing)
        self.calls["margins_new"] += len(missing)
        if missing:
            from crossmodalrag.answer.verify import judge

            for i, margin in zip(missing, judge(self.llm, [prompts[i] for i in missing]), strict=True):
                self._keep(keys[i], margin)
        return [self.entries[key] for key in keys]

    def _keep(self, key: str, value) -> None:
        self.entries[key] = value
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "value": value}) + "\n")


def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def ask_conversation(db: Path, questions: list[str], llm) -> list[dict]:
    """Each question through `mem chat`'s path (retriever set up once, the model kept loaded)."""
    from crossmodalrag.answer.synthesize import ask_with_llm
    from crossmodalrag.cli.ask import question_retriever
    from crossmodalrag.config import load_settings
    from crossmodalrag.store import open_store

    settings = load_settings({"db_path": str(db)})
    args = argparse.Namespace(
        top_k=None, profile=None, modality=None, strategy=None, after=None, before=None, as_of=None, level="evidence"
    )
    with open_store(settings.db_path, create=False) as store:
        retriever = question_retriever(store, settings, args)
        return [ask_with_llm(retriever, question, settings, llm=llm, debug=True).to_dict() for question in questions]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="GGUF file (e.g. from `mem models install --llm`)")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, help="memories (locomo-N.db) and, by default, the cache")
    parser.add_argument("--cache", type=Path, help="JSON Lines of model calls (default: WORKDIR/llm_cache.jsonl)")
    parser.add_argument("--per-category", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0, help="which LoCoMo questions (0: the benchmark's)")
    parser.add_argument("--rows", action="store_true", help="include every question's row")
    parser.add_argument("--set", type=_setting, action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="replay-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**clean_environment(), "CMRAG_LLM_MODEL_PATH": str(args.model.resolve())}
    env.update({f"CMRAG_{name.upper()}": value for name, value in args.set})
    os.environ.clear()
    os.environ.update(env)  # load_settings reads the environment; nothing of the caller's leaks in

    from crossmodalrag.answer.llm import load_llm
    from crossmodalrag.config import load_settings

    started = time.perf_counter()
    llm = CachedLLM(load_llm(load_settings()), args.cache or workdir / "llm_cache.jsonl")
    data = load_locomo(args.shared)
    chosen = pick_questions(data, args.per_category, args.seed)
    rows: list[dict] = []
    for index in sorted({i for i, _ in chosen}):
        questions = [q for i, q in chosen if i == index]
        db = workdir / f"locomo-{index}.db"
        ingest_conversation(data[index], workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        log(f"[replay] conversation {index}: {len(questions)} questions")
        answers = ask_conversation(db, [" ".join(q["question"].split()) for q in questions], llm)
        rows += [
            {"conversation": index, **locomo_row(q, a), "raw_output": (a.get("debug") or {}).get("raw_output")}
            for q, a in zip(questions, answers, strict=True)
        ]
    result = {
        "benchmark": "answer_replay",
        "source": source_state(),
        "settings": dict(args.set),
        "model_calls": llm.calls,
        "locomo": summarize(rows),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    if args.rows:
        result["locomo_rows"] = rows
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
