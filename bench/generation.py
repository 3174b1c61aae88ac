#!/usr/bin/env python3
"""Grounded generation with a real local model: the [sample] queries and 100 LoCoMo dev questions.

    python bench/generation.py --model PATH.gguf [--shared DIR] [--per-category 20] [--lexical-only]

1. [sample]: `mem models install --offline`, `mem seed-sample`, then `mem eval-generation
   --query-prefix "[sample]" --json`, run as a user would (subprocesses, a fresh database, hybrid
   retrieval), with CMRAG_LLM_MODEL_PATH pointing at the model.
2. LoCoMo dev: each conversation ingested into its own memory with `mem ingest-chat` (one source
   per session, a chunk per turn, as a user's LoCoMo export would be); `--per-category` questions
   drawn from each of the five categories with a fixed seed; asked through one `mem chat --json`
   process per conversation (the code path of `mem ask`) with the product's defaults. Category 5
   ("adversarial": the conversation never says it) should be abstained on; categories 1-4 should
   be answered. Reported: citation validity, abstention correctness per side, LoCoMo's answer
   token-F1 against the gold answer (answerable questions; an abstention scores 0), time to first
   token, total time per answer, and the evidence tokens the prompt carried.
Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import string
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, percentile, source_state
from locomo import load_locomo

from crossmodalrag.answer.citations import CITATION
from crossmodalrag.answer.parts import short_answer

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def normalize(text: str) -> list[str]:
    """LoCoMo's (SQuAD-style) answer normalisation: lower case, no punctuation or articles."""
    text = CITATION.sub(" ", str(text)).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    return re.sub(r"\b(a|an|the|and)\b", " ", text).split()


