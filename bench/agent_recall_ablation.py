#!/usr/bin/env python3
"""Session recall@5 of the episodic strategy, with one ranking change at a time (issue 13, benchmark 1).

    python bench/agent_recall_ablation.py [--workdir DIR] [--only NAME,...] [--judge N --model GGUF --threads 1]

The memories and scoring of bench/agent_locomo.py (one memory per LoCoMo conversation through
`mem ingest-chat`; every question asked in process through the function `mem ask --no-llm --top-k 10`
calls, the abstention gate included). Each ablation patches agent/recall.py for its run only:
  baseline             the code as it is
  session_sum_0.2      a session ranks by its best turn + 0.2 x its second best (the best turn shows it)
  session_quota        at most one turn per session in the first five (SESSION_DECAY 0)
  rrf_k30 / rrf_k120   reciprocal rank fusion constant 30 / 120 instead of 60
  pool_50              50 candidates per variant instead of 30
  neighbour_0.25       a turn gains 0.25 of its best neighbour's score instead of 0.1
  ranged_x2            the variants within the question's date ranges count twice in the fusion
  said_within_week     a date range's variant also takes what was said up to 7 days after it
  speaker_perspective  for a question naming one speaker, a variant "Name: I <content words>"
  names_as_speakers    content-word variants leave out the names of the memory's speakers
  ranged_question      a date range's variant searches the question without its time words
  speaker_variant      for a question naming one speaker, one more list: that speaker's turns only
  speaker_boost_1.4    the named speaker's turns count 1.4 x (1.1)
  questions_0.95       a turn that ends in a question mark (a photo caption aside) scores 0.95 x
  time_boost_B         for a question asking when, a turn stating a time counts B x (TIME_BOOST)
  session_bm25, session_vector, content_mmr   session-level rankings (bench/agent_session_rankers.py)
  prf_rm3, prf_rm3_hybrid, uncovered, window_vector, window_bm25, window_both   first-stage lists
                       (bench/agent_first_stage.py)
`--judge N`: episodic with the opt-in session judge (agent/judge.py, CMRAG_RECALL_JUDGE_SESSIONS=8): the
local LLM judges the best turn of each of the first 8 sessions of the 10 evidence turns, and the 5 it finds
most relevant lead (the same 10 turns, reordered). Too
slow for all 760 questions here (~20 CPU s each), it runs on N questions drawn from those where it can gain
(a gold session among sessions 6-8 of the baseline's evidence and missing from its top five) and N drawn
from all others; the overall change is the groups' mean changes weighted by their sizes.
Reports overall / conversations 0-2 / held-out 3-4 / by category (turn R@10, session R@5, session hit@5). Prints JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

from agent_first_stage import FIRST_STAGE
from agent_locomo import ask, by_split, ingest, score
from agent_session_rankers import RANKERS
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo, session_of, summarize

from crossmodalrag.agent import recall
from crossmodalrag.agent.temporal import TimeRange
from crossmodalrag.retrieval.fusion import reciprocal_rank_fusion

WEEK = 7 * 86400.0
JUDGED_SESSIONS = 8
METRICS = ("turn_recall@10", "session_recall@5", "session_hit@5")


def session_sum(hits, limit, head=None, sessions=None, cosine_floor=None, second=0.2):
    """Sessions ordered by best + second x second-best turn score; each shows its best turn first."""
    turns: dict = {}
    for hit in hits:
        turns.setdefault(hit.source_id, []).append(hit)
    value = {s: t[0].score + second * (t[1].score if len(t) > 1 else 0.0) for s, t in turns.items()}
    first = [turns[s][0] for s in sorted(value, key=lambda s: -value[s])][:5]
    return first + [h for h in hits if h not in first][: limit - len(first)]


def ranged_twice(original, retriever, question, pool):
    variants = original(retriever, question, pool)
    return variants + [v for v in variants if v[1] is not pool]


def said_within_week(original, options, span):
    return original(options, TimeRange(span.start, None if span.end is None else span.end + WEEK, span.text))


def speaker_perspective(original, retriever, question, pool):
    variants = original(retriever, question, pool)
    rows = retriever.store.conn.execute("SELECT DISTINCT json_extract(metadata, '$.speaker') FROM chunks")
    words = {w.lower().removesuffix("'s") for w in recall.WORDS.findall(question)}
    named = [s for (s,) in rows if s and s.lower() in words]
    rest = (
        [w for w in recall.content_words(question).split() if w.lower().removesuffix("'s") != named[0].lower()]
        if named
        else []
    )
    return variants + [(f"{named[0]}: I {' '.join(rest)}", pool)] if len(named) == 1 and rest else variants


def memory_speakers(store) -> set[str]:
    rows = store.conn.execute("SELECT DISTINCT json_extract(metadata, '$.speaker') FROM chunks")
    return {s.lower() for (s,) in rows if s}


def names_as_speakers(original, retriever, question, pool):
    """Content-word variants without the names of the memory's speakers (the speaker boost weighs them)."""
    speakers = memory_speakers(retriever.store)
    variants = original(retriever, question, pool)
    out = []
    for text, options in variants:
        if text != question:
            kept = [w for w in text.split() if w.lower().removesuffix("'s") not in speakers]
            text = " ".join(kept) or text
        out.append((text, options))
    return out


