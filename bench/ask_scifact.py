#!/usr/bin/env python3
"""SciFact through the commands a user runs: `mem ingest-notes`, then `mem chat --json` / `mem ask --json`.

    python bench/ask_scifact.py [--shared DIR] [--workdir DIR] [--hybrid] [--limit N] [--check-ask N]
                                [--baseline-src DIR] [--llm N --model PATH.gguf [--rows]]

Every abstract becomes a note (`# title` + text) in a fresh vault, ingested with `mem ingest-notes`
into a fresh database. Each judged train claim is then asked, with `--no-llm --top-k 10`, through
one `mem chat --json` process (the same code path as `mem ask`, without paying the start-up per
claim); `--check-ask N` also runs the first N claims through separate `mem ask --json` processes and
counts answers that differ. Scored: nDCG@10 over the returned evidence (an abstention scores 0) and
the share of claims abstained, at `--top-k 10` and at the default top-k. `--baseline-src DIR` also
asks every claim with the package in DIR (e.g. the last commit's: `git archive HEAD src | tar -x -C
/tmp/base`, then `--baseline-src /tmp/base/src`) over the same memory: the baseline measured in the
same run. `--hybrid` embeds with the offline MiniLM first. `--llm N`
also asks the first N claims with the language model (its gate and checks included) and reports
how many it answered, beside the same claims' scores without it.

Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from scifact import load_corpus, load_qrels, load_queries, ndcg_at

MEM = [sys.executable, "-m", "crossmodalrag"]


def write_vault(corpus: list[dict], vault: Path) -> dict[str, str]:
    """One note per abstract; returns note path -> corpus id."""
    vault.mkdir(parents=True, exist_ok=True)
    paths = {}
    for row in corpus:
        path = vault / f"{row['_id']}.md"
        title = " ".join(row.get("title", "").split()) or row["_id"]
        path.write_text(f"# {title}\n\n{row.get('text', '')}\n", encoding="utf-8")
        paths[str(path.resolve())] = row["_id"]
    return paths


def mem(args: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([*MEM, *args], env=env, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"mem {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
    return done


def ask_all(claims: list[str], env: dict, top_k: int | None, llm: bool = False) -> tuple[list[dict], float]:
    """Every claim through one `mem chat --json` process (`--no-llm` unless `llm`): a JSON line each."""
    started = time.perf_counter()
    extra = (["--top-k", str(top_k)] if top_k else []) + ([] if llm else ["--no-llm"])
    done = mem(["chat", "--json", *extra], env, input="\n".join(claims) + "\n")
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(answers) != len(claims):
        raise SystemExit(f"mem chat answered {len(answers)} of {len(claims)} claims")
    return answers, time.perf_counter() - started


def with_source(env: dict, source: Path) -> dict:
    """The environment that runs `mem` from another copy of the package (a baseline)."""
    return {**env, "PYTHONPATH": str(source.resolve())}


def score(answers: list[dict], ids: list[str], qrels: dict, paths: dict[str, str]) -> dict:
    ndcg, abstained = [], 0
    for query_id, answer in zip(ids, answers, strict=True):
        ranked = list(dict.fromkeys(paths.get(e["source_uri"], "") for e in answer["evidence"]))
        abstained += answer["abstained"]
        ndcg.append(0.0 if answer["abstained"] else ndcg_at(ranked, qrels[query_id], 10))
    n = len(ids)
    return {"claims": n, "ndcg@10": round(sum(ndcg) / n, 4), "abstained": round(abstained / n, 4)}


def outcome(answer: dict) -> str:
    """ "answered" (the model's verdict), the abstention's reason, or "evidence, <reason>": the
    evidence shown because that check withheld the model's verdict on the claim."""
    withheld = (answer.get("verification") or {}).get("withheld")
    return answer["abstention_reason"] or (f"evidence, {withheld}" if withheld else "answered")


def llm_row(query_id: str, answer: dict) -> dict:
    """What the model made of one claim: answered or why not, the gate's margin, the short answer."""
    checks = answer.get("verification") or {}
    return {
        "id": query_id,
        "outcome": outcome(answer),
        "gate_margin": checks.get("gate_margin"),
        "gate_min_margin": checks.get("gate_min_margin"),
        "claim_margins": [c["margin"] for c in checks.get("claims", [])],
        "short_answer": answer.get("short_answer"),
    }


def check_against_ask(claims: list[str], chat_answers: list[dict], env: dict) -> dict:
    """`mem ask --json` per claim must give what `mem chat --json` gave (timings aside)."""
    differing, seconds = 0, []
    for claim, from_chat in zip(claims, chat_answers, strict=False):
        started = time.perf_counter()
        from_ask = json.loads(mem(["ask", claim, "--no-llm", "--json", "--top-k", "10"], env).stdout)
        seconds.append(time.perf_counter() - started)
        strip = lambda a: {k: v for k, v in a.items() if k != "timing"}  # noqa: E731
        differing += strip(from_ask) != strip(from_chat)
    return {
        "claims": len(seconds),
        "differing": differing,
        "mem_ask_seconds_mean": round(sum(seconds) / len(seconds), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--hybrid", action="store_true", help="embed with the offline MiniLM (several minutes)")
    parser.add_argument("--limit", type=int, help="only the first N judged claims")
    parser.add_argument("--check-ask", type=int, default=20, help="claims also run through separate `mem ask`")
    parser.add_argument("--baseline-src", type=Path, help="also ask with the package in this folder (baseline)")
    parser.add_argument("--llm", type=int, default=0, help="also ask the first N claims with the language model")
    parser.add_argument("--model", type=Path, help="GGUF file for --llm (default: what `mem` would choose)")
    parser.add_argument("--rows", action="store_true", help="with --llm: each claim's outcome and margins")
    args = parser.parse_args()
    env = clean_environment()
    root = args.shared / "data" / "scifact"
    corpus, queries, qrels = load_corpus(root), load_queries(root), load_qrels(root, "train")
    ids = sorted(qrels, key=int)[: args.limit]
    claims = [queries[i] for i in ids]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="ask-scifact-"))
    env = {**env, "CMRAG_DB_PATH": str(work / "memory.db")}
    mode = "hybrid" if args.hybrid else "lexical"
    paths = write_vault(corpus, work / "vault")
    if args.hybrid:
        mem(["models", "install", "--offline"], env)
    log(f"[{mode}] mem ingest-notes: {len(corpus)} abstracts")
    started = time.perf_counter()
    mem(["ingest-notes", str(work / "vault")], env)
    ingest_seconds = time.perf_counter() - started
    result = {"benchmark": "ask_scifact", "mode": mode, "machine": machine(), "source": source_state()}
    result["ingest_seconds"] = round(ingest_seconds, 1)
    for label, top_k in (("top_k_10", 10), ("default_top_k", None)):
        log(f"[{mode}] mem chat --json --no-llm ({label}) over {len(claims)} claims")
        answers, seconds = ask_all(claims, env, top_k)
        result[label] = {**score(answers, ids, qrels, paths), "seconds": round(seconds, 1)}
        if label == "top_k_10":
            without_llm = answers
        if args.baseline_src:
            log(f"[{mode}] the same with the baseline in {args.baseline_src}")
            answers, seconds = ask_all(claims, with_source(env, args.baseline_src), top_k)
            result[label]["baseline"] = {**score(answers, ids, qrels, paths), "seconds": round(seconds, 1)}
        if label == "top_k_10" and args.check_ask:
            log(f"[{mode}] mem ask --json on the first {args.check_ask} claims")
            # Against this code's answers: with --baseline-src, `answers` now holds the baseline's.
            result["mem_ask_check"] = check_against_ask(claims[: args.check_ask], without_llm, env)
    if args.llm:
        log(f"[{mode}] mem chat --json with the language model on {args.llm} claims")
        llm_env = {**env, "CMRAG_LLM_MODEL_PATH": str(args.model.resolve())} if args.model else env
        answers, seconds = ask_all(claims[: args.llm], llm_env, 10, llm=True)
        scored = score(answers, ids[: args.llm], qrels, paths)
        reasons: dict[str, int] = {}
        for answer in answers:
            reasons[outcome(answer)] = reasons.get(outcome(answer), 0) + 1
        result["with_llm"] = {**scored, "outcomes": reasons, "seconds": round(seconds, 1)}
        # The same claims without the model: the first N are not an average draw of all 809.
        result["with_llm"]["without_llm"] = score(without_llm[: args.llm], ids[: args.llm], qrels, paths)
        if args.rows:
            result["with_llm"]["rows"] = [llm_row(i, answer) for i, answer in zip(ids, answers, strict=False)]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
