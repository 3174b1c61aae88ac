#!/usr/bin/env python3
"""Fit the abstention gate of `mem ask --no-llm` (retrieval/gate.py `is_weak`) on dev data.

    python bench/calibrate_gate.py [--shared DIR] [--workdir DIR] [--models minilm,multilingual-e5-small]
                                   [--sets de,es,vi] [--per-group N] [--keep 0.98] [--fresh]

Collects, through the library (the retriever `mem ask` uses, top-k 10), the gate's features for
each question: idf-weighted coverage and matched terms of the best-covering hit, the number of
hits, and the best cosine per embedding model. Then fits the thresholds and prints one JSON object
with the kept / refused shares on both sides.

Questions whose answer is in memory (positives): SciFact train claims over every abstract, LoCoMo
dev answerable questions (categories 1-4) over their own conversation, and the questions of the
five multilingual dev sets (zh, ja, de, es, vi) over a memory holding every other paragraph (the
even positions) -- only the questions whose gold paragraph is stored. Questions whose answer is not
(negatives): LoCoMo adversarial questions (category 5, same conversation: hard), off-topic questions
from the other English corpus (LoCoMo questions over SciFact, SciFact claims over a conversation),
and same-article questions whose paragraph is not stored (hard).

Operating point: keep at least `--keep` of the answerable questions in EVERY positive group (each
language and corpus), then refuse as many negatives as possible (mean over negative groups). One rule
for every language, never per question: held-out data is used to judge. The lexical thresholds are
fitted on the lexical features; each embedding model gets its own cosine threshold (cosines of
different models live on different scales), fitted on that model's hybrid features with the lexical
thresholds fixed. Stores and each model's features per set are cached in the workdir (`--fresh`
collects again; `--sets` limits the embedding models to some sets, so several runs can share the work).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from ask_scifact import write_vault as scifact_vault
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import load_locomo, turn_documents
from multilingual import load as load_multilingual
from multilingual import write_vault as multilingual_vault
from scifact import load_corpus, load_qrels, load_queries, ndcg_at

from crossmodalrag.answer.evidence import search_options
from crossmodalrag.config import Settings
from crossmodalrag.ingest import IngestReport, ingest_documents, ingest_notes
from crossmodalrag.retrieval.gate import FULL_COVERAGE
from crossmodalrag.retrieval.search import search
from crossmodalrag.store import open_store

LANGS = ("zh", "ja", "de", "es", "vi")
MODELS = {"lexical": None, "minilm": None, "multilingual-e5-small": "multilingual-e5-small"}
# multilingual-e5 embeds 1-5 passages/s here (2 cores): it is fitted on the five language sets only
# (the 5,183 SciFact abstracts alone would take 20-80 minutes); the English sets are MiniLM's.
SKIPPED = {("multilingual-e5-small", "scifact"), ("multilingual-e5-small", "locomo")}


def every_nth(items: list, limit: int) -> list:
    """A deterministic, evenly spread sample of at most `limit` items."""
    return items if len(items) <= limit else items[:: len(items) // limit][:limit]


# ---------------------------------------------------------------- the question sets


def scifact_set(shared: Path, work: Path, per_group: int) -> dict:
    root = shared / "data" / "scifact"
    queries, qrels = load_queries(root), load_qrels(root, "train")
    paths = scifact_vault(load_corpus(root), work / "scifact-vault")
    ids = every_nth(sorted(qrels, key=int), per_group)
    names = {Path(p).stem: doc for p, doc in paths.items()}
    questions = [(queries[i], "scifact", True, qrels[i]) for i in ids]
    return {"notes": work / "scifact-vault", "questions": questions, "names": names}


def locomo_sets(shared: Path, per_group: int) -> list[dict]:
    conversations = load_locomo(shared)
    share = max(1, per_group // len(conversations))
    sets = []
    for index, sample in enumerate(conversations):
        answerable = [q for q in sample["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
        adversarial = [q for q in sample["qa"] if q.get("category") == 5]
        questions = [(q["question"], "locomo", True, None) for q in every_nth(answerable, share)]
        questions += [(q["question"], "locomo_adversarial", False, None) for q in every_nth(adversarial, share)]
        sets.append({"docs": turn_documents(index, sample["conversation"]), "questions": questions, "names": {}})
    return sets


def multilingual_set(shared: Path, work: Path, lang: str, per_group: int) -> dict:
    corpus, queries, qrels = load_multilingual(shared / "data" / "multilingual" / lang)
    stored = [row for i, row in enumerate(corpus) if i % 2 == 0]
    kept = {row["_id"] for row in stored}
    vault = work / f"{lang}-vault"
    names = multilingual_vault(stored, vault) if not vault.exists() else _names(vault, stored)
    judged = [(q["text"].strip(), qrels[q["_id"]]) for q in queries if q["_id"] in qrels]
    positives = [(text, lang, True, {d: 1 for d in gold}) for text, gold in judged if gold <= kept]
    negatives = [(text, f"{lang}_same_article", False, None) for text, gold in judged if not gold & kept]
    questions = every_nth(positives, per_group) + every_nth(negatives, per_group)
    return {"notes": vault, "questions": questions, "names": names}


def _names(vault: Path, stored: list[dict]) -> dict[str, str]:
    return {f"p{index:05d}": doc["_id"] for index, doc in enumerate(stored)}


def off_topic(sets: dict[str, dict], per_group: int) -> None:
    """English questions asked of the other English corpus: the answer is not there."""
    claims = [q for q, *_ in sets["scifact"]["questions"]]
    chats = [q for name, s in sets.items() if name.startswith("locomo") for q, _, pos, _ in s["questions"] if pos]
    sets["scifact"]["questions"] += [(q, "locomo_on_scifact", False, None) for q in every_nth(chats, per_group)]
    locomo = [name for name in sets if name.startswith("locomo")]
    share = max(1, per_group // len(locomo))
    for offset, name in enumerate(locomo):
        picked = every_nth(claims[offset :: len(locomo)], share)
        sets[name]["questions"] += [(q, "scifact_on_locomo", False, None) for q in picked]


# ---------------------------------------------------------------- features


def open_memory(work: Path, name: str, spec: dict):
    """The set's store, ingested once (cached in the workdir)."""
    db = work / f"{name}.db"
    fresh = not db.exists()
    store = open_store(db)
    if fresh:
        if "docs" in spec:
            ingest_documents(store, spec["docs"], {}, IngestReport())
        else:
            ingest_notes(store, [spec["notes"]])
    return store, Settings(db_path=db)


