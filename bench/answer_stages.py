#!/usr/bin/env python3
"""Where an answer's seconds go: tokens and CPU per stage of `ask_with_llm`, in process.

    python bench/answer_stages.py --model PATH.gguf --workdir DIR [--per-category 2] [--set NAME=VALUE]
    python bench/answer_stages.py --model PATH.gguf --db MEMORY.db --question Q1 --question Q2 ...

Reuses bench/generation.py's LoCoMo memories in DIR (`locomo-N.db`, made by its first run, or
made here) and its seeded questions; asks them one after another through one loaded model, as
`mem chat` does; or, with --db, the given questions in that memory (e.g. `mem seed-sample`'s) in
order, as one chat: a question, a follow-up, an unrelated one. Every llama.cpp `eval` is counted
against the stage it runs in (gate, answer prompt, generated tokens, sentence checks): tokens
evaluated, tokens the KV cache already held (reused), wall and CPU seconds. Wall seconds measured
on a busy machine are not latency; the token counts are, at the calm rates given with
--prompt-rate/--gen-rate (tokens/s on 2 calm cores), which give "expected_calm_first_token_seconds".
The default prompt rate, 105 tokens/s, is what session 4's calm `bench/generation.py` rows imply:
LoCoMo first token 6.4 s p50 for ~140 gate + ~516 answer-prompt tokens, the sample 8.7 s for ~220 +
~680. Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from generation import CATEGORIES, _setting, ingest_conversation, pick_questions, token_f1
from locomo import load_locomo

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.llamacpp import PromptCache
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.config import load_settings
from crossmodalrag.cpu import SAMPLE_SECONDS
from crossmodalrag.store import open_configured_store

STAGES = ("retrieval", "gate", "cache", "prompt", "generate", "verify")


class Meter:
    """Counts llama.cpp evals and timings per stage; `stage` is set by the wrapped calls."""

    def __init__(self) -> None:
        self.stage = "other"
        self.rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, stage: str, **values: float) -> None:
        for name, value in values.items():
            self.rows[stage][name] += value

    def timed(self, stage: str, function):
        def wrapper(*args, **kwargs):
            previous, self.stage = self.stage, stage
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(stage, wall=time.perf_counter() - wall, cpu=time.process_time() - cpu)
                self.stage = previous

        return wrapper


def instrument(llama, meter: Meter) -> None:
    """Wrap the model's eval: a many-token eval inside generation is the prompt, one token is output."""
    evaluate = llama.eval

    def counted_eval(tokens):
        stage = meter.stage
        if stage == "generate" and len(tokens) > 1:
            stage = "prompt"
        before = llama.n_tokens
        wall, cpu = time.perf_counter(), time.process_time()
        evaluate(tokens)
        meter.add(
            stage,
            evaluated=len(tokens),
            reused=before,
            evals=1,
            eval_wall=time.perf_counter() - wall,
            eval_cpu=time.process_time() - cpu,
        )

    llama.eval = counted_eval


def ask_one(retriever, question: dict, settings, llm, meter: Meter) -> dict:
    row = ask_stages(retriever, " ".join(question["question"].split()), settings, llm, meter)
    answer = row.pop("answer")
    adversarial = question["category"] == 5
    return {
        "category": CATEGORIES[question["category"]],
        "adversarial": adversarial,
        # LoCoMo's token F1 of the short answer against the gold answer; an abstention scores 0.
        "f1": None
        if adversarial
        else token_f1((not answer.abstained and answer.short_answer) or "", str(question["answer"])),
        **row,
    }


