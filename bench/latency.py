#!/usr/bin/env python3
"""Answer latency as a user meets it, calm and beside one CPU-bound process, and the thread rule.

    python bench/latency.py --model PATH.gguf [--questions 5] [--workdir DIR]

On the bundled sample (`mem models install --offline`, `mem seed-sample`, as the README's first
command), the first N "[sample]" questions are asked
  - cold: one `mem ask --json` process per question (model load, prompt cache, everything), and
  - warm: all of them through one `mem chat --json` process (the models stay loaded),
in three conditions: calm; with one `python -c "while True: pass"` running (the adaptive thread
rule in force); and the same load with CMRAG_LLM_THREADS=<all cores>, the previous default, as the
baseline measured in the same run. Calm and busy are also run with CMRAG_LLM_REPACK=on (llama.cpp's
repacked weights, the default before session 21), `ratios` giving today's p50s over those.
Reported per condition: first token and whole answer p50/max, and the verifier's share (gate +
sentence checks, pairs per second). Calm only, `chat_in_turn`: one
`mem chat --json` asked CHAT_TURNS (a question, a follow-up on the same subject, an unrelated one),
each turn's first token with and without the retrieval before it: the issue's "second question".

Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import clean_environment, log, machine, percentile, source_state

MEM = [sys.executable, "-m", "crossmodalrag"]
# A chat as people have one on the sample: a question, a follow-up about the same change (its
# evidence overlaps, so its prompts open alike), then an unrelated question.
CHAT_TURNS = ("Why did I change the parser?", "When did I change the parser?", "Why did we drop the render cache?")


def mem(args: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([*MEM, *args], env=env, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"mem {args[0]} failed: {done.stderr.strip()[-400:]}")
    return done


def sample_questions(env: dict, count: int) -> list[str]:
    done = mem(["eval", "--query-prefix", "[sample]", "--json"], env)
    texts = [q["query_text"].removeprefix("[sample]").strip() for q in json.loads(done.stdout)["per_query"]]
    return texts[:count]


def summarize(answers: list[dict]) -> dict:
    generated = [a for a in answers if a["mode"] == "llm"]
    first = [a["timing"]["first_token_seconds"] for a in generated if "first_token_seconds" in a["timing"]]
    total = [a["timing"]["total_seconds"] for a in generated]
    # The gate reads the evidence the answer then reuses: its seconds are reported apart from the
    # sentence checks, which are what verification adds after the answer.
    gate = [a["timing"]["gate_seconds"] for a in generated if "gate_seconds" in a["timing"]]
    checked = [a for a in generated if a["timing"].get("verification_seconds")]
    checks = [len(a["verification"].get("claims", [])) for a in checked]
    verify = [a["timing"]["verification_seconds"] for a in checked]

    def p(values: list[float], q: float) -> float | None:
        return round(percentile(values, q), 2) if values else None

    return {
        "answers": len(answers),
        "generated": len(generated),
        "abstained": sum(1 for a in answers if a["abstained"]),
        "first_token_seconds": {"p50": p(first, 0.5), "max": p(first, 1.0)},
        "total_seconds": {"p50": p(total, 0.5), "max": p(total, 1.0)},
        "gate_seconds_p50": p(gate, 0.5),
        "claim_checks_seconds_p50": p(verify, 0.5),
        "claim_checks_pairs_per_second": round(sum(checks) / sum(verify), 2) if verify else None,
        "threads": sorted({a["usage"].get("threads") for a in generated if a["usage"].get("threads")}),
    }


def chat_in_turn(env: dict) -> list[dict]:
    """CHAT_TURNS through one `mem chat --json`: each turn's first token (the gate and the answer
    prompt), the same plus the retrieval before it (what the user waits for), the whole answer."""
    lines = mem(["chat", "--json"], env, input="\n".join(CHAT_TURNS) + "\n").stdout.splitlines()
    turns = []
    for question, answer in zip(CHAT_TURNS, (json.loads(line) for line in lines if line.strip()), strict=True):
        timing = answer["timing"]
        first = timing.get("first_token_seconds")
        turns.append(
            {
                "question": question,
                "mode": answer["mode"],
                "abstained": answer["abstained"],
                "first_token_seconds": None if first is None else round(first, 2),
                "first_token_with_retrieval_seconds": None
                if first is None
                else round(first + timing.get("retrieval_seconds", 0.0), 2),
                "total_seconds": round(timing["total_seconds"], 2),
            }
        )
    return turns


def run_condition(questions: list[str], env: dict) -> dict:
    cold = [json.loads(mem(["ask", q, "--json"], env).stdout) for q in questions]
    started = time.perf_counter()
    warm_lines = mem(["chat", "--json"], env, input="\n".join(questions) + "\n").stdout.splitlines()
    warm = [json.loads(line) for line in warm_lines if line.strip()]
    return {
        "cold_mem_ask": summarize(cold),
        "warm_mem_chat": summarize(warm),
        # The first question of a chat pays for loading; the rest show what a kept session gives.
        "warm_after_first": summarize(warm[1:]),
        "chat_seconds": round(time.perf_counter() - started, 1),
    }


def repacked_ratios(today: dict, repacked: dict) -> dict:
    """Today's p50s over those with repacked weights, per way of asking (below 1: faster today)."""
    ratios = {}
    for way in ("cold_mem_ask", "warm_mem_chat"):
        for figure in ("first_token_seconds", "total_seconds"):
            mine, theirs = today[way][figure]["p50"], repacked[way][figure]["p50"]
            ratios[f"{way}.{figure}"] = round(mine / theirs, 2) if mine and theirs else None
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    env = clean_environment()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="latency-"))
    env = {**env, "CMRAG_DB_PATH": str(work / "memory.db"), "CMRAG_LLM_MODEL_PATH": str(args.model.resolve())}
    mem(["models", "install", "--offline"], env)
    mem(["seed-sample"], env)
    questions = sample_questions(env, args.questions)
    result: dict = {"benchmark": "latency", "machine": machine(), "source": source_state(), "questions": questions}
    log("[calm] asking")
    result["calm"] = run_condition(questions, env)
    log("[calm] a chat: question, follow-up, unrelated question")
    result["calm"]["chat_in_turn"] = chat_in_turn(env)
    log("[calm] asking with repacked weights (the previous default)")
    result["calm_repacked"] = run_condition(questions, {**env, "CMRAG_LLM_REPACK": "on"})
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(2)  # let the busy loop show in the CPU counters
        log("[one busy process] asking with the adaptive thread rule")
        result["busy"] = run_condition(questions, env)
        log("[one busy process] asking with one thread per core (the previous default)")
        cores = str(os.cpu_count())
        result["busy_all_cores"] = run_condition(
            questions, {**env, "CMRAG_LLM_THREADS": cores, "CMRAG_EMBED_THREADS": cores}
        )
        log("[one busy process] asking with repacked weights")
        result["busy_repacked"] = run_condition(questions, {**env, "CMRAG_LLM_REPACK": "on"})
    finally:
        busy.kill()
    result["ratios"] = {
        f"{condition}_over_{condition}_repacked": repacked_ratios(result[condition], result[f"{condition}_repacked"])
        for condition in ("calm", "busy")
        if f"{condition}_repacked" in result
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
