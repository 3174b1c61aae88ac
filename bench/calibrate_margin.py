#!/usr/bin/env python3
"""Fit the language model's gate thresholds before it writes an answer, on dev data:
`abstain_min_margin` (questions), `abstain_min_margin_conjectures` ("would she ...?") and
`abstain_min_margin_statements` (claims).

    python bench/calibrate_margin.py --model PATH.gguf [--shared DIR] [--workdir DIR] [--per-side 40]
                                     [--conjectures] [--scifact 40] [--keep 0.95] [--lexical-only]

The gate (answer/verify.py `gate_margin`) asks the model whether the excerpt about whom the question
names answers it, and reads the yes-minus-no margin of its first token. This collects that margin,
through the library path `mem ask` takes (the retriever, its no-model gate, then the judge), for:
- LoCoMo dev questions, each conversation ingested with `mem ingest-chat` as bench/generation.py
  does: answerable ones (categories 1-4) and adversarial ones (category 5: the conversation never
  says it), `--per-side` of each, drawn with a fixed seed from the questions that the generation
  benchmark does NOT ask (its 20 per category, seed 0), so the threshold is never fitted on them;
- SciFact train claims over every abstract (answerable: their evidence is stored), `--scifact` of them.
Questions the no-model gate already refuses are counted apart (the model never sees them).

Operating point, for each form of query (answer/verify.py `query_form`: LoCoMo's are questions and a
few conjectures, SciFact's claims statements; the last two score lower whatever the evidence): the highest threshold
that keeps at least `--keep` of the answerable ones of every set of that form; reported beside it,
the share of adversarial questions it refuses, and the same for the current defaults and a few other
keep levels. One threshold per form for every memory, never per question. Prints one JSON object
on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path

from ask_scifact import write_vault
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from generation import CATEGORIES, ingest_conversation, pick_questions
from locomo import load_locomo
from scifact import load_corpus, load_qrels, load_queries

from crossmodalrag.answer.evidence import evidence_answer, open_retriever
from crossmodalrag.answer.forms import query_form
from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.subjects import subject_share
from crossmodalrag.answer.verify import GATE_THRESHOLDS, gate_margin
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store

BENCHMARK_PER_CATEGORY = 20  # bench/generation.py's default sample, left out of the fit


def locomo_questions(data: list[dict], per_side: int, seed: int, conjectures: bool = False) -> list[tuple[int, dict]]:
    """`per_side` answerable and `per_side` adversarial questions outside the generation benchmark;
    with `conjectures`, every other answerable question of that form too (a random draw holds only
    a few: ~30 of LoCoMo dev's 760 answerable questions, all but one in open-domain)."""
    asked = {(i, q["question"]) for i, q in pick_questions(data, BENCHMARK_PER_CATEGORY, 0)}
    pool = [(i, q) for i, s in enumerate(data) for q in s["qa"] if q.get("category") in CATEGORIES]
    pool = [(i, q) for i, q in pool if (i, q["question"]) not in asked]
    rng = random.Random(seed)
    answerable = [item for item in pool if item[1]["category"] != 5]
    adversarial = [item for item in pool if item[1]["category"] == 5]
    chosen = rng.sample(answerable, per_side) + rng.sample(adversarial, per_side)
    if conjectures:
        inferred = [item for item in answerable if query_form(item[1]["question"]) == "conjecture"]
        chosen += [item for item in inferred if item not in chosen]
    return chosen


def margins(settings: Settings, llm, questions: list[tuple[str, str]]) -> list[dict]:
    """Each (set, question) through the retriever and its no-model gate, then the model's gate."""
    store = open_store(settings.db_path)
    retriever = open_retriever(store, settings)
    rows = []
    for group, question in questions:
        started = time.perf_counter()
        result = retriever.search(question)
        answer = evidence_answer(question, result, retriever.options, started, 0.0)
        margin = None if answer.abstained or llm is None else gate_margin(llm, question, answer.evidence)
        form = query_form(question)
        share = None if answer.abstained else subject_share(question, answer.evidence)
        rows.append(
            {
                "set": group,
                "form": form,
                "question": question,
                "margin": margin,
                "subject_share": share,
                "retrieval": answer.retrieval,
            }
        )
    store.close()
    return rows


def settings_for(db: Path, env: dict[str, str]) -> Settings:
    os.environ.update(env)
    os.environ["CMRAG_DB_PATH"] = str(db)
    return load_settings()


def collect_locomo(args: argparse.Namespace, env: dict, llm_env: dict) -> list[dict]:
    data = load_locomo(args.shared)
    chosen = locomo_questions(data, args.per_side, args.seed, args.conjectures)
    rows: list[dict] = []
    for index in sorted({i for i, _ in chosen}):
        db = args.workdir / f"locomo-{index}.db"
        ingest_conversation(
            data[index], args.workdir / f"locomo-{index}.json", not args.lexical_only, {**env, "CMRAG_DB_PATH": str(db)}
        )
        asked = [
            ("locomo-adversarial" if q["category"] == 5 else "locomo", q["question"]) for i, q in chosen if i == index
        ]
        log(f"[locomo] conversation {index}: {len(asked)} questions")
        rows += margins(settings_for(db, llm_env), args.llm, asked)
    return rows


def collect_scifact(args: argparse.Namespace, llm_env: dict) -> list[dict]:
    root = args.shared / "data" / "scifact"
    queries, qrels = load_queries(root), load_qrels(root, "train")
    db = args.workdir / "scifact.db"
    if not db.exists():
        log("[scifact] ingesting the abstracts as notes")
        vault = args.workdir / "scifact-vault"
        write_vault(load_corpus(root), vault)
        ingest_notes(open_store(db), [vault])
    ids = random.Random(args.seed).sample(sorted(qrels, key=int), args.scifact)
    log(f"[scifact] {len(ids)} claims")
    return margins(settings_for(db, llm_env), args.llm, [("scifact", queries[i]) for i in ids])


FORMS = GATE_THRESHOLDS


def refused(rows: list[dict], thresholds: dict[str, float]) -> float:
    """Share of rows the model's gate refuses, each at its form's threshold (no-model refusals not
    counted here)."""
    judged = [(r["margin"], thresholds[r["form"]]) for r in rows if r["margin"] is not None]
    return round(sum(m < t for m, t in judged) / len(judged), 4) if judged else 0.0


def fit(rows: list[dict], keep: float) -> float | None:
    """The highest threshold keeping at least `keep` of the judged answerable questions in every set
    (None without any)."""
    positives = {r["set"] for r in rows if r["set"] != "locomo-adversarial"}
    bounds = []
    for group in positives:
        judged = sorted(r["margin"] for r in rows if r["set"] == group and r["margin"] is not None)
        bounds.append(judged[int(round(len(judged) * (1 - keep), 6))] if judged else float("inf"))
    return round(min(bounds) - 0.005, 2) if bounds else None  # just below the last kept margin


def fit_forms(rows: list[dict], keep: float, defaults: dict[str, float]) -> dict[str, float]:
    """A threshold per form, each fitted on its own rows (a form without rows keeps its default)."""
    fitted = {form: fit([r for r in rows if r["form"] == form], keep) for form in FORMS}
    return {form: defaults[form] if value is None else value for form, value in fitted.items()}


def report(rows: list[dict], keep: float, current: dict[str, float]) -> dict:
    by_set = {group: [r for r in rows if r["set"] == group] for group in dict.fromkeys(r["set"] for r in rows)}

    def point(thresholds: dict[str, float]) -> dict:
        return {
            "thresholds": {FORMS[form]: value for form, value in thresholds.items()},
            "refused": {group: refused(items, thresholds) for group, items in by_set.items()},
        }

    return {
        "fitted": {"keep": keep, **point(fit_forms(rows, keep, current))},
        "current_default": point(current),
        # One threshold for both forms, as before session 5: the statements drag it down.
        "one_threshold": point(dict.fromkeys(FORMS, fit(rows, keep))),
        "other_keep_levels": [{"keep": k, **point(fit_forms(rows, k, current))} for k in (0.90, 0.98) if k != keep],
        "refused_before_the_model": {g: sum(r["margin"] is None for r in items) for g, items in by_set.items()},
        "questions": {group: len(items) for group, items in by_set.items()},
        "forms": {group: sorted({r["form"] for r in items}) for group, items in by_set.items()},
    }


def auc(positives: list[float], negatives: list[float], digits: int = 4) -> float | None:
    """Probability that an answerable question's score is above an adversarial one's (ties 1/2)."""
    pairs = [(p > n) + 0.5 * (p == n) for p in positives for n in negatives]
    return round(sum(pairs) / len(pairs), digits) if pairs else None


def subject_shares(rows: list[dict], threshold: float) -> dict:
    """The no-model rule before the gate (`abstain_min_subject_share`): per set, how many questions
    name a participant of the retrieved conversations and the share of those it refuses; the AUC of
    the share itself, answerable (LoCoMo) against adversarial."""
    named = {
        g: [r["subject_share"] for r in rows if r["set"] == g and r.get("subject_share") is not None]
        for g in dict.fromkeys(r["set"] for r in rows)
    }
    positives, negatives = named.get("locomo", []), named.get("locomo-adversarial", [])
    return {
        "threshold": threshold,
        "named": {g: len(shares) for g, shares in named.items()},
        "refused": {
            g: round(sum(s < threshold for s in shares) / len(shares), 4) for g, shares in named.items() if shares
        },
        "auc_locomo_vs_adversarial": auc(positives, negatives, digits=3),
    }


def current_thresholds() -> dict[str, float]:
    defaults = Settings(db_path=Path("x"))
    return {form: getattr(defaults, setting) for form, setting in FORMS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--per-side", type=int, default=40)
    parser.add_argument("--scifact", type=int, default=40)
    parser.add_argument("--keep", type=float, default=0.95)
    parser.add_argument("--conjectures", action="store_true", help="every answerable conjecture outside the benchmark")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lexical-only", action="store_true")
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: the product's rule)")
    parser.add_argument("--no-model", action="store_true", help="retrieval and the subject-share rule only")
    args = parser.parse_args()
    env = clean_environment()
    args.workdir = args.workdir or Path(tempfile.mkdtemp(prefix="calibrate-margin-"))
    args.workdir.mkdir(parents=True, exist_ok=True)
    llm_env = {"CMRAG_LLM_MODEL_PATH": str(args.model.resolve()), "CMRAG_LLM_THREADS": str(args.threads)}
    if args.lexical_only:
        llm_env["CMRAG_EMBED_MODEL"] = "BAAI/bge-small-en-v1.5"  # not on disk offline: lexical
    started = time.perf_counter()
    args.llm = None if args.no_model else load_llm(settings_for(args.workdir / "any.db", llm_env))
    rows = collect_locomo(args, env, llm_env) + (collect_scifact(args, llm_env) if args.scifact else [])
    result = {
        "benchmark": "calibrate_margin",
        "model": args.model.name,
        "machine": machine(),
        "source": source_state(),
        **({} if args.no_model else report(rows, args.keep, current_thresholds())),
        "subject_share": subject_shares(rows, Settings(db_path=Path("x")).abstain_min_subject_share),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "rows": rows,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
