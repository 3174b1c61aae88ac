#!/usr/bin/env python3
"""Where episodic loses its gold sessions, and whether its own signals could reorder them (issue 13).

    python bench/agent_recall_reach.py [--shared DIR] [--workdir DIR]

The memories and questions of bench/agent_locomo.py, asked in process as `mem ask --no-llm --top-k 10
--strategy episodic` does. For every gold session missing from the top five (weighted 1 / gold sessions,
so the units add up to the session R@5 lost):
  fused_session_rank   its place in the fused session order (a session ranked by its best turn after
                       the speaker and neighbour weights, before the session MMR), or absent from the pool
  absent_global        for the absent ones: the best rank of its gold turns among all turns of the
                       memory by BM25 alone (the content words) and by MiniLM cosine alone (the question)
  refused              questions the abstention gate refuses (no evidence at all)
Then, per signal, two-fold cross-validation by conversation (fit on 0-2, report 3-4, and back):
sessions ranked by their best turn's fused score + a x the signal (standardised), a chosen on the
fitting half among GRID by session R@5 of the chosen five sessions; the other half reports it. A
signal the fitting half cannot use picks a = 0.
Prints JSON; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from unittest import mock

from agent_locomo import ask, ingest
from benchlib import DEFAULT_SHARED, clean_environment, log, machine, source_state
from locomo import CATEGORIES, load_locomo, session_of

from crossmodalrag.agent import recall
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.config import load_settings
from crossmodalrag.retrieval.search import search
from crossmodalrag.retrieval.stopwords import ENGLISH
from crossmodalrag.store import open_store

GRID = (-0.4, -0.2, -0.1, -0.05, -0.02, 0.0, 0.02, 0.05, 0.1, 0.2, 0.4)
WORDS = re.compile(r"[^\W\d_]{3,}")
PHOTO = re.compile(r"\[shares a photo[^\]]*\]")


def traced(db: Path, question: str) -> tuple[dict, dict]:
    """The answer and what recall saw: each variant's list and the fused, weighted turn order."""
    seen: dict = {}
    fuse, diversify = recall.fuse, recall.diversify_by_session

    def fuse_seen(lists):
        seen["lists"] = [
            [(h.chunk_id, h.components.get("lexical", 0.0), h.components.get("cosine", 0.0)) for h in found]
            for found in lists
        ]
        return fuse(lists)

    def diversify_seen(hits, limit, head=None, sessions=None, cosine_floor=None):
        seen["ranked"] = [(h.chunk_id, h.score) for h in hits]
        return diversify(hits, limit, head, sessions, cosine_floor)

    with (
        mock.patch.object(recall, "fuse", fuse_seen),
        mock.patch.object(recall, "diversify_by_session", diversify_seen),
    ):
        answer = ask(db, question, "episodic")
    return answer, seen


def turn_facts(db: Path) -> dict:
    """chunk id -> (turn id, speaker, source id, content words of the turn, ends with a question)."""
    with open_store(db, create=False) as store:
        rows = store.conn.execute(
            "SELECT id, json_extract(metadata, '$.turn_id'), json_extract(metadata, '$.speaker'), source_id, text"
            " FROM chunks"
        ).fetchall()
    names = {(r[2] or "").lower() for r in rows}
    facts = {}
    for chunk, turn, speaker, source, text in rows:
        said = PHOTO.sub("", text.split("\n", 1)[-1])
        words = {w for w in WORDS.findall(said.split(":", 1)[-1].lower()) if w not in ENGLISH and w not in names}
        facts[chunk] = (turn, speaker or "", source, words, said.strip().endswith("?"))
    return facts


def global_ranks(db: Path, question: str) -> tuple[dict, dict]:
    """turn id -> rank among all turns by BM25 alone, and by cosine alone."""
    with open_store(db, create=False) as store:
        retriever = open_retriever(store, load_settings({"db_path": db}), 10)
        turn = dict(store.conn.execute("SELECT id, json_extract(metadata, '$.turn_id') FROM chunks").fetchall())
        wide = replace(retriever.options, top_k=len(turn), min_candidates=len(turn), max_chunks_per_source=0,
                       recency_half_life_days=0, dedupe_threshold=0)  # fmt: skip
        lexical = search(store, recall.content_words(question) or question, wide, None).hits
        by_words = {turn[h.chunk_id]: rank for rank, h in enumerate(lexical, 1)}
        by_meaning = {}
        if retriever.semantic is not None:
            cosines = retriever.semantic.scores_for(retriever.semantic.query_vector(question), list(turn))
            ordered = sorted(cosines, key=lambda c: -cosines[c])
            by_meaning = {turn[c]: rank for rank, c in enumerate(ordered, 1)}
    return by_words, by_meaning


def band(rank: int | None) -> str:
    if rank is None:
        return "absent"
    return next((name for name, top in (("1-5", 5), ("6-10", 10), ("11-20", 20), ("21-30", 30)) if rank <= top), "31+")


def global_band(rank: int | None) -> str:
    if rank is None:
        return "no match"
    return next((f"<={top}" for top in (30, 60, 100) if rank <= top), ">100")


