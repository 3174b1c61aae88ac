"""Retrieval at a memory level (`mem ask --level event|episode|concept`), always ending in L0 chunks.

- event: the best events' cited chunks, fused by reciprocal rank with ordinary L0 retrieval (on
  LoCoMo with gold events, fusion beat either alone; episode-first retrieval lost recall);
  the answer keeps the per-source cap (max_chunks_per_source) like plain retrieval;
- episode / concept: the best nodes (`matched_nodes`), then every chunk under them ranked by how
  well it matches the question, blended with its node's score.
A node's chunks pass the same filters as plain retrieval (--modality, --after/--before, and --match
all|phrase: every chunk shown holds the words or the phrase): a node with none left is not matched.
`--as-of` is refused: the nodes are built from the memory as it is now.
Node ranking blends meaning, words, recency and centrality; without embeddings it is lexical.
A `LevelRetriever` stands in for the plain one, so `mem ask`, `mem eval` and the API reuse their
answer, gate and metrics code unchanged; the gate reads the plain L0 search's coverage.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any

from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.errors import CMRAGError
from crossmodalrag.retrieval.candidates import matching_chunks
from crossmodalrag.retrieval.filters import CHUNK_TIME, is_filtered, passing_chunks
from crossmodalrag.retrieval.fusion import min_max, reciprocal_rank_fusion
from crossmodalrag.retrieval.ranking import capped_as
from crossmodalrag.retrieval.search import SearchResult
from crossmodalrag.retrieval.stopwords import STOPWORDS
from crossmodalrag.store import Store
from crossmodalrag.store.failures import is_read_only
from crossmodalrag.store.params import in_batches
from crossmodalrag.types import Hit, iso_time

NODE_LEVELS = ("event", "episode", "concept")
WORD = re.compile(r"[^\W_]{2,}")
MATCHED_NODES = 5  # episodes/concepts drilled into per question
EVENTS_DRILLED = 10  # events whose chunks join the fusion (at least; top_k when larger)
PLAIN_FUSED = 20  # plain hits in the fusion (at least; twice top_k when larger)
HYBRID = {"semantic": 0.55, "lexical": 0.25, "recency": 0.10, "centrality": 0.10}
LEXICAL = {"lexical": 0.70, "recency": 0.15, "centrality": 0.15}
# The event level is a channel fused with L0 search, so its events rank by how well they match the
# question alone: recency and centrality are priors for browsing episodes and concepts, and in the
# fusion they pulled the newest, most connected events over the matching ones (on LoCoMo dev with gold
# events: +2.3 points overall without them; docs/benchmarks.md).
EVENT_HYBRID = {"semantic": 0.65, "lexical": 0.35}
EVENT_LEXICAL = {"lexical": 1.0}
# An event about something else adds no evidence, only its chunks in place of plain hits: events whose
# cosine to the question is below their model's value stay out of the fusion (without vectors, no gate).
# MiniLM's 0.55, on LoCoMo dev, events-v5's extracted events (128 questions): single-hop -3.1 -> +3.1
# points vs plain retrieval (events-v6: +1.2); gold events (760): overall +3.0 -> +2.9, multi-hop +4.8 ->
# +5.0 (docs/benchmarks.md; chosen on those questions). Cosines are on each model's own scale
# (multilingual-e5 puts unrelated text near 0.8 and passed every event at 0.55): bench/memory_event_gate.py
# carries MiniLM's value to another model as the cosine that passes the same share (77%) of each LoCoMo
# dev question's 10 closest gold events (nomic-embed-text-v1.5 passed 99.8% of them at 0.55, 77% at its
# 0.69). A model not fitted there is gated at MiniLM's value.
EVENT_MIN_COSINES = {
    "sentence-transformers/all-MiniLM-L6-v2": 0.55,
    "multilingual-e5-small": 0.83,
    "nomic-embed-text-v1.5": 0.69,
}
EVENT_MIN_COSINE = EVENT_MIN_COSINES["sentence-transformers/all-MiniLM-L6-v2"]
DAY = 86400.0
# A node whose every chunk is gone (its note deleted from the vault, before `mem build-memory` removes
# its event) has nothing to drill down to: it is not matched.
LIVE_NODES = (
    "level = ? AND supported = 1 AND EXISTS (SELECT 1 FROM memory_evidence e WHERE e.node_id = memory_nodes.id)"
)


def words(text: str) -> set[str]:
    return {w for w in (m.lower() for m in WORD.findall(text)) if w not in STOPWORDS}


@dataclass
class NodeTable:
    """One level's nodes in memory, cached until the level changes (count and last update)."""

    ids: list[str]
    titles: list[str]
    times: list[float | None]
    centrality: Any
    words: list[set[str]]
    vectors: Any  # matrix with one row per node (zeros where a node has none), or None
    stamp: tuple = ()