def semantic_for(store, settings: Settings, model: str):
    """The model's semantic index over this store, embedding what is missing first."""
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.index.models import install_offline, resolve_model
    from crossmodalrag.retrieval.semantic import SemanticIndex

    settings.embed_model = MODELS[model]
    installed = resolve_model(settings)
    if installed.path is None or not installed.path.exists():  # not while a parallel run loads it
        install_offline(settings)
    embedder = load_embedder(settings)
    report = embed_missing(store, embedder, settings.embed_batch_size)
    if report.chunks:
        log(f"  embedded {report.chunks} chunks with {model} in {report.seconds:.0f} s")
    return SemanticIndex(store, embedder, settings)


def features(store, semantic, spec: dict) -> list[dict]:
    options = search_options(Settings(), top_k=10)
    rows = []
    for question, group, answerable, gold in spec["questions"]:
        result = search(store, question, options, semantic)
        row = {
            "group": group,
            "answerable": answerable,
            "coverage": round(result.coverage, 4),
            "matched": result.matched_terms,
            "terms": len(result.term_weights),
            "hits": len(result.hits),
            "cosine": None if result.similarity is None else round(result.similarity, 4),
        }
        if gold:
            ranked = list(dict.fromkeys(spec["names"].get(Path(h.source_uri).stem, "") for h in result.hits))
            row["ndcg"] = round(ndcg_at(ranked, gold, 10), 4)
        rows.append(row)
    return rows


def collect(args: argparse.Namespace) -> dict[str, list[dict]]:
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    sets = {"scifact": scifact_set(args.shared, work, args.per_group)}
    sets.update({f"locomo{i}": s for i, s in enumerate(locomo_sets(args.shared, args.per_group))})
    off_topic(sets, args.per_group)
    sets.update({lang: multilingual_set(args.shared, work, lang, args.per_group) for lang in LANGS})
    only = set(args.sets.split(",")) if args.sets else None
    found: dict[str, list[dict]] = {}
    for model in dict.fromkeys(["lexical", *args.models.split(",")]):  # the lexical fit comes first
        found[model] = []
        for name, spec in sets.items():
            kind = name.rstrip("0123456789")
            if (model, kind) in SKIPPED or (only and model != "lexical" and kind not in only):
                continue
            cache = work / "features" / model / f"{name}-{args.per_group}.json"
            if not cache.exists() or args.fresh:
                started = time.perf_counter()
                store, settings = open_memory(work, name, spec)
                semantic = None if model == "lexical" else semantic_for(store, settings, model)
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(features(store, semantic, spec)))
                store.close()
                log(f"{model} {name}: {len(spec['questions'])} questions in {time.perf_counter() - started:.0f} s")
            found[model] += json.loads(cache.read_text())
    return found


# ---------------------------------------------------------------- fitting