def ranged_question(original, retriever, question, pool):
    """A date range's variant searches the question without its time words, not only its content words."""
    from crossmodalrag.agent.temporal import time_ranges

    variants = original(retriever, question, pool)
    _, rest = time_ranges(question, recall.memory_anchor(retriever))
    return [(rest if options is not pool else text, options) for text, options in variants]


def speaker_variant(state, original_variants, original_favour):
    """For a question naming one speaker, one more ranked list: its content words (names left out)
    searched with three times the pool, keeping that speaker's turns (RRF-fused with the others)."""

    def variants(retriever, question, pool):
        state.update(retriever=retriever, pool=pool)
        return original_variants(retriever, question, pool)

    def favour(store, hits, question):
        retriever, pool = state["retriever"], state["pool"]
        speakers = memory_speakers(store)
        named = {w.lower().removesuffix("'s") for w in recall.WORDS.findall(question)} & speakers
        words = [w for w in recall.content_words(question).split() if w.lower().removesuffix("'s") not in speakers]
        if len(named) == 1 and words:
            wide = recall.search(store, " ".join(words), replace(pool, top_k=pool.top_k * 3), retriever.semantic).hits
            spoken = recall_speakers(store, [h.chunk_id for h in wide])
            mine = [h.chunk_id for h in wide if spoken.get(h.chunk_id, "").lower() in named][: pool.top_k]
            fused, found, extra = (
                {h.chunk_id: h for h in hits},
                {h.chunk_id: h for h in wide},
                reciprocal_rank_fusion([mine]),
            )
            scored = {c: (fused[c].score if c in fused else 0.0) + extra.get(c, 0.0) for c in {*fused, *extra}}
            ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
            hits = [replace(fused.get(c) or found[c], score=value) for c, value in ranked]
        return original_favour(store, hits, question)

    return variants, favour


def recall_speakers(store, ids: list[int]) -> dict[int, str]:
    marks = ",".join("?" * len(ids))
    rows = store.conn.execute(f"SELECT id, json_extract(metadata, '$.speaker') FROM chunks WHERE id IN ({marks})", ids)
    return {chunk: speaker or "" for chunk, speaker in rows}


def questions_count_less(original, store, hits, factor=0.95):
    """A turn that asks a question ("What inspired you?") scores `factor` x: it rarely answers one."""
    photo = re.compile(r"\[shares a photo[^\]]*\]")  # LoCoMo's image captions end many a statement
    asks = {h.chunk_id for h in hits if photo.sub("", h.text.split("\n", 1)[-1]).strip().endswith("?")}
    ranked = original(store, hits)
    return sorted(
        (replace(h, score=h.score * factor) if h.chunk_id in asks else h for h in ranked),
        key=lambda h: (-h.score, h.chunk_id),
    )


@contextlib.contextmanager
def with_speaker_variant():
    variants, favour = speaker_variant({}, recall.episodic_variants, recall.favour_named_speaker)
    with (
        mock.patch.object(recall, "episodic_variants", variants),
        mock.patch.object(recall, "favour_named_speaker", favour),
    ):
        yield


def ablations() -> dict:
    def wrap(name, fn):
        return mock.patch.object(recall, name, functools.partial(fn, getattr(recall, name)))

    def fusion_k(k):
        return mock.patch.object(recall, "reciprocal_rank_fusion", functools.partial(reciprocal_rank_fusion, k=k))

    return {
        "baseline": contextlib.nullcontext,
        "session_sum_0.2": lambda: mock.patch.object(recall, "diversify_by_session", session_sum),
        "session_quota": lambda: mock.patch.object(recall, "SESSION_DECAY", 0.0),
        "rrf_k30": lambda: fusion_k(30),
        "rrf_k120": lambda: fusion_k(120),
        "pool_50": lambda: mock.patch.object(recall, "POOL", 50),
        "neighbour_0.25": lambda: mock.patch.object(recall, "NEIGHBOUR_SHARE", 0.25),
        "ranged_x2": lambda: wrap("episodic_variants", ranged_twice),
        "said_within_week": lambda: wrap("_within", said_within_week),
        "speaker_perspective": lambda: wrap("episodic_variants", speaker_perspective),
        "names_as_speakers": lambda: wrap("episodic_variants", names_as_speakers),
        "ranged_question": lambda: wrap("episodic_variants", ranged_question),
        "speaker_variant": with_speaker_variant,
        "speaker_boost_1.4": lambda: mock.patch.object(recall, "SPEAKER_BOOST", 1.4),
        "questions_0.95": lambda: wrap("with_neighbour_support", questions_count_less),
        **{
            f"time_boost_{b}": functools.partial(mock.patch.object, recall, "TIME_BOOST", b)
            for b in (1.1, 1.2, 1.3, 1.5)
        },
        **RANKERS,
        **FIRST_STAGE,
    }


