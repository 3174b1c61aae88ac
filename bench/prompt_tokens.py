#!/usr/bin/env python3
"""Tokens the model reads before an answer's first token, per evidence budget (tokenizer only).

    python bench/prompt_tokens.py --model PATH.gguf --db MEMORY.db [--query-prefix "[sample]"]
                                  [--budgets 1600,1200,1000,800,600]
    python bench/prompt_tokens.py --model PATH.gguf --locomo WORKDIR [--per-category 4] [--seed 0]

For every stored evaluation query with the prefix (`mem seed-sample` stores the README's as
"[sample] ..."), or for bench/generation.py's LoCoMo draw over the memories it made in WORKDIR
(`locomo-N.db`), retrieval as `mem ask` does it, then the tokens of the gate's prompt beyond its
fixed start (system message and the user turn's opening, which the KV and disk caches keep), and of
the answer prompt beyond what the gate's prompt read (since session 9 they share all but their
tail), and of the answer prompt's excerpt headers (`answer_headers_p50`) against the
judge's full headers (`full_headers_*`: the answer prompt as it was before session 7, counted in
the same run). No model
runs: only its tokenizer and chat template, so this is exact and fast on a busy machine. Prints
one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchlib import DEFAULT_SHARED

from crossmodalrag.answer import prompt as answer_prompt
from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix
from crossmodalrag.answer.prompt import answer_header, build_messages, evidence_header, gate_messages
from crossmodalrag.answer.verify import gate_evidence
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_configured_store


def sample_answers(db: Path, prefix: str) -> list:
    """The README sample's questions (stored with `prefix`) that reach a model."""
    settings = load_settings({"db_path": str(db)})
    with open_configured_store(settings, create=False) as store:
        rows = store.conn.execute("SELECT query_text FROM queries_eval WHERE query_text LIKE ?", (prefix + "%",))
        questions = [text.removeprefix(prefix).strip() for (text,) in rows]
        retriever = open_retriever(store, settings)
        return [a for a in (ask_without_llm(retriever, q) for q in questions) if not a.abstained]


def locomo_answers(workdir: Path, per_category: int, seed: int, shared: Path) -> list:
    """bench/generation.py's LoCoMo questions (same draw) that reach a model."""
    from generation import pick_questions
    from locomo import load_locomo

    chosen = pick_questions(load_locomo(shared), per_category, seed)
    answers = []
    for index in sorted({i for i, _ in chosen}):
        settings = load_settings({"db_path": str(workdir / f"locomo-{index}.db")})
        with open_configured_store(settings, create=False) as store:
            retriever = open_retriever(store, settings)
            asked = (ask_without_llm(retriever, " ".join(q["question"].split())) for i, q in chosen if i == index)
            answers += [a for a in asked if not a.abstained]
    return answers


def count(llama, answered: list, budget: int) -> dict:
    def tokens(text: str) -> int:
        return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def gate_prompt(item) -> list[int]:
        return chat_tokens(
            llama, gate_messages(item.query, item.evidence, gate_evidence(item.query, item.evidence), budget)
        )

    def new_tokens(item) -> int:
        """The answer prompt's tokens beyond what the gate's prompt (asked first) already read."""
        rendered = chat_tokens(llama, build_messages(item.query, item.evidence, budget))
        return len(rendered) - max(shared_prefix(rendered, fixed), shared_prefix(rendered, gate_prompt(item)))

    fixed = chat_tokens(llama, build_messages("?", [], 0))
    gate = [len(gate_prompt(a)) - shared_prefix(gate_prompt(a), fixed) for a in answered]
    answer = [new_tokens(item) for item in answered]
    answer_prompt.answer_header = evidence_header  # the baseline: the answer prompt as before session 7
    try:
        before = [new_tokens(item) for item in answered]
    finally:
        answer_prompt.answer_header = answer_header
    return {
        "questions": len(answered),
        "gate_p50": statistics.median(gate),
        "answer_new_p50": statistics.median(answer),
        "before_first_token_p50": statistics.median(g + a for g, a in zip(gate, answer, strict=True)),
        "answer_headers_p50": statistics.median(
            sum(tokens(answer_header(e) + "\n") for e in a.evidence) for a in answered
        ),
        "full_headers_p50": statistics.median(
            sum(tokens(evidence_header(e) + "\n") for e in a.evidence) for a in answered
        ),
        "full_headers_answer_new_p50": statistics.median(before),
        "full_headers_before_first_token_p50": statistics.median(g + b for g, b in zip(gate, before, strict=True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", type=Path, help="a memory holding the README sample (`mem seed-sample`)")
    source.add_argument("--locomo", type=Path, help="a bench/generation.py workdir with its locomo-N.db")
    parser.add_argument("--query-prefix", default="[sample]")
    parser.add_argument("--per-category", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--budgets", default="1600,1200,1000,800,600")
    args = parser.parse_args()
    from llama_cpp import Llama

    llama = Llama(str(args.model), vocab_only=True, verbose=False)
    if args.db:
        answered, where = sample_answers(args.db, args.query_prefix), str(args.db)
    else:
        answered = locomo_answers(args.locomo, args.per_category, args.seed, args.shared)
        where = f"{args.locomo} (LoCoMo, {args.per_category} per category, seed {args.seed})"
    report: dict = {"benchmark": "prompt_tokens", "db": where, "budgets": {}}
    for budget in (int(b) for b in args.budgets.split(",")):
        report["budgets"][budget] = count(llama, answered, budget)
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