_TABLES: dict[tuple[str, str], NodeTable] = {}


def node_table(store: Store, level: str) -> NodeTable:
    import numpy as np

    stamp = tuple(
        store.conn.execute(
            f"SELECT COUNT(*), MAX(updated_at), SUM(centrality) FROM memory_nodes WHERE {LIVE_NODES}",
            (level,),
        ).fetchone()
    )
    key = (str(store.path), level)
    if key in _TABLES and _TABLES[key].stamp == stamp:
        return _TABLES[key]
    found = store.conn.execute(
        f"SELECT id, title, statement, first_time, centrality, vector FROM memory_nodes WHERE {LIVE_NODES} ORDER BY id",
        (level,),
    ).fetchall()
    dims = {len(row[5]) // 4 for row in found if row[5]}
    vectors = None
    if len(dims) == 1:
        vectors = np.zeros((len(found), dims.pop()), dtype=np.float32)
        for i, row in enumerate(found):
            if row[5]:
                vectors[i] = np.frombuffer(row[5], dtype=np.float32)
    table = NodeTable(
        [r[0] for r in found],
        [r[1] for r in found],
        [r[3] for r in found],
        np.array([r[4] for r in found], dtype=np.float64),
        [words(f"{r[1]} {r[2]}") for r in found],
        vectors,
        stamp,
    )
    _TABLES[key] = table
    return table


def rank_nodes(
    table: NodeTable, query: str, query_vector, half_life_days: float, limit: int, match_only: bool = False
) -> list[tuple]:
    """(node index, score, components) of the best nodes for a question, best first; `match_only`
    ranks by meaning and words alone (the event level)."""
    import numpy as np

    terms = words(query)
    count = len(table.ids)
    if not count:
        return []
    frequency = {t: sum(t in ws for ws in table.words) for t in terms}
    idf = {t: np.log(1 + count / (1 + frequency[t])) for t in terms}
    total = sum(idf.values()) or 1.0
    lexical = np.array([sum(idf[t] for t in terms & ws) / total for ws in table.words])
    semantic = None
    if query_vector is not None and table.vectors is not None and table.vectors.shape[1] == len(query_vector):
        semantic = table.vectors @ query_vector
    pool = set(np.nonzero(lexical > 0)[0].tolist())
    if semantic is not None:
        pool |= set(np.argsort(-semantic)[:50].tolist())
    if not pool:
        return []
    newest = max((t for t in table.times if t is not None), default=None)
    peak = float(table.centrality.max()) or 1.0
    spread = min_max({i: float(semantic[i]) for i in pool}) if semantic is not None else {}
    if semantic is not None:
        weights = EVENT_HYBRID if match_only else HYBRID
    else:
        weights = EVENT_LEXICAL if match_only else LEXICAL
    ranked = []
    for i in pool:
        age = (newest - table.times[i]) / DAY if newest is not None and table.times[i] is not None else None
        parts = {
            "lexical": float(lexical[i]),
            "recency": 0.5 ** (age / half_life_days) if age is not None and half_life_days > 0 else 0.0,
            "centrality": float(table.centrality[i]) / peak,
        }
        if semantic is not None:
            parts.update(semantic=spread[i], cosine=float(semantic[i]))
        ranked.append((i, sum(w * parts[name] for name, w in weights.items()), parts))
    ranked.sort(key=lambda item: (-item[1], table.ids[item[0]]))
    return ranked[:limit]


def matching_nodes(
    table: NodeTable,
    query: str,
    query_vector,
    half_life_days: float,
    least: float,
    event_level: bool,
    limit: int | None,
) -> list[tuple]:
    """The best `limit` nodes (all when None) that match the question: an event at cosine `least` or
    more; an episode or concept sharing a word with it or that close in meaning. The gate runs before
    the cut: five recent, central nodes about something else used to fill the top five, and the one
    matching episode ranked sixth was dropped with them."""
    ranked = rank_nodes(table, query, query_vector, half_life_days, len(table.ids), event_level)
    if event_level:
        ranked = [node for node in ranked if node[2].get("cosine", 1.0) >= least]
    else:
        ranked = [node for node in ranked if node[2]["lexical"] > 0 or node[2].get("cosine", 0.0) >= least]
    return ranked if limit is None else ranked[:limit]


def event_min_cosine(semantic) -> float:
    """The event gate's cosine for the active embedding model (its own scale)."""
    name = semantic.embedder.identity.name if semantic is not None else ""
    return EVENT_MIN_COSINES.get(name, EVENT_MIN_COSINE)


@dataclass
class LevelRetriever:
    """A Retriever whose search answers at a memory level; `matched_nodes` holds the last query's nodes."""

    base: Retriever
    level: str
    half_life_days: float = 180.0
    stand_ins: bool = False  # drill down only through the distilled stand-ins (scripts/distill_gate.py)
    matched_nodes: list[dict[str, Any]] = field(default_factory=list)
    # The chunks --match all|phrase lets through for the current question (None: no word filter).
    allowed: set[int] | None = None

    @property
    def options(self):
        return self.base.options

    @property
    def semantic(self):
        return self.base.semantic

    @property
    def store(self) -> Store:
        return self.base.store

    @property
    def notices(self) -> list[str]:
        return self.base.notices

    def search(self, query: str, answering: bool = False) -> SearchResult:
        top_k = self.options.top_k
        # A deeper plain ranking than the answer shows: fusion ranks its chunks, and the drill-down
        # orders a node's chunks by it (the gate reads its coverage either way).
        wide = replace(self.options, top_k=max(top_k * 5, 50), max_chunks_per_source=max(top_k * 5, 50))
        plain = replace(self.base, options=wide).search(query)
        vector = self.semantic.query_vector(query) if self.semantic is not None else None
        table = node_table(self.store, self.level)
        # About as many events as the answer has chunks: a longer list lets the chunks of weakly
        # matching events displace plain hits (20 events instead of 10 cost 0.7 points on LoCoMo dev).
        limit = max(top_k, EVENTS_DRILLED) if self.level == "event" else MATCHED_NODES
        self.allowed = matching_chunks(self.store.conn, query, self.options)
        filtered = is_filtered(self.options) or self.allowed is not None
        # Filtered, the best nodes may have no evidence left: keep them all, then the best that do.
        ranked = matching_nodes(
            table, query, vector, self.half_life_days, event_min_cosine(self.semantic), self.level == "event",
            None if filtered else limit,
        )  # fmt: skip
        if filtered:
            ranked = self._with_evidence(ranked, table, limit)
        self.matched_nodes = _matched(self.store, table, ranked, self.options, self.allowed)
        if self.level == "event":
            chunks = self._fuse(plain, ranked, table)
        elif ranked:
            chunks = self._drill(query, vector, ranked, table, [hit.chunk_id for hit in plain.hits])
        else:  # no node matches: the evidence as plain retrieval ranks it
            chunks = [(hit.chunk_id, hit.score) for hit in plain.hits]
        known = {hit.chunk_id: hit for hit in plain.hits}
        if self.level != "event":  # a drill-down shows every chunk under its nodes (not capped)
            return replace(plain, hits=hits_for(self.store, [c for c, _ in chunks[:top_k]], dict(chunks), known))
        # The events' own chunks enter the fusion uncapped, so the cap applies to the fused ranking:
        # otherwise one commit's events filled the answer with its diff hunks.
        hits = hits_for(self.store, [c for c, _ in chunks], dict(chunks), known)
        kept = set(_capped([hit.chunk_id for hit in hits], hits, self.options.max_chunks_per_source))
        return replace(plain, hits=[hit for hit in hits if hit.chunk_id in kept][:top_k])

    def _with_evidence(self, ranked: list[tuple], table: NodeTable, limit: int) -> list[tuple]:
        """The best `limit` nodes that keep some evidence under the search's filters."""
        stand_ins = self.stand_ins and self.level != "event"  # events fuse through their own chunks
        kept = []
        for node in ranked:
            if len(kept) == limit:
                break
            if _ordered_chunks(self.store, [table.ids[node[0]]], stand_ins, self.options, self.allowed):
                kept.append(node)
        return kept

    def _fuse(self, plain: SearchResult, ranked: list[tuple], table: NodeTable) -> list[tuple[int, float]]:
        from_events = _ordered_chunks(
            self.store, [table.ids[i] for i, _, _ in ranked], options=self.options, allowed=self.allowed
        )
        plain_ids = _capped([h.chunk_id for h in plain.hits], plain.hits, self.options.max_chunks_per_source)
        # A longer plain tail would outvote every event-only chunk.
        plain_ids = plain_ids[: max(self.options.top_k * 2, PLAIN_FUSED)]
        fused = reciprocal_rank_fusion([plain_ids, from_events])
        return sorted(fused.items(), key=lambda item: (-item[1], item[0]))

    def _drill(self, query: str, vector, ranked: list[tuple], table: NodeTable, plain: list[int]):
        """Every chunk under the matched nodes (not capped), ranked by reciprocal rank fusion of its
        place in the plain ranking (or its own match to the question), and its node's place."""
        by_node = [
            _ordered_chunks(self.store, [table.ids[index]], self.stand_ins, self.options, self.allowed)
            for index, _, _ in ranked
        ]
        under = {chunk for chunks in by_node for chunk in chunks}
        relevance = _chunk_relevance(self.store, self.semantic, query, vector, sorted(under))
        position = {chunk: rank for rank, chunk in enumerate(plain)}
        by_match = sorted(under, key=lambda c: (position.get(c, len(plain)), -relevance.get(c, 0.0), c))
        node_order = [chunk for chunks in by_node for chunk in chunks]
        fused = reciprocal_rank_fusion([by_match, list(dict.fromkeys(node_order))])
        return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def _capped(chunk_ids: list[int], hits: list[Hit], per_source: int) -> list[int]:
    """The plain ranking with the usual per-source cap (the wide pass ran without it)."""
    source = {hit.chunk_id: capped_as(hit) for hit in hits}
    seen: dict[str, int] = {}
    kept = []
    for chunk in chunk_ids:
        seen[source[chunk]] = seen.get(source[chunk], 0) + 1
        if seen[source[chunk]] <= per_source:
            kept.append(chunk)
    return kept


def _ordered_chunks(
    store: Store, node_ids: list[str], stand_ins: bool = False, options=None, allowed: set[int] | None = None
) -> list[int]:
    """The nodes' supporting chunks (or only their distilled stand-ins) that pass the search options'
    filters and are among `allowed` (when given): node by node, each node's best-supported first
    (drill-down order)."""
    order: dict[int, None] = {}
    roles = "role = 'distill'" if stand_ins else "role != 'distill'"
    for node in node_ids:
        for (chunk,) in store.conn.execute(
            f"SELECT chunk_id FROM memory_evidence WHERE node_id = ? AND {roles}"
            " GROUP BY chunk_id ORDER BY MAX(COALESCE(score, 0)) DESC, chunk_id",
            (node,),
        ):
            if allowed is None or chunk in allowed:
                order.setdefault(chunk, None)
    if options is None or not is_filtered(options):
        return list(order)
    passing = passing_chunks(store.conn, list(order), options)
    return [chunk for chunk in order if chunk in passing]


def _chunk_relevance(store: Store, semantic, query: str, vector, chunk_ids: list[int]) -> dict[int, float]:
    if semantic is not None and vector is not None:
        return min_max(semantic.scores_for(vector, chunk_ids))
    terms = words(query)
    found = {}
    for part in in_batches(chunk_ids):
        for chunk, text in store.conn.execute(
            f"SELECT id, text FROM chunks WHERE id IN ({','.join('?' * len(part))})", part
        ):
            found[chunk] = len(terms & words(text)) / len(terms) if terms else 0.0
    return found


def _matched(
    store: Store, table: NodeTable, ranked: list[tuple], options, allowed: set[int] | None = None
) -> list[dict[str, Any]]:
    from crossmodalrag.memory.nodes import evidence_of

    ids = [table.ids[i] for i, _, _ in ranked]
    evidence = evidence_of(store.conn, ids)
    cited = {e["chunk_id"] for found in evidence.values() for e in found}
    passing = passing_chunks(store.conn, sorted(cited if allowed is None else cited & allowed), options)
    return [
        {
            "id": table.ids[i],
            "title": table.titles[i],
            "first_time": iso_time(table.times[i]),
            "score": round(score, 6),
            "components": {k: round(v, 6) for k, v in parts.items()},
            "evidence": [e for e in evidence[table.ids[i]] if e["role"] != "distill" and e["chunk_id"] in passing][:5],
        }
        for i, score, parts in ranked
    ]


def hits_for(store: Store, chunk_ids: list[int], scores: dict[int, float], known: dict[int, Hit]) -> list[Hit]:
    """Hits for chunk ids in the given order: the plain search's own where it found them, else built here."""
    missing = [c for c in chunk_ids if c not in known]
    built: dict[int, Hit] = {}
    if missing:
        for row in store.conn.execute(
            "SELECT c.id, c.source_id, c.text, c.locator, c.modality, c.metadata, s.uri, s.source_type, s.title,"
            f" {CHUNK_TIME} AS timestamp, c.char_start, c.char_end, c.byte_start, c.byte_end FROM chunks c"
            f" JOIN sources s ON s.id = c.source_id WHERE c.id IN ({','.join('?' * len(missing))})",
            missing,
        ):
            page = json.loads(row["metadata"] or "{}").get("page")
            built[row["id"]] = Hit(
                row["id"], row["uri"], row["source_type"], row["modality"], row["title"], row["locator"],
                row["text"], row["timestamp"], page=page, source_id=row["source_id"], char_start=row["char_start"],
                char_end=row["char_end"], byte_start=row["byte_start"], byte_end=row["byte_end"],
            )  # fmt: skip
    hits = []
    for chunk in chunk_ids:
        hit = known.get(chunk) or built.get(chunk)
        if hit is not None:
            hits.append(replace(hit, score=scores[chunk], components={**hit.components, "level": scores[chunk]}))
    return hits


def at_level(retriever: Retriever, level: str, settings) -> Retriever | LevelRetriever:
    """The retriever for a level: the plain one for "evidence", else a LevelRetriever around it.
    Raises MemoryNotBuilt when the level has no nodes yet (with what to run)."""
    if level in (None, "evidence"):
        return retriever
    if level not in NODE_LEVELS:
        raise ValueError(f"unknown level {level!r}")
    from crossmodalrag.versioning.asof import PastRetriever

    if isinstance(retriever, PastRetriever):
        raise CMRAGError(
            f"--as-of cannot be combined with --level {level}: memory nodes are built from the memory as it is now",
            "drop --level to answer from the memory as of then, or drop --as-of to ask at that level",
        )
    require_level(retriever.store, level)
    _note_unextracted(retriever, level)
    return LevelRetriever(retriever, level, settings.recency_half_life_days)


def _note_unextracted(retriever: Retriever, level: str) -> None:
    """Say how much of memory a level cannot see yet: with most notes waiting for a model, an answer
    at --level episode came from the two commits that had events, and nothing said so."""
    from crossmodalrag.memory.stats import events_waiting, without_events

    conn = retriever.store.conn
    missing, waiting = without_events(conn), events_waiting(conn)
    if missing:
        total = conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        retriever.notices.append(
            f"{missing} of {total} sources have no events yet, so --level {level} cannot see them"
            " (`mem build-memory` draws events, with a language model but for git commits: `mem doctor` says if"
            " one is set up; `mem memory-stats` names the sources)"
        )
    if waiting:
        from crossmodalrag.wording import counted

        retriever.notices.append(
            f"{counted(waiting, 'event')} of sources edited since they were drawn"
            f" {'waits' if waiting == 1 else 'wait'} for a model to read them again,"
            f" so --level {level} cannot see {'it' if waiting == 1 else 'them'} (run `mem build-memory` with a model)"
        )


def require_level(store: Store, level: str) -> None:
    from crossmodalrag.memory_views import MemoryNotBuilt

    if store.conn.execute("SELECT 1 FROM memory_nodes WHERE level = ? LIMIT 1", (level,)).fetchone() is None:
        hint = "run `mem build-memory` (events need a language model, concepts embeddings); `mem memory-stats` shows it"
        if level == "concept":  # events and vectors may be there: the reason is then too few similar events
            from crossmodalrag.memory.concepts import why_no_concepts

            hint = why_no_concepts(store.conn)
        raise MemoryNotBuilt(f"no {level} nodes yet: the memory hierarchy is not built to that level", hint)


def with_nodes(answer, retriever):
    """The answer with the level and matched nodes of a level retriever (unchanged for plain retrieval)."""
    if isinstance(retriever, LevelRetriever):
        answer.level, answer.matched_nodes = retriever.level, retriever.matched_nodes
    return answer


def after_answer(store: Store, answer, retriever, args, settings) -> None:
    """Attach the matched nodes of a level answer, and log usage if this call opted in (--track, --accept)."""
    from crossmodalrag.memory.usage import is_enabled, record_answer

    with_nodes(answer, retriever)
    flags = {k: bool(getattr(args, k, False)) for k in ("track", "no_track", "accept")}
    if not is_enabled(settings, **flags):
        return
    try:
        record_answer(store, answer, "accepted" if flags["accept"] else "retrieved")
    except sqlite3.OperationalError as error:
        if not is_read_only(error):
            raise
        # A memory on read-only media still answers: the opt-in log is what waits.
        answer.notices.append("usage not logged: the database is read-only")