def session_signals(record: dict, facts: dict, idf: dict) -> tuple[list, dict]:
    """The candidate sessions in fused order, and per session the signals (best turn's where per turn)."""
    ranked, lists, question = record["ranked"], record["lists"], record["question"].lower()
    top = ranked[0][1] or 1.0
    order, best, count = [], {}, {}
    for chunk, value in ranked:
        source = facts[chunk][2]
        if source not in best:
            best[source] = (chunk, value)
            order.append(source)
        count[source] = count.get(source, 0) + 1
    named = {s for _, s, _, _, _ in facts.values() if s and s.lower() in question}
    signals = {}
    for place, source in enumerate(order, 1):
        chunk, value = best[source]
        words = facts[chunk][3]
        in_lists, first_rank, cosine, lexical = 0, 0.0, 0.0, 0.0
        for number, found in enumerate(lists):
            ranks = [r for r, (c, _, _) in enumerate(found, 1) if facts[c][2] == source]
            in_lists += bool(ranks)
            first_rank = max(first_rank, 1 / ranks[0]) if ranks and number == 0 else first_rank
            cosine = max([cosine] + [cos for c, _, cos in found if facts[c][2] == source])
            lexical = max([lexical] + [lex for c, lex, _ in found if facts[c][2] == source])
        signals[source] = {
            "fused": value / top,
            "place": 1 / place,
            "lists": in_lists / max(1, len(lists)),
            "question_rank": first_rank,
            "cosine": cosine,
            "lexical": lexical,
            "turns": math.log1p(count[source]),
            "named_speaker": float(len(named) == 1 and facts[chunk][1] in named),
            "content_words": math.log1p(len(words)),
            "idf_mass": sum(idf.get(w, 0.0) for w in words),
            "asks": float(facts[chunk][4]),
        }
    return order, signals


def recall_of(records: list[dict], weight: float, signal: str, spread: float) -> float:
    total = 0.0
    for record in records:
        if not record["answered"] or not record["order"]:
            continue
        values = record["signals"]
        score = {s: values[s]["fused"] + weight * values[s][signal] / spread for s in record["order"]}
        chosen = sorted(record["order"], key=lambda s: (-score[s], record["order"].index(s)))[:5]
        total += len(record["gold"] & {record["session_name"][s] for s in chosen}) / len(record["gold"])
    return total / len(records)


def cross_validate(records: list[dict]) -> dict:
    halves = {
        "0-2": [r for r in records if r["conversation"] < 3],
        "3-4": [r for r in records if r["conversation"] >= 3],
    }
    names = list(next(iter(next(r["signals"] for r in records if r["signals"]).values())))
    report = {"fused order": {half: round(recall_of(part, 0.0, "fused", 1.0), 4) for half, part in halves.items()}}
    for signal in names:
        if signal == "fused":
            continue
        values = [v[signal] for r in records for v in r["signals"].values()]
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) or 1.0
        row = {}
        for fit, held in (("0-2", "3-4"), ("3-4", "0-2")):
            chosen = max(GRID, key=lambda a: (recall_of(halves[fit], a, signal, spread), -abs(a)))
            row[f"fit {fit}: a"] = chosen
            row[f"held out {held}"] = round(recall_of(halves[held], chosen, signal, spread), 4)
        report[signal] = row
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    data = load_locomo(args.shared)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agent-reach-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = clean_environment()
    records, lost, refused = [], {}, 0
    for index, sample in enumerate(data):
        db = ingest(sample, index, workdir, env, False)[0]
        facts = turn_facts(db)
        frequency: dict[str, int] = {}
        for *_, words, _ in facts.values():
            for word in words:
                frequency[word] = frequency.get(word, 0) + 1
        idf = {w: math.log(len(facts) / n) for w, n in frequency.items()}
        session_name = {source: session_of(turn) for turn, _, source, _, _ in facts.values()}
        for question in (q for q in sample["qa"] if q.get("category") in CATEGORIES and q.get("evidence")):
            answer, seen = traced(db, question["question"])
            gold = {session_of(e) for e in question["evidence"]}
            record = {"conversation": index, "question": question["question"], "gold": gold,
                      "answered": bool(answer["turns"]), "session_name": session_name, **seen}  # fmt: skip
            record["order"], record["signals"] = session_signals(record, facts, idf) if seen.get("ranked") else ([], {})
            records.append(record)
            refused += not answer["turns"]
            shown = {session_of(t) for t in answer["turns"][:5]}
            fused = list(dict.fromkeys(session_name[s] for s in record["order"]))
            missing = gold - shown
            by_words = by_meaning = None
            for session in sorted(missing):
                unit = 1 / len(gold)
                place = band(fused.index(session) + 1 if session in fused else None)
                key = ("refused" if not answer["turns"] else place, CATEGORIES[question["category"]])
                lost[key] = lost.get(key, 0.0) + unit
                if place == "absent" and answer["turns"]:
                    if by_words is None:
                        by_words, by_meaning = global_ranks(db, question["question"])
                    turns = [e for e in question["evidence"] if session_of(e) == session]
                    best = [min((r[t] for t in turns if t in r), default=None) for r in (by_words, by_meaning)]
                    either = min((b for b in best if b is not None), default=None)
                    for name, rank in (("bm25", best[0]), ("cosine", best[1]), ("either", either)):
                        k = ("absent_global", name, global_band(rank))
                        lost[k] = lost.get(k, 0.0) + unit
        log(f"conversation {index}: {len(records)} questions so far")
    bands: dict[str, dict[str, float]] = {}
    for key, units in lost.items():
        group = " / ".join(key[:-1]) if key[0] == "absent_global" else key[0]
        bands.setdefault(group, {})[key[-1]] = round(bands.get(group, {}).get(key[-1], 0.0) + units, 1)
    print(json.dumps({
        "benchmark": "agent_recall_reach", "machine": machine(), "source": source_state(),
        "questions": len(records), "refused_questions": refused,
        "lost_gold_session_units": round(sum(v for k, v in lost.items() if k[0] != "absent_global"), 1),
        "lost_by_fused_session_rank": {k: v for k, v in bands.items() if not k.startswith("absent_global")},
        "absent_from_pool_by_global_rank": {k: v for k, v in bands.items() if k.startswith("absent_global")},
        "one_signal_cross_validated_session_recall@5": cross_validate(records),
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