def questions(sample: dict) -> list[dict]:
    return [q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")]


def run(dbs: list[Path], data: list[dict]) -> tuple[dict, list[list[dict]]]:
    """Figures of one configuration, and each question's answer (its turns) per conversation."""
    answers = [
        [ask(db, q["question"], "episodic") for q in questions(sample)] for db, sample in zip(dbs, data, strict=True)
    ]
    rows = [
        [(q["category"], score(a["turns"], q["evidence"])) for q, a in zip(questions(s), found, strict=True)]
        for s, found in zip(data, answers, strict=True)
    ]
    everything = summarize([r for rs in rows for r in rs])
    categories = {name: figures for name, figures in everything.items() if name != "overall"}
    return {"overall": everything["overall"], "splits": by_split(rows), "categories": categories}, answers


def judged(dbs: list[Path], data: list[dict], answers: list[list[dict]], args: argparse.Namespace) -> dict:
    """Episodic with the opt-in session judge (agent/judge.py), on a stratified sample (module doc)."""
    from crossmodalrag.agent.judge import SessionJudge
    from crossmodalrag.answer.llm import load_llm
    from crossmodalrag.config import load_settings

    # A long timeout: on a busy machine a slow judgement must not turn into a failure.
    overrides = {"llm_model_path": str(args.model), "llm_threads": args.threads, "llm_timeout": 900.0}
    judge = SessionJudge(load_llm(load_settings({**overrides, "db_path": dbs[0]})), JUDGED_SESSIONS)
    groups: dict[str, list] = {"can_gain": [], "others": []}
    for db, sample, found in zip(dbs, data, answers, strict=True):
        for question, answer in zip(questions(sample), found, strict=True):
            gold = {session_of(e) for e in question["evidence"]}
            order = list(dict.fromkeys(session_of(t) for t in answer["turns"]))[:JUDGED_SESSIONS]
            gains = bool(gold & set(order[5:])) and len(gold & set(order[:5])) < min(5, len(gold))
            groups["can_gain" if gains else "others"].append((db, question, answer))
    random.seed(0)
    report, cpu, asked = {}, 0.0, 0
    for name, members in groups.items():
        changes = []
        for db, question, before in random.sample(members, min(args.judge, len(members))):
            started = time.process_time()
            after = ask(db, question["question"], "episodic", judge)
            cpu, asked = cpu + time.process_time() - started, asked + 1
            old, new = score(before["turns"], question["evidence"]), score(after["turns"], question["evidence"])
            changes.append({k: new[k] - old[k] for k in new})
        report[name] = {"size": len(members), "judged": len(changes)} | {
            f"mean_change_{k}": round(sum(c[k] for c in changes) / max(1, len(changes)), 4) for k in METRICS
        }
        log(f"[judge] {name}: {report[name]}")
    total = sum(group["size"] for group in report.values())
    estimate = {k: round(sum(g["size"] * g[f"mean_change_{k}"] for g in report.values()) / total, 4) for k in METRICS}
    return {"groups": report, "estimated_change": estimate, "cpu_seconds_per_question": round(cpu / max(1, asked), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--only", help="comma-separated ablation names, a+b for both (baseline always runs)")
    parser.add_argument("--judge", type=int, default=0, metavar="N", help="questions per group for the LLM judge")
    parser.add_argument("--model", type=Path, default=Path("data/models/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"))
    parser.add_argument("--threads", type=int, default=1, help="the judge's llama.cpp threads")
    args = parser.parse_args()
    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-ablation-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = clean_environment()
    dbs = [ingest(sample, index, workdir, env, False)[0] for index, sample in enumerate(data)]
    chosen = ablations()
    wanted = ["baseline"] + [n for n in (args.only.split(",") if args.only else chosen) if n != "baseline"]
    result = {"benchmark": "agent_recall_ablation", "machine": machine(), "source": source_state(), "ablations": {}}
    baseline_answers: list[list[dict]] = []
    for name in wanted:
        with contextlib.ExitStack() as stack:
            for part in name.split("+"):  # "a+b": both changes at once
                stack.enter_context(chosen[part]())
            figures, answers = run(dbs, data)
        baseline_answers = answers if name == "baseline" else baseline_answers
        result["ablations"][name] = figures
        log(f"{name}: {json.dumps(figures['overall'])}")
    if args.judge:
        result["llm_judge"] = judged(dbs, data, baseline_answers, args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
