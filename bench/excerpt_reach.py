#!/usr/bin/env python3
"""How much of the gold evidence the answer prompt shows: long excerpts cut from their start vs. their
part about the question (answer/focus.py). No language model runs.

    python bench/excerpt_reach.py [--shared DIR] [--workdir DIR] [--top-k 5]

FinanceBench dev: the 74 PDFs through `ingest_pdfs`, each of the 62 questions through the retrieval
`mem ask` answers from (lexical: `open_retriever` + `ask_without_llm`, the default 5 excerpts), then
the answer prompt's evidence block (`evidence_block`, CMRAG_LLM_EVIDENCE_CHARS) and a claim check's
(`judge_evidence`, 500 characters an excerpt) built twice from the same excerpts: cut from the start
(the question left out: the code before focus.py) and focused on the question. For the questions
whose gold page is among the excerpts, scored on the gold `evidence_text`'s distinct content words
and numbers (three or more characters, function words out):
  reach        share of them the evidence block holds, averaged over those questions
  full reach   questions whose block holds 90% or more of them
LoCoMo dev (every turn a chunk of its session, as `mem ingest-chat` stores them): the share of the
answer prompts of 200 questions whose evidence block changes at all (turns are short: it should not).
Prints one JSON object on stdout; progress on stderr. Data is read in place, never copied.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.answer.prompt import JUDGE_EXCERPT_CHARS, evidence_block, judge_evidence
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_pdfs
from crossmodalrag.retrieval.stopwords import STOPWORDS
from crossmodalrag.store import open_store

WORD = re.compile(r"\w+")


def content_tokens(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def reach(block: str, gold: str) -> float:
    wanted = content_tokens(gold)
    return len(wanted & content_tokens(block)) / len(wanted) if wanted else 0.0


def financebench(shared: Path, workdir: Path, top_k: int) -> dict:
    root = shared / "data" / "financebench"
    questions = [json.loads(line) for line in (root / "questions_dev.jsonl").read_text().splitlines() if line.strip()]
    db = workdir / "financebench.db"
    settings = Settings(db_path=db)
    with open_store(db) as store:
        if not store.conn.execute("SELECT 1 FROM sources LIMIT 1").fetchone():
            log("ingesting the FinanceBench PDFs (~1 min)")
            ingest_pdfs(store, [root / "pdfs"])
        retriever = open_retriever(store, settings, top_k, lexical_only=True)
        rows = []
        for question in questions:
            answer = ask_without_llm(retriever, question["question"])
            pages = {(question["doc_name"], e["evidence_page_num"] + 1) for e in question["evidence"]}
            if answer.abstained or not any((Path(e.hit.source_uri).stem, e.hit.page) in pages for e in answer.evidence):
                continue
            gold = " ".join(e["evidence_text"] for e in question["evidence"])
            text = question["question"]
            blocks = {
                "answer_from_start": evidence_block(answer.evidence, settings.llm_evidence_chars),
                "answer_focused": evidence_block(answer.evidence, settings.llm_evidence_chars, text),
                "judge_from_start": judge_evidence(answer.evidence, ""),
                "judge_focused": judge_evidence(answer.evidence, text),
            }
            rows.append({name: reach(block, gold) for name, block in blocks.items()})
    summary = {
        name: {
            "reach": round(sum(row[name] for row in rows) / len(rows), 4) if rows else None,
            "full_reach": sum(row[name] >= 0.9 for row in rows),
        }
        for name in (rows[0] if rows else {})
    }
    return {"questions": len(questions), "gold_page_among_excerpts": len(rows), **summary}


def locomo_unchanged(shared: Path, workdir: Path, top_k: int, count: int = 200) -> dict:
    """Turns are short: focusing should leave a conversation's answer prompts as they were."""
    from locomo import load_locomo

    from crossmodalrag.conversations import ingest_conversations

    data = load_locomo(shared)
    changed = asked = 0
    for index, sample in enumerate(data):
        export = workdir / f"locomo-{index}.json"
        export.write_text(json.dumps([sample]), encoding="utf-8")
        db = workdir / f"locomo-{index}.db"
        settings = Settings(db_path=db)
        with open_store(db) as store:
            if not store.conn.execute("SELECT 1 FROM sources LIMIT 1").fetchone():
                ingest_conversations(store, [export])
            retriever = open_retriever(store, settings, top_k, lexical_only=True)
            for question in sample["qa"][: count // len(data)]:
                answer = ask_without_llm(retriever, question["question"])
                if answer.abstained:
                    continue
                asked += 1
                budget = settings.llm_evidence_chars
                changed += evidence_block(answer.evidence, budget) != evidence_block(
                    answer.evidence, budget, question["question"]
                )
    return {"questions_answered": asked, "answer_prompts_changed": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--top-k", type=int, default=5)
    args = parser.parse_args()
    clean_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-excerpt-reach-"))
    workdir.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "excerpt_reach",
        "machine": machine(),
        "source": source_state(),
        "top_k": args.top_k,
        "evidence_chars": Settings.llm_evidence_chars,
        "judge_excerpt_chars": JUDGE_EXCERPT_CHARS,
        "financebench": financebench(args.shared, workdir, args.top_k),
        "locomo": locomo_unchanged(args.shared, workdir, args.top_k),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
