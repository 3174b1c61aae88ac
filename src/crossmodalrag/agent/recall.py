"""Recall strategies for conversational questions: `direct`, `episodic`, `fusion` (`mem ask --strategy`).

- direct: one hybrid search, as `mem ask` always did.
- episodic: the question's temporal expressions become date ranges on the memory's own timeline
  (agent/temporal.py; `before|after|since <event>` finds the event's date by searching for it);
  hybrid search runs per variant (the question; its content words; each within its range), the
  lists are fused by reciprocal rank (RRF), and the result is diversified by session (MMR: each
  further turn from an already chosen session counts a little less).
- fusion: episodic's variants plus a lexical-only and a semantic-heavy pass, fused the same way.
No reranker (none ships in a registry package; the local LLM ranked worse): the signals are the
fused lists, the time window, and session diversity. `--after/--before` filter every strategy.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from crossmodalrag.agent.periods import named_periods, period_spans
from crossmodalrag.agent.temporal import EVENT_BOUND, TimeRange, asks_when, states_time, time_ranges
from crossmodalrag.agent.updates import split_label
from crossmodalrag.retrieval.dates import within
from crossmodalrag.retrieval.fusion import reciprocal_rank_fusion
from crossmodalrag.retrieval.gate import model_cosines
from crossmodalrag.retrieval.scoring import below_successors
from crossmodalrag.retrieval.search import SearchOptions, SearchResult, search
from crossmodalrag.retrieval.stopwords import ENGLISH

if TYPE_CHECKING:
    from crossmodalrag.agent.judge import SessionJudge
    from crossmodalrag.answer.evidence import Retriever
    from crossmodalrag.store import Store
    from crossmodalrag.types import Hit

STRATEGIES = ("direct", "episodic", "fusion")
POOL = 30  # candidates per variant
SESSION_DECAY = 0.5  # MMR by session: the n-th further hit of one session is worth DECAY**n of its score
DIVERSE_HEAD = 5  # how many of the first results are picked for session diversity
# A turn spoken by the one participant the question names ("What did Melanie paint?") counts this much
# more. Chosen among 1.1-1.3 on LoCoMo conversations 0-2 (turn R@10 +3.7 points at 1.1, session R@5 equal;
# higher values gained turns but lost sessions), reported on conversations 3-4 (docs/benchmarks.md).
SPEAKER_BOOST = 1.1
# A conversation turn also scores this share of its best-scoring neighbour turn (the one before or after
# it in the session; for agent memories, in their agent session): an answer sits next to its question,
# and evidence in one exchange spans turns.
# LoCoMo, 0.05-0.15 all gained on conversations 0-2; 0.1, the middle, on 0-2 turn R@10 / session R@5
# +1.0 / +0.5 points and on 3-4 (held out) +0.8 / +0.7 (docs/benchmarks.md).
NEIGHBOUR_SHARE = 0.1
SUPPORTED_LEXICAL = 0.3  # of the best hit's BM25: a hit below it, and not close in meaning, gets no support
# A question asking when ("When did Caroline go to the support group?") is answered by evidence that
# places it in time ("I went to a LGBTQ support group yesterday"): such a turn counts this much more.
# LoCoMo dev: 80% of the evidence turns of its when-questions state a time, 12% of all turns do. Among
# 1.1-1.5 on conversations 0-2, 1.2 is the least that gains all it can there (temporal turn R@10 +1.3
# points overall, 3-4 unchanged; 1.5 starts to lose sessions: docs/benchmarks.md, session 18).
TIME_BOOST = 1.2
WORDS = re.compile(r"\w+")


def with_recall(
    retriever: "Retriever",
    strategy: str,
    after: str | None,
    before: str | None,
    judge: "SessionJudge | None" = None,
    names: tuple[str, str] = ("--after", "--before"),
) -> "Retriever":
    """The retriever with a strategy, an --after/--before window and, opt-in, a model that picks the
    leading sessions of episodic and fusion (agent/judge.py). Raises InvalidArgument for a bad date;
    `names`: what its message calls the two bounds (the CLI's flags, or a tool's arguments)."""
    from crossmodalrag.agent.tools import parse_window

    retriever.strategy = strategy
    retriever.judge = judge
    start, end = parse_window(after, before, names)
    retriever.options = replace(retriever.options, after=start, before=end)
    return retriever


def recall(retriever: "Retriever", question: str, strategy: str = "direct", answering: bool = False) -> SearchResult:
    """Ranked evidence for the question by the chosen strategy (retriever.options carry top_k and
    any --after/--before window). The abstention gate reads the direct pass's coverage.
    `answering`: the evidence a model answers from, the fused order as it is. The named speaker's
    lift would fill it with their turns, so the subject share (answer/subjects.py) could no longer
    see a question put to the wrong person: LoCoMo dev generation from lifted, spread evidence
    abstained on 0.50 of adversarial questions, from this 0.80 (seeds 0 and 3, docs/benchmarks.md);
    and spreading over sessions pushes a session's further good turns out of a top 5 (the gold turn
    among the 5 excerpts: 446 of 751 answerable questions spread and lifted, 530 of 731 neither)."""
    base = retriever.options
    direct = search(retriever.store, question, base, retriever.semantic)
    if strategy == "direct" or strategy not in STRATEGIES:
        return direct
    # Age is no signal here: a question about an old session must not lose to a newer one. Time enters
    # through the question's own date ranges (the variants); a half-life of 0 zeroes recency.
    pool = replace(base, top_k=max(POOL, base.top_k * 3), max_chunks_per_source=0, recency_half_life_days=0)
    variants = episodic_variants(retriever, question, pool)
    lists = [search(retriever.store, text, options, retriever.semantic).hits for text, options in variants]
    if strategy == "fusion":
        lists.append(search(retriever.store, question, pool, None).hits)  # lexical only
        if retriever.semantic is not None:
            semantic_heavy = replace(pool, profile="relevant")
            lists.append(search(retriever.store, question, semantic_heavy, retriever.semantic).hits)
    fused = fuse(lists)
    lifted = fused
    if not answering:
        lifted = favour_stated_time(favour_named_speaker(retriever.store, fused, question), question)
    cosines = model_cosines(base, direct.embed_model) if direct.similarity is not None else None
    floor = cosines.floor if cosines else None
    successor_of = successors(retriever.store, fused)
    # The boosts and fusion above may lift a replaced memory over the one that replaced it again.
    ranked = below_successors(with_neighbour_support(retriever.store, lifted, floor), successor_of)
    sessions = agent_sessions(retriever.store, ranked)
    spans = period_spans(named_periods(question, memory_anchor(retriever)))
    period = {h.chunk_id for h in ranked if within(h.timestamp, spans)}
    hits = (
        ranked[: base.top_k]
        if answering
        else diversify_by_session(ranked, base.top_k, sessions=sessions, cosine_floor=floor, period=period)
    )
    if retriever.judge is not None:
        # It reorders the evidence found, never changes which: a session it pulled in from further
        # down pushed other turns out of the top 10 (bench/agent_recall_ablation.py --judge).
        hits = retriever.judge.lead(question, hits, lambda hit: sessions.get(hit.source_id, hit.source_id))
    return replace(direct, hits=below_successors(hits, successor_of))  # diversity and the judge reorder


def episodic_variants(retriever: "Retriever", question: str, pool: SearchOptions) -> list[tuple[str, SearchOptions]]:
    """(query text, options) per variant: the question, its content words, and each within a date range."""
    anchor = memory_anchor(retriever)
    ranges, rest = time_ranges(question, anchor)
    ranges += event_ranges(retriever, rest if ranges else question, pool)
    content = content_words(rest) or question
    variants = [(question, pool)]
    if content != question:
        variants.append((content, pool))
    # A single content word ("Where was John in August?" -> "John") matches every turn of that speaker
    # in the range equally, so BM25 ranked them by shortness ("Thanks! Talk to you later!"); the question
    # without its time words keeps what is asked for the embedder to rank by.
    ranged = content if len(content.split()) > 1 else rest.strip(" ?!.,") or question
    for span in ranges:
        variants.append((ranged, _within(pool, span)))
    return variants


def memory_anchor(retriever: "Retriever") -> datetime:
    """'Now' on the memory's own timeline: its newest dated source or turn (the clock for an empty memory)."""
    from crossmodalrag.retrieval.filters import timeline_now

    return timeline_now(retriever.store.conn)


