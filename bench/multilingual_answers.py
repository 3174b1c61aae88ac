#!/usr/bin/env python3
"""Cited answers in other languages: the local model through `mem chat --json`, as a user asks.

    python bench/multilingual_answers.py --model PATH.gguf [--shared DIR] [--langs zh,ja,de,es,vi]
                                         [--per-lang 10] [--distractors 200] [--seed 0] [--workdir DIR]
                                         [--embed-model multilingual-e5-small] [--rows ROWS.jsonl]
                                         [--unanswerable 10]

Per language (shared/data/multilingual, read in place): `--per-lang` questions drawn with a fixed seed
among those whose gold answer is a span of their passage; a vault of their passages and
`--distractors` other passages of the same set (`# title` + text, one note each, as
bench/multilingual.py writes them), stored by `mem ingest-notes` and embedded by `mem
reindex-embeddings` (the offline MiniLM the README's first command installs, or `--embed-model`); then
every question through one `mem chat --json` process with CMRAG_LLM_MODEL_PATH set: the code path of
`mem ask --json`. Every question is answerable: its passage is in memory.

Per language and overall: the share answered, why the rest abstained, the gold passage among the
evidence and among the citations of an answer, the answer holding a gold answer (after NFKC, case and
space folding; the short answer alone, and the whole answer), the short answer's F1 against the
closest gold answer (characters for Chinese and Japanese, words elsewhere), first token and whole
answer p50, the gate's margin (`verification.gate_margin`).

`--unanswerable N` also asks, in the same process, N questions per language whose passage is not in
memory (drawn with the same seed among the others): the gate's other direction. For them: the share
abstained and why, the answers that still hold a gold answer (a stored passage of the same article
answers them), and per language the margins' ROC AUC between the two kinds. Prints one JSON object on
stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, percentile, source_state
from multilingual import LANGS, load, mem, write_vault

CHARACTER_LANGS = ("zh", "ja")  # no spaces between words: F1 over characters


def answers_of(folder: Path) -> dict[str, list[str]]:
    """Question id -> its gold answer spans (free-form answers that are no span left out)."""
    found = {}
    with (folder / "answers.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            spans = [a["text"] for a in row["answers"] if a.get("answer_start", -1) >= 0 and a["text"].strip()]
            if spans:
                found[row["_id"]] = list(dict.fromkeys(spans))
    return found


def folded(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def units(text: str, lang: str) -> list[str]:
    text = "".join(c for c in folded(text) if not unicodedata.category(c).startswith("P"))
    return [c for c in text if not c.isspace()] if lang in CHARACTER_LANGS else text.split()


def f1(prediction: str, gold: str, lang: str) -> float:
    predicted, expected = units(prediction, lang), units(gold, lang)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def pick(lang: str, folder: Path, per_lang: int, distractors: int, seed: int, unanswerable: int = 0):
    """(questions with their gold passage id and answers, the passages to store, questions whose
    passage is not stored)."""
    corpus, queries, qrels = load(folder)
    spans = answers_of(folder)
    candidates = [q for q in queries if q["_id"] in qrels and q["_id"] in spans]
    rng = random.Random(f"{seed}:{lang}")
    chosen = rng.sample(candidates, min(per_lang, len(candidates)))
    gold_ids = {doc for q in chosen for doc in qrels[q["_id"]]}
    others = sorted({d["_id"] for d in corpus} - gold_ids)
    kept = gold_ids | set(rng.sample(others, min(distractors, len(others))))
    as_question = lambda q: (q["text"].strip(), qrels[q["_id"]], spans[q["_id"]])  # noqa: E731
    absent = [q for q in candidates if not set(qrels[q["_id"]]) & kept]
    absent = random.Random(f"{seed}:{lang}:absent").sample(absent, min(unanswerable, len(absent)))
    return [as_question(q) for q in chosen], [d for d in corpus if d["_id"] in kept], [as_question(q) for q in absent]


def ask_all(questions: list[tuple], env: dict) -> list[dict]:
    lines = "".join(" ".join(question.split()) + "\n" for question, _, _ in questions)
    done = subprocess.run(
        [sys.executable, "-m", "crossmodalrag", "chat", "--json"], env=env, input=lines, capture_output=True, text=True
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or len(answers) != len(questions):
        raise SystemExit(f"mem chat answered {len(answers)} of {len(questions)}: {done.stderr.strip()[-800:]}")
    return answers


def row(lang: str, question: tuple, answer: dict, names: dict[str, str], answerable: bool = True) -> dict:
    text, gold_docs, spans = question
    evidence = {names[Path(e["source_uri"]).stem] for e in answer["evidence"] if Path(e["source_uri"]).stem in names}
    cited = {names[Path(c["source_uri"]).stem] for c in answer["citations"] if Path(c["source_uri"]).stem in names}
    short, whole = answer.get("short_answer") or "", answer["answer"]
    answered = not answer["abstained"] and answer["mode"] == "llm"
    return {
        "lang": lang,
        "answerable": answerable,
        "question": text,
        "gold": spans,
        "answered": answered,
        "abstention_reason": answer["abstention_reason"],
        "gold_in_evidence": bool(evidence & set(gold_docs)),
        "cites_gold": answered and bool(cited & set(gold_docs)),
        "short_holds_gold": answered and any(folded(s) in folded(short) for s in spans),
        "answer_holds_gold": answered and any(folded(s) in folded(whole) for s in spans),
        "short_f1": max(f1(short, s, lang) for s in spans) if answered else 0.0,
        "short_answer": short,
        "answer": whole,
        "gate_margin": (answer.get("verification") or {}).get("gate_margin"),
        "first_token_seconds": answer["timing"].get("first_token_seconds"),
        "total_seconds": answer["timing"]["total_seconds"],
    }


def summary(rows: list[dict]) -> dict:
    count = len(rows)
    share = lambda key: round(sum(bool(r[key]) for r in rows) / count, 3) if count else None  # noqa: E731
    firsts = [r["first_token_seconds"] for r in rows if r["first_token_seconds"] is not None]
    return {
        "questions": count,
        "answered": share("answered"),
        "abstained_by_reason": dict(Counter(r["abstention_reason"] for r in rows if not r["answered"])),
        "gold_in_evidence": share("gold_in_evidence"),
        "cites_gold": share("cites_gold"),
        "short_holds_gold": share("short_holds_gold"),
        "answer_holds_gold": share("answer_holds_gold"),
        "short_f1": round(sum(r["short_f1"] for r in rows) / count, 4) if count else None,
        "first_token_p50": round(percentile(firsts, 0.5), 2) if firsts else None,
        "total_p50": round(percentile([r["total_seconds"] for r in rows], 0.5), 2) if rows else None,
    }


def unanswerable_summary(rows: list[dict]) -> dict:
    count = len(rows)
    return {
        "questions": count,
        "abstained": round(sum(not r["answered"] for r in rows) / count, 3) if count else None,
        "abstained_by_reason": dict(Counter(r["abstention_reason"] for r in rows if not r["answered"])),
        "answered_holding_gold": sum(r["answer_holds_gold"] for r in rows),
    }


def margin_auc(rows: list[dict]) -> float | None:
    """How well the gate's margin parts answerable from unanswerable questions (ROC AUC; ties 1/2)."""
    yes = [r["gate_margin"] for r in rows if r["answerable"] and r["gate_margin"] is not None]
    no = [r["gate_margin"] for r in rows if not r["answerable"] and r["gate_margin"] is not None]
    if not yes or not no:
        return None
    return round(sum((a > b) + 0.5 * (a == b) for a in yes for b in no) / (len(yes) * len(no)), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="the GGUF the answers come from")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--per-lang", type=int, default=10)
    parser.add_argument("--distractors", type=int, default=200, help="other passages stored beside the gold ones")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embed-model", help="e.g. multilingual-e5-small (default: the offline MiniLM)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--rows", type=Path, help="write every question's row here (JSON lines)")
    parser.add_argument("--unanswerable", type=int, default=0, help="questions per language whose passage is absent")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="cmrag-ml-answers-"))
    started, rows, out = time.perf_counter(), [], {}
    for lang in args.langs.split(","):
        questions, passages, absent = pick(lang, args.shared / "data" / "multilingual" / lang, args.per_lang,
                                           args.distractors, args.seed, args.unanswerable)  # fmt: skip
        folder = workdir / lang
        env = {**clean_environment(), "CMRAG_DB_PATH": str(folder / "memory.db"),
               "CMRAG_LLM_MODEL_PATH": str(args.model.resolve())}  # fmt: skip
        if args.embed_model:
            env["CMRAG_EMBED_MODEL"] = args.embed_model
        if not (folder / "memory.db").exists():
            write_vault(passages, folder / "vault")
            mem(["models", "install", "--offline"], env)
            mem(["ingest-notes", str(folder / "vault")], env)
            mem(["reindex-embeddings"], env)
        names = {f"p{i:05d}": doc["_id"] for i, doc in enumerate(passages)}  # as write_vault names them
        log(f"{lang}: {len(questions)} + {len(absent)} questions over {len(passages)} passages through mem chat --json")
        answers = ask_all(questions + absent, env)
        found = [row(lang, q, a, names) for q, a in zip(questions, answers, strict=False)]
        missing = [row(lang, q, a, names, False) for q, a in zip(absent, answers[len(questions) :], strict=True)]
        out[lang] = summary(found)
        if absent:
            out[lang]["unanswerable"] = unanswerable_summary(missing)
            out[lang]["gate_margin_auc"] = margin_auc(found + missing)
        log(f"{lang}: {json.dumps(out[lang], ensure_ascii=False)}")
        rows += found + missing
    if args.rows:
        args.rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    result = {
        "benchmark": "multilingual_answers",
        "machine": machine(),
        "source": source_state(),
        "model": args.model.name,
        "embed_model": args.embed_model or "offline MiniLM",
        "per_lang": args.per_lang,
        "distractors": args.distractors,
        "seed": args.seed,
        "unanswerable": args.unanswerable,
        "languages": out,
        "overall": summary([r for r in rows if r["answerable"]]),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    if args.unanswerable:
        result["overall_unanswerable"] = unanswerable_summary([r for r in rows if not r["answerable"]])
        result["overall_gate_margin_auc"] = margin_auc(rows)
    print(json.dumps(result, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
