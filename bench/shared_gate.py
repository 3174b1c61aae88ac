#!/usr/bin/env python3
"""Could the gate share the answer prompt's prefix? Its discrimination against the gate's own prompt.

    python bench/shared_gate.py --model PATH.gguf --workdir DIR [--per-side 40] [--seed 1] [--threads 1]

Until session 9 the gate (answer/verify.py `gate_margin`) was a prompt of its own (`own`: a one-line
judge system message, the one excerpt about whom the question names with its full header, the
question): ~110-210 tokens evaluated before the answer prompt, which shared nothing with it. Variants
that ask at the end of the answer prompt's own system message, evidence block and question evaluate
only a tail of ~25-35 tokens beyond what the answer reads anyway:
- `excerpt` (answer/prompt.py `gate_messages` since session 9): "Does excerpt [E#] answer the
  question, about the person or thing the question names?" about the gate's excerpt;
- `any` (session 5's try): "Does any excerpt answer the question ...?";
- `first`: no gate prompt at all, the answer prompt's own first token: logit of "Answer" minus that
  of the INSUFFICIENT_EVIDENCE marker's first token.
On the same LoCoMo dev questions (bench/calibrate_margin.py's pick: answerable and adversarial,
outside the generation benchmark's questions): the ROC AUC of answerable vs adversarial for each,
and the tokens each evaluates. Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from calibrate_margin import auc, locomo_questions
from generation import ingest_conversation
from locomo import load_locomo

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix
from crossmodalrag.answer.prompt import (
    ANSWER_TAIL,
    INSUFFICIENT,
    JUDGE_SYSTEM,
    build_messages,
    gate_messages,
    judge_evidence,
)
from crossmodalrag.answer.verify import gate_evidence
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_configured_store

SHARED_TAIL = "Does any excerpt answer the question, about the person or thing it names? Answer yes or no."


def own_gate(question: str, evidence: list) -> list[dict]:
    """The gate's own prompt as it was until session 9."""
    user = (
        f"Evidence:\n{judge_evidence([gate_evidence(question, evidence)])}\n\nQuestion: {question.strip()}\n\n"
        "Does this evidence answer the question, about the person or thing the question names? Answer yes or no."
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def first_token_margin(llm, messages: list[dict]) -> tuple[float, int]:
    """The answer prompt's first-token logit of "Answer" minus the marker's, and the tokens evaluated."""
    import llama_cpp
    import numpy as np

    llama = llm._ready(messages)
    tokens = chat_tokens(llama, messages)
    llm._resume(llama, tokens)
    reuse = min(shared_prefix(llama.input_ids[: llama.n_tokens], tokens), len(tokens) - 1)
    llama.n_tokens = reuse
    llama.eval(tokens[reuse:])
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(llama.n_vocab(),))
    llm._keep(llama)
    answer, marker = (llama.tokenize(w.encode(), add_bos=False, special=False)[0] for w in ("Answer", INSUFFICIENT))
    return float(logits[answer] - logits[marker]), len(tokens) - reuse


def shared_gate(question: str, evidence: list, budget: int) -> list[dict]:
    """The answer prompt with its closing instruction replaced by "does any excerpt answer it?"."""
    system, user = build_messages(question, evidence, budget)
    head = user["content"].removesuffix(ANSWER_TAIL)
    return [system, {"role": "user", "content": head + SHARED_TAIL}]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--per-side", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: the product's rule)")
    args = parser.parse_args()
    data = load_locomo(args.shared)
    chosen = locomo_questions(data, args.per_side, args.seed)
    env = clean_environment()
    rows, llm = [], None
    for index in sorted({i for i, _ in chosen}):
        db = args.workdir / f"locomo-{index}.db"
        ingest_conversation(data[index], args.workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        settings = load_settings({"db_path": str(db), "llm_model_path": str(args.model), "llm_threads": args.threads})
        llm = llm or load_llm(settings)
        with open_configured_store(settings, create=False) as store:
            retriever = open_retriever(store, settings)
            for question in (q for i, q in chosen if i == index):
                text = " ".join(question["question"].split())
                answer = evidence_answer(text, retriever.search(text), retriever.options, 0.0, 0.0)
                if answer.abstained:
                    continue  # refused before any model: neither gate sees it
                budget = settings.llm_evidence_chars
                llama = llm._load()
                answer_prompt = build_messages(text, answer.evidence, budget)
                answer_tokens = chat_tokens(llama, answer_prompt)
                row = {"adversarial": question["category"] == 5, "question": text}
                prompts = {
                    "own": own_gate(text, answer.evidence),
                    "excerpt": gate_messages(text, answer.evidence, gate_evidence(text, answer.evidence), budget),
                    "any": shared_gate(text, answer.evidence, budget),
                }
                row["own_margin"] = round(llm.support_margins([prompts["own"]])[0], 3)
                row["own_tokens"] = len(chat_tokens(llama, prompts["own"]))
                margin, evaluated = first_token_margin(llm, answer_prompt)
                row["first_margin"], row["answer_new_tokens"] = round(margin, 3), evaluated
                for key in ("excerpt", "any"):
                    row[f"{key}_margin"] = round(llm.support_margins([prompts[key]])[0], 3)
                    tokens = chat_tokens(llama, prompts[key])
                    row[f"{key}_extra_tokens"] = len(tokens) - shared_prefix(tokens, answer_tokens)
                rows.append(row)
                log(f"[shared-gate] {json.dumps(rows[-1])}")
    answerable = [r for r in rows if not r["adversarial"]]
    adversarial = [r for r in rows if r["adversarial"]]
    report = {
        "benchmark": "shared_gate",
        "questions": {"answerable": len(answerable), "adversarial": len(adversarial)},
        "auc": {
            key: auc([r[key] for r in answerable], [r[key] for r in adversarial])
            for key in ("own_margin", "excerpt_margin", "any_margin", "first_margin")
        },
        "machine": machine(),
        "source": source_state(),
        "rows": rows,
    }
    json.dump(report, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