def event_ranges(retriever: "Retriever", question: str, pool: SearchOptions) -> list[TimeRange]:
    """`before the migration`: the migration's date is that of the best evidence for it."""
    found = []
    for match in EVENT_BOUND.finditer(question):
        words = content_words(match.group(2))
        if not words:
            continue
        hits = search(retriever.store, words, replace(pool, top_k=1), retriever.semantic).hits
        if not hits or hits[0].timestamp is None:
            continue
        when = hits[0].timestamp
        word = match.group(1).lower()
        found.append(
            TimeRange(None, when, match.group(0)) if word == "before" else TimeRange(when, None, match.group(0))
        )
    return found


def _within(options: SearchOptions, span: TimeRange) -> SearchOptions:
    start = span.start if options.after is None or span.start is None else max(span.start, options.after)
    end = span.end if options.before is None or span.end is None else min(span.end, options.before)
    return replace(
        options, after=start if start is not None else options.after, before=end if end is not None else options.before
    )


def content_words(text: str) -> str:
    """The words that carry the question's topic (question words and function words dropped)."""
    return " ".join(w for w in WORDS.findall(text) if w.lower() not in ENGLISH)


def fuse(lists: list[list["Hit"]]) -> list["Hit"]:
    """RRF over the variants' rankings; each hit keeps its first-seen components, scored by RRF."""
    by_id: dict[int, Hit] = {}
    for hits in lists:
        for hit in hits:
            by_id.setdefault(hit.chunk_id, hit)
    scores = reciprocal_rank_fusion([[h.chunk_id for h in hits] for hits in lists if hits])
    ranked = sorted(scores, key=lambda chunk: (-scores[chunk], chunk))
    return [
        replace(by_id[chunk], score=scores[chunk], components={**by_id[chunk].components, "rrf": scores[chunk]})
        for chunk in ranked
    ]


