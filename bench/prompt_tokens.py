#!/usr/bin/env python3
"""Tokens the model reads before an answer's first token, per evidence budget (tokenizer only).

    python bench/prompt_tokens.py --model PATH.gguf --db MEMORY.db [--query-prefix "[sample]"]
                                  [--budgets 1600,1200,1000,800,600]

For every stored evaluation query with the prefix (`mem seed-sample` stores the README's as
"[sample] ..."), retrieval as `mem ask` does it, then the tokens of the gate's prompt and of the
answer prompt beyond its fixed start (system message and the user turn's opening, which the KV and
disk caches keep). No model runs: only its tokenizer and chat template, so this is exact and fast
on a busy machine. Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix
from crossmodalrag.answer.prompt import build_messages, gate_messages
from crossmodalrag.answer.verify import gate_evidence
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_configured_store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--query-prefix", default="[sample]")
    parser.add_argument("--budgets", default="1600,1200,1000,800,600")
    args = parser.parse_args()
    from llama_cpp import Llama

    llama = Llama(str(args.model), vocab_only=True, verbose=False)
    settings = load_settings({"db_path": str(args.db)})
    fixed = chat_tokens(llama, build_messages("?", [], 0))
    report: dict = {"benchmark": "prompt_tokens", "db": str(args.db), "budgets": {}}
    with open_configured_store(settings, create=False) as store:
        rows = store.conn.execute(
            "SELECT query_text FROM queries_eval WHERE query_text LIKE ?", (args.query_prefix + "%",)
        )
        questions = [text.removeprefix(args.query_prefix).strip() for (text,) in rows]
        retriever = open_retriever(store, settings)
        answers = [ask_without_llm(retriever, q) for q in questions]
        answered = [a for a in answers if not a.abstained]  # the others never reach a model
        for budget in (int(b) for b in args.budgets.split(",")):
            gate, answer = [], []
            for item in answered:
                tokens = chat_tokens(llama, build_messages(item.query, item.evidence, budget))
                answer.append(len(tokens) - shared_prefix(tokens, fixed))
                gate.append(
                    len(chat_tokens(llama, gate_messages(item.query, [gate_evidence(item.query, item.evidence)])))
                )
            report["budgets"][budget] = {
                "questions": len(answered),
                "gate_p50": statistics.median(gate),
                "answer_new_p50": statistics.median(answer),
                "before_first_token_p50": statistics.median(g + a for g, a in zip(gate, answer, strict=True)),
            }
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