def answered(row: dict, rule: dict) -> bool:
    """`is_weak` (retrieval/gate.py) inverted: does `mem ask` answer with these features?"""
    if not row["hits"]:
        return False
    cosine = row["cosine"]
    if cosine is None or "floor" not in rule:
        return row["coverage"] >= rule["min_coverage"]
    if cosine < rule["floor"]:
        return row["coverage"] >= FULL_COVERAGE
    return row["coverage"] >= rule["min_coverage"] or cosine >= rule["close"]


def previous_answered(row: dict, rule: dict) -> bool:
    """The gate before bench/calibrate_gate.py: coverage 0.5, or 3 terms at 0.2, or cosine 0.5."""
    several = row["matched"] >= 3 and row["coverage"] >= 0.2
    close = row["cosine"] is not None and row["cosine"] >= 0.5
    return bool(row["hits"]) and (row["coverage"] >= 0.5 or several or close)


def shares(rows: list[dict], rule: dict, gate=answered) -> dict[str, dict]:
    """Per group: the share answered and, where the ranking is scored, nDCG@10 with refusals at 0."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["group"], []).append(row)
    out = {}
    for group, items in sorted(groups.items()):
        kept = [gate(r, rule) for r in items]
        entry = {"questions": len(items), "answerable": items[0]["answerable"]}
        entry["answered" if items[0]["answerable"] else "passed"] = round(sum(kept) / len(items), 4)
        if "ndcg" in items[0]:
            entry["ndcg@10"] = round(sum(r["ndcg"] for r in items) / len(items), 4)
            entry["answered_ndcg@10"] = round(
                sum(r["ndcg"] for r, k in zip(items, kept, strict=True) if k) / len(items), 4
            )
        out[group] = entry
    return out


def quality(rows: list[dict], rule: dict) -> tuple[float, float]:
    """(worst kept share over positive groups, mean refused share over negative groups)."""
    table = shares(rows, rule)
    kept = [g["answered"] for g in table.values() if g["answerable"]]
    refused = [1 - g["passed"] for g in table.values() if not g["answerable"]]
    return min(kept), sum(refused) / len(refused)


def grid(start: float, stop: float, step: float) -> list[float]:
    return [round(start + i * step, 3) for i in range(int(round((stop - start) / step)) + 1)]


def fit_lexical(rows: list[dict], keep: float) -> dict:
    """The highest coverage floor that still keeps `keep` of every positive group."""
    feasible = [c for c in grid(0.0, 0.6, 0.025) if quality(rows, {"min_coverage": c})[0] >= keep]
    return {"min_coverage": max(feasible)}


def fit_cosines(rows: list[dict], lexical: dict, keep: float, passing: float = 0.02) -> dict:
    """The model's two cosines, the lexical floor fixed. `close` (answered on meaning alone): the
    cosine that at most `passing` of each negative group reaches. `floor` (refused whatever words
    match): the highest that, with that `close`, still keeps `keep` of every positive group (a
    higher floor refuses more of the negatives, never fewer)."""
    negatives: dict[str, list[float]] = {}
    for row in rows:
        if not row["answerable"] and row["cosine"] is not None:
            negatives.setdefault(row["group"], []).append(row["cosine"])
    tops = [sorted(c)[min(len(c) - 1, int((1 - passing) * len(c)))] for c in negatives.values()]
    close = min(1.0, math.ceil(max(tops, default=1.0) * 100) / 100)
    feasible = [f for f in grid(0.0, close, 0.01) if quality(rows, {**lexical, "floor": f, "close": close})[0] >= keep]
    return {**lexical, "floor": max(feasible, default=0.0), "close": close}


def report(found: dict[str, list[dict]], keep: float) -> dict:
    fitted = fit_lexical(found["lexical"], keep)
    out = {"operating_point": f"keep >= {keep:.0%} of the answerable questions in every group", "models": {}}
    out["lexical_rule"] = fitted
    for model, rows in found.items():
        rule = fitted if model == "lexical" else fit_cosines(rows, fitted, keep)
        out["models"][model] = {
            "rule": rule,
            "fitted": shares(rows, rule),
            "previous_gate": shares(rows, rule, previous_answered),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/calibrate-gate"))
    parser.add_argument("--models", default="minilm,multilingual-e5-small", help="embedding models (lexical always)")
    parser.add_argument(
        "--sets", help="only these sets for the embedding models, e.g. de,es,vi (scifact, locomo, zh...)"
    )
    parser.add_argument("--per-group", type=int, default=300, help="questions per group (evenly spread)")
    parser.add_argument("--keep", type=float, default=0.98, help="share of answerable questions kept per group")
    parser.add_argument("--fresh", action="store_true", help="collect again, ignoring features cached in the workdir")
    args = parser.parse_args()
    clean_environment()
    found = collect(args)
    result = {"benchmark": "calibrate_gate", "machine": machine(), "source": source_state()}
    result.update(report(found, args.keep))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
