#!/usr/bin/env python3
"""Could the gate share the answer prompt's prefix? Its discrimination against today's gate.

    python bench/shared_gate.py --model PATH.gguf --workdir DIR [--per-side 12] [--seed 1]

Today's gate (answer/verify.py `gate_margin`) is a prompt of its own (a one-line judge system
message, the one excerpt about whom the question names, the question): ~120-160 tokens evaluated
before the answer prompt, which shares nothing with it. A gate that asked its yes/no at the end of
the answer prompt's own system message, evidence block and question would evaluate ~30 tokens
beyond what the answer needs anyway. This measures both margins on the same LoCoMo dev questions
(bench/calibrate_margin.py's pick: answerable and adversarial, outside the generation benchmark's
questions): the ROC AUC of answerable vs adversarial for each, and the tokens each evaluates.
Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from calibrate_margin import locomo_questions
from generation import ingest_conversation
from locomo import load_locomo

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix
from crossmodalrag.answer.prompt import ANSWER_TAIL, build_messages
from crossmodalrag.answer.verify import gate_margin
from crossmodalrag.config import load_settings
from crossmodalrag.store import open_configured_store

SHARED_TAIL = "Does any excerpt answer the question, about the person or thing it names? Answer yes or no."


def shared_gate(question: str, evidence: list, budget: int) -> list[dict]:
    """The answer prompt with its closing instruction replaced by the gate's yes/no question."""
    system, user = build_messages(question, evidence, budget)
    head = user["content"].removesuffix(ANSWER_TAIL)
    return [system, {"role": "user", "content": head + SHARED_TAIL}]


def auc(positives: list[float], negatives: list[float]) -> float | None:
    """Probability that an answerable question's margin is above an adversarial one's (ties 1/2)."""
    pairs = [(p > n) + 0.5 * (p == n) for p in positives for n in negatives]
    return round(sum(pairs) / len(pairs), 4) if pairs else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--per-side", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    data = load_locomo(args.shared)
    chosen = locomo_questions(data, args.per_side, args.seed)
    env = clean_environment()
    rows, llm = [], None
    for index in sorted({i for i, _ in chosen}):
        db = args.workdir / f"locomo-{index}.db"
        ingest_conversation(data[index], args.workdir / f"locomo-{index}.json", True, {**env, "CMRAG_DB_PATH": str(db)})
        settings = load_settings({"db_path": str(db), "llm_model_path": str(args.model)})
        llm = llm or load_llm(settings)
        with open_configured_store(settings, create=False) as store:
            retriever = open_retriever(store, settings)
            for question in (q for i, q in chosen if i == index):
                text = " ".join(question["question"].split())
                answer = evidence_answer(text, retriever.search(text), retriever.options, 0.0, 0.0)
                if answer.abstained:
                    continue  # refused before any model: neither gate sees it
                shared = shared_gate(text, answer.evidence, settings.llm_evidence_chars)
                llama = llm._load()
                answer_tokens = chat_tokens(llama, build_messages(text, answer.evidence, settings.llm_evidence_chars))
                rows.append(
                    {
                        "adversarial": question["category"] == 5,
                        "question": text,
                        "gate_margin": round(gate_margin(llm, text, answer.evidence), 3),
                        "shared_margin": round(llm.support_margins([shared])[0], 3),
                        "shared_extra_tokens": len(chat_tokens(llama, shared))
                        - shared_prefix(chat_tokens(llama, shared), answer_tokens),
                    }
                )
                log(f"[shared-gate] {json.dumps(rows[-1])}")
    answerable = [r for r in rows if not r["adversarial"]]
    adversarial = [r for r in rows if r["adversarial"]]
    report = {
        "benchmark": "shared_gate",
        "questions": {"answerable": len(answerable), "adversarial": len(adversarial)},
        "auc": {
            key: auc([r[key] for r in answerable], [r[key] for r in adversarial])
            for key in ("gate_margin", "shared_margin")
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
