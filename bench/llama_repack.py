#!/usr/bin/env python3
"""llama.cpp's repacked weights against the weights as stored: load, prompt reading, generation.

    python bench/llama_repack.py [--model PATH.gguf] [--rounds N] [--tokens N]

By default llama.cpp copies quantized weights into an interleaved layout when it loads a model
("extra buffer types"); `mem` loads them as stored unless CMRAG_LLM_REPACK=on
(answer/llm/llamacpp.py). Each layout loads the model through `mem`'s own loader in a process of
its own, the layouts alternating for `--rounds`, and measures:
- the load (wall seconds, the model file already in the page cache after the first round);
- prompt tokens per second (wall) with two threads, what a user waits for on a calm machine;
- prompt and generated tokens per CPU-second with one thread, comparable on a shared machine.
Prints one JSON object on stdout (the best round of each layout, and repacked / as stored).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchlib import log, machine, source_state

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "data" / "models" / "llm" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM
import llama_cpp
model, count, repack = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "on"
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
started = time.perf_counter()
llama = LlamaCppLLM(model, 2048, 60.0, threads=2, repack=repack)._load()
load = time.perf_counter() - started
text = b"The parser was rewritten because regular expressions backtracked on nested lists. " * 80
tokens = llama.tokenize(text)[:count]
def threads(n):
    llama_cpp.llama_set_n_threads(llama._ctx.ctx, n, n)
threads(2); llama.reset(); llama._ctx.kv_cache_clear()
started = time.perf_counter(); llama.eval(tokens); prompt_wall = count / (time.perf_counter() - started)
llama.reset(); llama._ctx.kv_cache_clear(); llama.eval(tokens[:64]); started = time.perf_counter()
for token in tokens[64:96]:
    llama.eval([token])
generated_wall = 32 / (time.perf_counter() - started)
threads(1); llama.reset(); llama._ctx.kv_cache_clear()
started = cpu(); llama.eval(tokens); prompt_cpu = count / (cpu() - started)
llama.reset(); llama._ctx.kv_cache_clear(); llama.eval(tokens[:64]); started = cpu()
for token in tokens[64:96]:
    llama.eval([token])
generated_cpu = 32 / (cpu() - started)
print(json.dumps({"load_seconds": load, "prompt_tokens_per_second_2t": prompt_wall,
                  "generated_tokens_per_second_2t": generated_wall, "prompt_tokens_per_cpu_second_1t": prompt_cpu,
                  "generated_tokens_per_cpu_second_1t": generated_cpu}))
"""
LAYOUTS = {"as stored (mem's default)": "off", "repacked (CMRAG_LLM_REPACK=on)": "on"}


def measure(model: Path, tokens: int, repack: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(model), str(tokens), repack], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(rounds: list[dict]) -> dict:
    """Each figure's best round: the fastest rate, the shortest load."""
    return {k: round((min if k == "load_seconds" else max)(r[k] for r in rounds), 2) for k in rounds[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=600, help="prompt length (a sample answer prompt reads ~640)")
    args = parser.parse_args()
    if not args.model.is_file():
        raise SystemExit(f"no GGUF model at {args.model} (hint: mem models install --llm, or --model PATH)")
    rounds: dict[str, list[dict]] = {name: [] for name in LAYOUTS}
    for round_number in range(args.rounds):
        for name, repack in LAYOUTS.items():
            log(f"round {round_number + 1}: {name}")
            rounds[name].append(measure(args.model, args.tokens, repack))
    results = {name: best(runs) for name, runs in rounds.items()}
    stored, repacked = results.values()
    result = {
        "benchmark": "llama_repack",
        "machine": machine(),
        "source": source_state(),
        "model": args.model.name,
        "prompt_tokens": args.tokens,
        "rounds": args.rounds,
        "layouts": results,
        "repacked_over_stored": {k: round(repacked[k] / stored[k], 2) for k in stored},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
