#!/usr/bin/env python3
"""llama.cpp's prompt reading and generation per thread count, calm and beside one CPU-bound process.

    python bench/llama_threads.py --model PATH.gguf [--tokens 700] [--steps 20] [--repeat 2]

Generation with one thread per core collapses beside a busy process (cpu.py), so the thread rule takes
one thread per free core. Does prompt reading (`n_threads_batch`: large matrix products, fewer thread
barriers per unit of work) collapse too, or would it still gain from the busy core? The same prompt
(the answer prompt's system rules and this repository's README, cut to `--tokens`) is read from an
empty KV cache with 1 and with every core's batch threads, the best of `--repeat`; then `--steps` tokens
are generated one at a time on 1 thread. Calm first, then beside `python -c "while True: pass"`.
Ratios are against the calm reading on every core, measured in the same run. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchlib import log, machine, source_state

from crossmodalrag.answer.prompt import SYSTEM

README = Path(__file__).resolve().parent.parent / "README.md"


def read_and_generate(llm, tokens: list[int], batch_threads: int, steps: int, repeat: int) -> dict:
    import llama_cpp

    best = float("inf")
    for _ in range(repeat):
        llm.reset()
        llama_cpp.llama_set_n_threads(llm._ctx.ctx, 1, batch_threads)
        started = time.perf_counter()
        llm.eval(tokens)
        best = min(best, time.perf_counter() - started)
    started = time.perf_counter()
    for token in tokens[:steps]:
        llm.eval([token])
    return {
        "prompt_tokens_per_s": round(len(tokens) / best, 1),
        "generated_tokens_per_s": round(steps / (time.perf_counter() - started), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--tokens", type=int, default=700)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    from llama_cpp import Llama

    cores = os.cpu_count() or 1
    llm = Llama(model_path=str(args.model), n_ctx=args.tokens + args.steps + 64, n_threads=1, verbose=False)
    tokens = llm.tokenize(f"{SYSTEM}\n\n{README.read_text(encoding='utf-8')}".encode())[: args.tokens]
    conditions = {}
    for condition in ("calm", "busy"):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if condition == "busy" else None
        try:
            time.sleep(1.0)
            conditions[condition] = {
                f"batch_threads_{n}": read_and_generate(llm, tokens, n, args.steps, args.repeat)
                for n in sorted({1, cores})
            }
        finally:
            if hog:
                hog.kill()
        log(f"{condition}: {conditions[condition]}")
    baseline = conditions["calm"][f"batch_threads_{cores}"]["prompt_tokens_per_s"]
    for figures in conditions.values():
        for entry in figures.values():
            entry["prompt_vs_calm_all_cores"] = round(entry["prompt_tokens_per_s"] / baseline, 3)
    result = {
        "benchmark": "llama_threads",
        "model": args.model.name,
        "prompt_tokens": len(tokens),
        "machine": machine(),
        "source": source_state(),
        "conditions": conditions,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