def ask_stages(retriever, question: str, settings, llm, meter: Meter) -> dict:
    """One question through `ask_with_llm` with every stage metered: its row, and the answer."""
    import crossmodalrag.answer.synthesize as synthesize
    import crossmodalrag.answer.verify as verify

    meter.rows.clear()
    patched = [
        (retriever, "search", meter.timed("retrieval", retriever.search)),
        (synthesize, "gate_margin", meter.timed("gate", verify.gate_margin)),
        (synthesize, "verify_answer", meter.timed("verify", verify.verify_answer)),
        (llm, "stream", _stream_as(meter, llm.stream)),
        (PromptCache, "restore", meter.timed("cache", PromptCache.restore)),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, value in patched:
        setattr(owner, name, value)
    try:
        answer = ask_with_llm(retriever, question, settings, llm=llm)
    finally:
        for owner, name, value in originals:
            setattr(owner, name, value)
    stages = {name: {k: round(v, 3) for k, v in meter.rows[name].items()} for name in STAGES if name in meter.rows}
    return {
        "answer": answer,
        "question": answer.query,
        "abstained": answer.abstained,
        "reason": answer.abstention_reason,
        "mode": answer.mode,
        "notices": answer.notices,
        "short_answer": answer.short_answer,
        "timing": {k: round(v, 3) for k, v in answer.timing.items()},
        "usage": answer.usage,
        "stages": stages,
    }


def _stream_as(meter: Meter, stream):
    def wrapper(messages, generation):
        previous, meter.stage = meter.stage, "generate"
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield from stream(messages, generation)
        finally:
            meter.add("generate", wall=time.perf_counter() - wall, cpu=time.process_time() - cpu)
            meter.stage = previous

    return wrapper


def expected_first_token(row: dict, prompt_rate: float, gen_rate: float) -> float:
    """Calm seconds to the first token from token counts: retrieval as measured (CPU), the thread
    rule's sample, the gate's and the answer prompt's evaluated tokens at `prompt_rate`, one
    generated token at `gen_rate`."""
    stages = row["stages"]
    retrieval = stages.get("retrieval", {}).get("cpu", 0.0)
    evaluated = stages.get("gate", {}).get("evaluated", 0) + stages.get("prompt", {}).get("evaluated", 0)
    return retrieval + SAMPLE_SECONDS + evaluated / prompt_rate + (1 / gen_rate if "prompt" in stages else 0.0)


def expected_total(row: dict, prompt_rate: float, gen_rate: float) -> float:
    stages = row["stages"]
    prompt = sum(stages.get(s, {}).get("evaluated", 0) for s in ("gate", "prompt", "verify"))
    generated = stages.get("generate", {}).get("evaluated", 0)
    return stages.get("retrieval", {}).get("cpu", 0.0) + SAMPLE_SECONDS + prompt / prompt_rate + generated / gen_rate


def summarize(rows: list[dict], prompt_rate: float, gen_rate: float) -> dict:
    def median(values):
        return round(statistics.median(values), 3) if values else None

    out = {}
    for stage in STAGES:
        found = [r["stages"][stage] for r in rows if stage in r["stages"]]
        out[stage] = {key: median([f.get(key, 0.0) for f in found]) for key in ("evaluated", "reused", "wall", "cpu")}
        out[stage]["runs"] = len(found)
    out["expected_calm_first_token_seconds_p50"] = median(
        [expected_first_token(r, prompt_rate, gen_rate) for r in rows]
    )
    out["expected_calm_total_seconds_p50"] = median([expected_total(r, prompt_rate, gen_rate) for r in rows])
    answerable = [r for r in rows if not r["adversarial"]]
    adversarial = [r for r in rows if r["adversarial"]]
    out["quality"] = {
        "answerable": len(answerable),
        "answered": _share([not r["abstained"] for r in answerable]),
        "adversarial_abstained": _share([r["abstained"] for r in adversarial]),
        "short_answer_f1": _share([r["f1"] for r in answerable]),
    }
    out["prompt_chars_p50"] = median([r["usage"].get("prompt_chars", 0) for r in rows if r.get("usage")])
    return out


def ask_in_order(args) -> int:
    """--db: the questions one after another through one loaded model, as one `mem chat`."""
    settings = load_settings({"db_path": str(args.db), "llm_model_path": str(args.model), **dict(args.set)})
    llm, meter, rows = load_llm(settings), Meter(), []
    llm.check()
    instrument(llm._load(), meter)
    with open_configured_store(settings, create=False) as store:
        retriever = open_retriever(store, settings)
        for question in args.question:
            row = ask_stages(retriever, question, settings, llm, meter)
            answer = row.pop("answer")
            stages = row["stages"]
            row["tokens_before_first_token"] = sum(stages.get(s, {}).get("evaluated", 0) for s in ("gate", "prompt"))
            row["expected_calm_first_token_seconds"] = round(
                expected_first_token(row, args.prompt_rate, args.gen_rate), 2
            )
            row["answer"] = answer.text
            rows.append(row)
            log(f"[stages] {json.dumps(stages)}")
    report = {"benchmark": "answer_stages", "db": str(args.db), "settings": dict(args.set), "rows": rows}
    json.dump({**report, "machine": machine(), "source": source_state()}, sys.stdout, indent=1)
    print()
    return 0


def _share(values: list) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--workdir", type=Path, help="bench/generation.py's LoCoMo workdir (made if missing)")
    where.add_argument("--db", type=Path, help="a memory to ask --question in, in order, as one chat")
    parser.add_argument("--question", action="append", default=[], help="with --db: a question (repeat)")
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--prompt-rate", type=float, default=105.0, help="calm prompt tokens/s (2 cores)")
    parser.add_argument("--gen-rate", type=float, default=30.0, help="calm generated tokens/s (2 cores)")
    parser.add_argument("--set", action="append", default=[], type=_setting, help="a setting override")
    parser.add_argument("--rows", action="store_true", help="print every question's stages too")
    args = parser.parse_args()
    if args.db:
        return ask_in_order(args)
    data = load_locomo(args.shared)
    chosen = pick_questions(data, args.per_category, args.seed)
    overrides = dict(args.set)
    env = clean_environment()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows, llm, meter = [], None, Meter()
    for index in sorted({i for i, _ in chosen}):
        db = args.workdir / f"locomo-{index}.db"
        ingest_conversation(data[index], args.workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        settings = load_settings({"db_path": str(db), "llm_model_path": str(args.model), **overrides})
        if llm is None:
            llm = load_llm(settings)
            llm.check()
            instrument(llm._load(), meter)
        with open_configured_store(settings, create=False) as store:
            retriever = open_retriever(store, settings)
            for _, question in ((i, q) for i, q in chosen if i == index):
                rows.append(ask_one(retriever, question, settings, llm, meter))
                log(f"[stages] {json.dumps(rows[-1]['stages'])}")
    report = {
        "benchmark": "answer_stages",
        "settings": overrides,
        "questions": len(rows),
        "summary": summarize(rows, args.prompt_rate, args.gen_rate),
        "machine": machine(),
        "source": source_state(),
    }
    if args.rows:
        report["rows"] = rows
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