def token_f1(prediction: str, gold: str) -> float:
    predicted, expected = normalize(prediction), normalize(gold)
    common = sum((Counter(predicted) & Counter(expected)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def run_sample(model: Path, workdir: Path, env: dict[str, str]) -> dict:
    env = {**env, "CMRAG_DB_PATH": str(workdir / "sample.db"), "CMRAG_LLM_MODEL_PATH": str(model)}
    mem = [sys.executable, "-m", "crossmodalrag"]
    # As the README's first command does: the offline embedding model first, so retrieval is hybrid.
    subprocess.run([*mem, "models", "install", "--offline"], env=env, check=True, capture_output=True)
    subprocess.run([*mem, "seed-sample"], env=env, check=True, capture_output=True)
    log("[sample] mem eval-generation --query-prefix [sample]")
    done = subprocess.run(
        [*mem, "eval-generation", "--query-prefix", "[sample]", "--json"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"eval-generation failed: {done.stderr}")
    report = json.loads(done.stdout)
    return {"overall": report["overall"], "model": report["model"]}


def pick_questions(data: list[dict], per_category: int, seed: int = 0) -> list[tuple[int, dict]]:
    pool: dict[int, list[tuple[int, dict]]] = {c: [] for c in CATEGORIES}
    for index, sample in enumerate(data):
        for question in sample["qa"]:
            if question.get("category") in CATEGORIES:
                pool[question["category"]].append((index, question))
    rng = random.Random(seed)
    return [item for category in CATEGORIES for item in rng.sample(pool[category], per_category)]


def run_locomo(
    data: list[dict],
    model: Path,
    workdir: Path,
    per_category: int,
    hybrid: bool,
    env: dict,
    seed: int = 0,
    rows_file: Path | None = None,
    resume: bool = False,
) -> tuple[dict, list[dict]]:
    """Each conversation in its own memory, ingested with `mem ingest-chat` (LoCoMo's JSON is one of
    its formats: one source per session, a chunk per turn), its questions asked through one
    `mem chat --json` process with the product's defaults. `resume`: the questions `rows_file`
    already holds are not asked again (a long run that was stopped goes on where it was)."""
    chosen = pick_questions(data, per_category, seed)
    rows = resumed(rows_file, chosen) if resume else []
    done_before = {(r["conversation"], r["question"]) for r in rows}
    for index in sorted({i for i, _ in chosen}):
        questions = [q for i, q in chosen if i == index and (i, q["question"]) not in done_before]
        if not questions:
            continue
        conv_env = {**env, "CMRAG_DB_PATH": str(workdir / f"locomo-{index}.db"), "CMRAG_LLM_MODEL_PATH": str(model)}
        ingest_conversation(data[index], workdir / f"locomo-{index}.json", hybrid, conv_env)
        log(f"[locomo] conversation {index}: {len(questions)} questions through mem chat --json")
        lines = "\n".join(" ".join(q["question"].split()) for q in questions) + "\n"
        done = subprocess.run(
            [sys.executable, "-m", "crossmodalrag", "chat", "--json"],
            input=lines,
            env=conv_env,
            capture_output=True,
            text=True,
        )
        answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
        if done.returncode != 0 or len(answers) != len(questions):
            raise SystemExit(f"mem chat failed on conversation {index}: {done.stderr[-400:]}")
        rows += [{"conversation": index, **locomo_row(q, a)} for q, a in zip(questions, answers, strict=True)]
        log(f"[locomo] conversation {index}: {sum(r['abstained'] for r in rows[-len(questions) :])} abstained")
        if rows_file:  # a long run keeps what it measured even if a later step fails
            with rows_file.open("a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows[-len(questions) :])
    return summarize(rows), rows


def resumed(rows_file: Path | None, chosen: list[tuple[int, dict]]) -> list[dict]:
    """The rows of an earlier run of the same questions (those `rows_file` holds), in their order."""
    if rows_file is None or not rows_file.exists():
        return []
    asked = {(i, q["question"]) for i, q in chosen}
    rows = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if (r.get("conversation"), r.get("question")) in asked]
    log(f"[locomo] resuming: {len(rows)} questions already answered")
    return rows


def ingest_conversation(sample: dict, export: Path, hybrid: bool, env: dict) -> None:
    """`mem ingest-chat` of one conversation (written beside its database as a one-item LoCoMo
    file), embedded with the offline MiniLM when `hybrid`, else kept lexical."""
    if Path(env["CMRAG_DB_PATH"]).exists():
        return  # a rerun in the same workdir asks again without re-ingesting
    export.write_text(json.dumps([sample]), encoding="utf-8")
    if hybrid:
        mem(["models", "install", "--offline"], env)
    else:
        # The hub model, which offline (HF_HUB_OFFLINE=1) is not there: ingest embeds nothing.
        env = {**env, "CMRAG_EMBED_MODEL": "BAAI/bge-small-en-v1.5"}
    mem(["ingest-chat", str(export)], env)


def mem(arguments: list[str], env: dict) -> None:
    done = subprocess.run([sys.executable, "-m", "crossmodalrag", *arguments], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mem {' '.join(arguments)} failed: {done.stderr[-400:]}")


def locomo_row(question: dict, answer: dict) -> dict:
    adversarial = question["category"] == 5
    claims = (answer.get("verification") or {}).get("claims", [])
    cited_turns = {c["locator"].rsplit(" · ", 1)[-1] for c in answer["citations"]}  # "<session> · D3:7"
    gold = str(question.get("answer", ""))
    short = answer.get("short_answer") or ""
    kept = [c for c in claims if c["supported"]]
    # A sentence repeating an earlier one is left out unchecked (reason "repeated"): not a refusal, and
    # its words may well be in the answer, as the earlier sentence's.
    refused = [c for c in claims if not c["supported"] and c["reason"] != "repeated"]
    left_in = [c for c in refused if c["sentence"] in answer["answer"]]
    return {
        "question": question["question"],
        "category": CATEGORIES[question["category"]],
        "adversarial": adversarial,
        "abstained": answer["abstained"],
        "abstention_reason": answer["abstention_reason"],
        "mode": answer["mode"],
        "invalid_citations": sum(1 for w in answer["citation_warnings"] if w["kind"] == "invalid_citation"),
        "cited": len(answer["citations"]),
        "cites_gold": bool(cited_turns & set(question.get("evidence", []))),
        "f1": None if adversarial else (0.0 if answer["abstained"] else token_f1(short, gold)),
        "f1_full_answer": None if adversarial else (0.0 if answer["abstained"] else token_f1(answer["answer"], gold)),
        # The same answer's short answer with the restated question left in (before answer/echo.py).
        "f1_untrimmed": None if adversarial else (0.0 if answer["abstained"] else token_f1(untrimmed(answer), gold)),
        "claims_checked": sum(1 for c in claims if c["margin"] is not None),
        "claims_unsupported": len(refused),
        # What a user reads: the sentences of a delivered answer, and those the checks had refused.
        "sentences_delivered": 0 if answer["abstained"] else len(kept),
        "unsupported_delivered": 0 if answer["abstained"] else len(left_in),
        "gate_margin": (answer.get("verification") or {}).get("gate_margin"),
        "claim_margins": [[c["margin"], c["short_answer"]] for c in claims],
        "claim_reasons": [c["reason"] for c in claims],  # "names_missing": failed without a margin
        # The model's own sentences, also those the checks withheld (the delivered text lacks them).
        "claim_sentences": [c["sentence"] for c in claims],
        "subject_share": (answer.get("verification") or {}).get("subject_share"),
        "short_answer": short,
        "answer": answer["answer"],  # the delivered text, to re-trim short answers from stored rows
        "gold": gold,
        "first_token_seconds": answer["timing"].get("first_token_seconds"),
        "total_seconds": answer["timing"]["total_seconds"],
        # The gate reads the answer prompt's evidence (which the answer then reuses), so its seconds are
        # mostly what the answer would spend anyway; the sentence checks are the verifier's own cost.
        "gate_seconds": answer["timing"].get("gate_seconds"),
        "claims_seconds": answer["timing"].get("verification_seconds"),
        "prompt_chars": answer["usage"].get("prompt_chars"),
    }


def untrimmed(answer: dict) -> str:
    return (short_answer(answer["answer"]) or "") if answer["mode"] == "llm" else ""


def summarize(rows: list[dict]) -> dict:
    generated = [r for r in rows if r["mode"] == "llm"]
    answerable = [r for r in rows if not r["adversarial"]]
    adversarial = [r for r in rows if r["adversarial"]]
    first = [r["first_token_seconds"] for r in generated if r["first_token_seconds"] is not None]
    total = [r["total_seconds"] for r in generated]
    chars = [r["prompt_chars"] for r in generated if r["prompt_chars"]]
    checked = sum(r["claims_checked"] for r in generated)
    gate = [r["gate_seconds"] for r in generated if r.get("gate_seconds")]
    checking = [r for r in generated if r.get("claims_seconds")]

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 4) if values else None

    per_category = {
        name: {
            "questions": len(items),
            "abstained": mean([1.0 if r["abstained"] else 0.0 for r in items]),
            "f1": mean([r["f1"] for r in items if r["f1"] is not None]),
        }
        for name in CATEGORIES.values()
        if (items := [r for r in rows if r["category"] == name])
    }
    return {
        "questions": len(rows),
        "citation_validity": mean([0.0 if r["invalid_citations"] else 1.0 for r in generated]),
        "adversarial_abstained": mean([1.0 if r["abstained"] else 0.0 for r in adversarial]),
        "answerable_answered": mean([0.0 if r["abstained"] else 1.0 for r in answerable]),
        "abstention_correct": mean([1.0 if r["abstained"] == r["adversarial"] else 0.0 for r in rows]),
        "answer_f1": mean([r["f1"] for r in answerable]),
        "answer_f1_when_answered": mean([r["f1"] for r in answerable if not r["abstained"]]),
        "weak_retrieval_abstentions": sum(1 for r in rows if r["abstention_reason"] == "weak_retrieval"),
        "first_token_seconds": {"p50": _p(first, 0.5), "p95": _p(first, 0.95)},
        "total_seconds": {
            "p50": _p(total, 0.5),
            "p95": _p(total, 0.95),
            "max": round(max(total), 2) if total else None,
        },
        "prompt_chars": {"p50": _p(chars, 0.5), "max": max(chars) if chars else None},
        "short_answer_f1": mean([r["f1"] for r in answerable]),
        "full_answer_f1": mean([r["f1_full_answer"] for r in answerable]),
        "short_answer_f1_untrimmed": mean([r["f1_untrimmed"] for r in answerable if "f1_untrimmed" in r]),
        "answered_citing_gold_evidence": mean(
            [1.0 if r["cites_gold"] else 0.0 for r in answerable if not r["abstained"]]
        ),
        "claims_checked": checked,
        "unsupported_sentence_rate_before_verification": round(
            sum(r["claims_unsupported"] for r in generated) / checked, 4
        )
        if checked
        else None,
        # A sentence the checks refused that a delivered answer still shows (0 when they work).
        "unsupported_sentence_rate_after_verification": _rate(
            sum(r.get("unsupported_delivered", 0) for r in generated),
            sum(r.get("sentences_delivered", 0) for r in generated),
        ),
        "sentences_dropped_from_delivered_answers": sum(
            r["claims_unsupported"] for r in generated if not r["abstained"]
        ),
        "abstained_as_unsupported": sum(1 for r in rows if r["abstention_reason"] == "unsupported"),
        "abstained_by_gate_or_model": sum(1 for r in rows if r["abstention_reason"] == "llm_insufficient"),
        "abstained_not_in_their_words": sum(1 for r in rows if r["abstention_reason"] == "subject_missing"),
        "gate_seconds": {"p50": _p(gate, 0.5)},  # includes reading the evidence the answer shares
        "claim_checks": {  # the sentence checks after the answer: what verification adds
            "seconds_p50": _p([r["claims_seconds"] for r in checking], 0.5),
            "pairs_per_second": _rate(
                sum(r["claims_checked"] for r in checking), sum(r["claims_seconds"] for r in checking)
            ),
        },
        "per_category": per_category,
    }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _p(values: list[float], q: float) -> float | None:
    return round(percentile(values, q), 2) if values else None


def _setting(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise argparse.ArgumentTypeError("expected NAME=VALUE")
    return name.strip(), value.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="GGUF file (e.g. from `mem models install --llm`)")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--per-category", type=int, default=20)
    parser.add_argument("--lexical-only", action="store_true", help="LoCoMo without embeddings")
    parser.add_argument("--skip-sample", action="store_true")
    parser.add_argument("--baseline", action="store_true", help="also run LoCoMo with verification off")
    parser.add_argument("--seed", type=int, default=0, help="which LoCoMo questions (0: the benchmark's)")
    parser.add_argument("--rows", action="store_true", help="include every question's row (margins, answers)")
    parser.add_argument("--resume", action="store_true", help="skip the questions the workdir's rows file holds")
    parser.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the asked questions, e.g. abstain_min_margin=-100 (calibration runs)",
    )
    args = parser.parse_args()
    env = clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="generation-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result: dict = {"benchmark": "generation", "model": args.model.name, "machine": machine(), "source": source_state()}
    if not args.skip_sample:
        result["sample"] = run_sample(args.model.resolve(), workdir, env)
    data = load_locomo(args.shared)
    for name, value in args.set:
        env[f"CMRAG_{name.upper()}"] = value  # recorded below: a calibration run, not the defaults
    result["settings"] = dict(args.set)
    model, hybrid = args.model.resolve(), not args.lexical_only
    rows_file = workdir / "locomo_rows.jsonl"
    result["locomo"], rows = run_locomo(
        data, model, workdir, args.per_category, hybrid, env, args.seed, rows_file, args.resume
    )
    if args.rows:
        result["locomo_rows"] = rows
    if args.baseline:
        log("[locomo] baseline: the same questions with CMRAG_LLM_VERIFY=off")
        off = {**env, "CMRAG_LLM_VERIFY": "off"}
        result["locomo_without_verification"] = run_locomo(
            data, model, workdir, args.per_category, hybrid, off, args.seed
        )[0]
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