def favour_named_speaker(store: "Store", hits: list["Hit"], question: str) -> list["Hit"]:
    """Hits re-ranked with SPEAKER_BOOST for the turns of the one speaker the question names (a
    conversation turn's `speaker`: a person in LoCoMo, user or assistant in agent sessions; for an
    agent memory, the "Name:" label it starts with, as in "Caroline: I went to ...")."""
    ids = [h.chunk_id for h in hits]
    speakers = dict(
        store.conn.execute(
            f"SELECT id, json_extract(metadata, '$.speaker') FROM chunks WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        ).fetchall()
    ) if ids else {}  # fmt: skip
    for hit in hits:
        if hit.source_type == "memory" and not speakers.get(hit.chunk_id):
            speakers[hit.chunk_id] = split_label(hit.text.split("\n", 1)[-1])[0]  # the body, as memory_texts
    spoken = f" {' '.join(WORDS.findall(question.lower()))} "
    named = {s for s in speakers.values() if s and f" {' '.join(WORDS.findall(s.lower()))} " in spoken}
    if len(named) != 1:
        return hits
    boosted = [replace(h, score=h.score * SPEAKER_BOOST) if speakers.get(h.chunk_id) in named else h for h in hits]
    return sorted(boosted, key=lambda h: (-h.score, h.chunk_id))


def favour_stated_time(hits: list["Hit"], question: str) -> list["Hit"]:
    """Hits re-ranked with TIME_BOOST for those that state a time, when the question asks when. Only
    a hit's own words count: its first line is the breadcrumb, which dates every turn of a session."""
    if TIME_BOOST == 1.0 or not asks_when(question):
        return hits
    boosted = [replace(h, score=h.score * TIME_BOOST) if states_time(h.text.split("\n", 1)[-1]) else h for h in hits]
    return sorted(boosted, key=lambda h: (-h.score, h.chunk_id))


def with_neighbour_support(store: "Store", hits: list["Hit"], cosine_floor: float | None = None) -> list["Hit"]:
    """Hits re-ranked with NEIGHBOUR_SHARE of the best score among their neighbours that are hits too
    (see `neighbours`), for hits about the question themselves (`about_the_question`)."""
    around = neighbours(store, hits)
    score_at: dict[tuple, float] = {}
    for hit in hits:
        if hit.chunk_id in around:
            place = around[hit.chunk_id][0]
            score_at[place] = max(score_at.get(place, 0.0), hit.score)

    best_bm25 = max((h.components.get("bm25", 0.0) for h in hits), default=0.0)

    def supported(hit: "Hit") -> "Hit":
        if hit.chunk_id not in around or not about_the_question(hit, best_bm25, cosine_floor):
            return hit
        _, before, after = around[hit.chunk_id]
        best = max(score_at.get(before, 0.0), score_at.get(after, 0.0))
        return replace(hit, score=hit.score + NEIGHBOUR_SHARE * best) if best else hit

    return sorted(map(supported, hits), key=lambda h: (-h.score, h.chunk_id)) if around else hits


def about_the_question(hit: "Hit", best_bm25: float, cosine_floor: float | None) -> bool:
    """Whether a hit is itself about the question: a good share of the best hit's words
    (SUPPORTED_LEXICAL of its BM25), or close in meaning (the embedding model's gate floor). RRF
    scores lie close together: the bonus of a turn whose neighbours are hits as well, ~6 places,
    lifted turns that share nothing with the question over an exact match (a memory holding the
    question's every word, cosine 0.92, below an unrelated turn, 0.17)."""
    if best_bm25 > 0 and hit.components.get("bm25", 0.0) >= SUPPORTED_LEXICAL * best_bm25:
        return True
    return cosine_floor is not None and hit.components.get("cosine", 0.0) >= cosine_floor


def neighbours(store: "Store", hits: list["Hit"]) -> dict[int, tuple[tuple, tuple, tuple]]:
    """chunk id -> (its place, the place before it, the place after it). A conversation turn's place
    is (source, chunk index) in its session; an agent memory stored with a session_id is one place in
    its (agent, session), in the order of its own time (`when`), then of storage, as turns stored one
    by one over MCP are."""
    found: dict[int, tuple[tuple, tuple, tuple]] = {}
    turns = [h.chunk_id for h in hits if h.source_type == "conversation"]
    if turns:
        for chunk, source, index in store.conn.execute(
            f"SELECT id, source_id, chunk_index FROM chunks WHERE id IN ({','.join('?' * len(turns))})", turns
        ):
            found[chunk] = ((source, index), (source, index - 1), (source, index + 1))
    memories = sorted({h.source_id for h in hits if h.source_type == "memory" and h.source_id is not None})
    if memories:
        marks = ",".join("?" * len(memories))
        order = {
            source: (("memory", source), ("memory", before), ("memory", after))
            for source, before, after in store.conn.execute(
                "SELECT source_id, before, after FROM (SELECT m.source_id, LAG(m.source_id) OVER w AS before,"
                " LEAD(m.source_id) OVER w AS after FROM agent_memories m JOIN sources s ON s.id = m.source_id"
                " WHERE m.session_id != '' AND (m.agent_id, m.session_id) IN (SELECT agent_id, session_id"
                f" FROM agent_memories WHERE source_id IN ({marks}))"
                " WINDOW w AS (PARTITION BY m.agent_id, m.session_id ORDER BY s.timestamp, m.created_at, m.source_id))"
                f" WHERE source_id IN ({marks})",
                memories + memories,
            )
        }
        found.update({h.chunk_id: order[h.source_id] for h in hits if h.source_id in order})
    return found


def successors(store: "Store", hits: list["Hit"]) -> dict[int, int]:
    """source id -> the memory that superseded it, for the hits that are superseded agent memories."""
    ids = sorted({h.source_id for h in hits if h.components.get("superseded")})
    if not ids:
        return {}
    rows = store.conn.execute(
        f"SELECT source_id, superseded_by FROM agent_memories WHERE superseded_by IS NOT NULL"
        f" AND source_id IN ({','.join('?' * len(ids))})",
        ids,
    )
    return dict(rows.fetchall())


def agent_sessions(store: "Store", hits: list["Hit"]) -> dict[int, tuple[str, str]]:
    """(agent, session) of the hits that are agent memories stored with a session_id: the memories
    of one agent session are one episode, as the turns of one transcript are (bench/agent_mcp.py:
    session R@5 of turns stored one by one 0.796 -> 0.819 when diversified by it)."""
    ids = sorted({h.source_id for h in hits if h.source_type == "memory" and h.source_id is not None})
    if not ids:
        return {}
    rows = store.conn.execute(
        f"SELECT source_id, agent_id, session_id FROM agent_memories WHERE session_id != ''"
        f" AND source_id IN ({','.join('?' * len(ids))})",
        ids,
    )
    return {source: (agent, session) for source, agent, session in rows}


def diversify_by_session(
    hits: list["Hit"],
    limit: int,
    head: int | None = None,
    sessions: dict[int, Any] | None = None,
    cosine_floor: float | None = None,
    period: set[int] | None = None,
) -> list["Hit"]:
    """Greedy MMR by session for the first `head` picks (default DIVERSE_HEAD): a session already
    chosen n times multiplies a hit's score by SESSION_DECAY**n; the rest follow in fused order, so
    the top of the list spans sessions and the tail still holds a session's further turns. A hit's
    session is its source (a transcript's session), or `sessions[source_id]` where given.
    A hit not about the question itself (`about_the_question`) is never lifted over one ranked above
    it: it is picked only once it leads the rest. Fused RRF scores lie close together (0.026 vs
    0.036), so once the best session's turns were decayed, turns of other sessions that share no word
    with the question and are far from it in meaning ("[REDACTED_TEXT ...]", cosine 0.17) came
    before the session's turn holding the answer.
    `period`: the hits inside a period the question names (agent/periods.py). While some of them about
    the question are left, the spread stays inside it: a hit from outside is not lifted over one ranked
    above it either ("the logo in March 2023": turns of July and May, fused far below March's logo
    turns, took two of the five places once each March session had been chosen)."""
    head = DIVERSE_HEAD if head is None else head
    sessions = sessions or {}
    best_bm25 = max((h.components.get("bm25", 0.0) for h in hits), default=0.0)
    related = {h.chunk_id for h in hits if about_the_question(h, best_bm25, cosine_floor)}
    in_period = related & (period or set())
    remaining, chosen, counts = list(hits), [], {}

    def session(hit: "Hit") -> Any:
        return sessions.get(hit.source_id, hit.source_id)

    while remaining and len(chosen) < min(limit, head):
        lifted = in_period if any(h.chunk_id in in_period for h in remaining) else related
        eligible = [h for i, h in enumerate(remaining) if i == 0 or h.chunk_id in lifted]
        best = max(eligible, key=lambda h: h.score * SESSION_DECAY ** counts.get(session(h), 0))
        remaining.remove(best)
        chosen.append(best)
        counts[session(best)] = counts.get(session(best), 0) + 1
    return chosen + remaining[: max(0, limit - len(chosen))]
