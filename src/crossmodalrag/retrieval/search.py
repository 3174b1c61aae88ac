"""Lexical retrieval: FTS5 BM25 candidates, re-scored with recency and a title boost.

Score of a hit = (1 - w_recency - w_title) * lexical + w_recency * recency + w_title * title, where
  lexical = BM25 / best BM25 among the candidates (so the best lexical match is 1.0),
  recency = 0.5 ** (age / half-life), age measured from the newest source in memory (so a
            result does not drift with the wall clock, and an old archive is not all zeros),
  title   = fraction of the query's terms (idf-weighted) found in the source title.
`coverage` measures, independently of the ranking, how much of the query the evidence contains:
the idf-weighted fraction of query terms present in the best-covering returned hit. It is what
the abstention gate reads, because BM25 values are not comparable across queries or corpora.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field

from crossmodalrag.index import fts
from crossmodalrag.retrieval.diversify import cap_per_source, drop_near_duplicates
from crossmodalrag.store import Store
from crossmodalrag.types import Hit

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class SearchOptions:
    top_k: int = 5
    title_boost_weight: float = 0.05
    recency_weight: float = 0.10
    recency_half_life_days: float = 180.0
    max_chunks_per_source: int = 2
    dedupe_threshold: float = 0.95
    # The title is already in every chunk's breadcrumb line, so BM25 ignores the title column by
    # default: the title boost alone (0 disables it) decides how much a title match counts extra.
    title_column_weight: float = 0.0
    min_candidates: int = 50

    def weights(self) -> dict[str, float]:
        """The blend of the normalized components; the lexical share is what the others leave."""
        lexical = max(0.0, 1.0 - self.title_boost_weight - self.recency_weight)
        return {"lexical": lexical, "recency": self.recency_weight, "title": self.title_boost_weight}


@dataclass
class SearchResult:
    hits: list[Hit]
    terms: list[str]
    coverage: float = 0.0
    term_weights: dict[str, float] = field(default_factory=dict)


def search(store: Store, query: str, options: SearchOptions) -> SearchResult:
    """Rank evidence for a query. Never raises on odd query text: it cannot reach FTS syntax."""
    terms = fts.query_terms(query)
    if not terms:
        return SearchResult([], [])
    conn = store.conn
    stems = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])]
    weights = _term_weights(conn, stems)
    candidates = _candidates(conn, fts.match_expression(terms), options)
    if not candidates:
        return SearchResult([], [t.word for t in terms], 0.0, weights)
    hits = _score(conn, candidates, weights, options)
    hits = cap_per_source(hits, lambda h: h.source_uri, options.max_chunks_per_source)
    hits = drop_near_duplicates(hits, lambda h: h.text.split("\n", 1)[-1], options.dedupe_threshold, options.top_k)
    coverage = max(_coverages(conn, [h.text for h in hits], weights), default=0.0)
    return SearchResult(hits, [t.word for t in terms], coverage, weights)


def _term_weights(conn: sqlite3.Connection, stems: list[list[str]]) -> dict[str, float]:
    """idf per query token; a token absent from memory gets the highest idf (it is unmatched)."""
    flat = sorted({s for group in stems for s in group})
    if not flat:
        return {}
    total, frequencies = fts.document_frequencies(conn, flat)
    return {s: math.log(1 + (total - frequencies.get(s, 0) + 0.5) / (frequencies.get(s, 0) + 0.5)) for s in flat}


def _candidates(conn: sqlite3.Connection, expression: str, options: SearchOptions) -> list[tuple[int, float]]:
    limit = max(options.min_candidates, options.top_k * 10)
    rows = conn.execute(
        "SELECT rowid, -bm25(chunks_fts, ?, 1.0) FROM chunks_fts WHERE chunks_fts MATCH ? "
        "ORDER BY bm25(chunks_fts, ?, 1.0) LIMIT ?",
        (options.title_column_weight, expression, options.title_column_weight, limit),
    ).fetchall()
    return [(rowid, score) for rowid, score in rows]


def _score(
    conn: sqlite3.Connection, candidates: list[tuple[int, float]], weights: dict[str, float], options: SearchOptions
) -> list[Hit]:
    ids = [rowid for rowid, _ in candidates]
    rows = {
        row["id"]: row
        for row in conn.execute(
            "SELECT c.id, c.text, c.locator, c.modality, s.uri, s.source_type, s.title, s.timestamp "
            f"FROM chunks c JOIN sources s ON s.id = c.source_id WHERE c.id IN ({','.join('?' * len(ids))})",
            ids,
        )
    }
    newest = conn.execute("SELECT MAX(timestamp) FROM sources").fetchone()[0]
    best = max(score for _, score in candidates) or 1.0
    titles = sorted({rows[i]["title"] for i in ids if i in rows})
    title_match = dict(zip(titles, _coverages(conn, titles, weights), strict=True))
    weights_of = options.weights()
    hits = []
    for rowid, bm25 in candidates:
        row = rows.get(rowid)
        if row is None:  # removed by a concurrent writer between the two reads
            continue
        components = {
            "bm25": bm25,
            "lexical": bm25 / best,
            "recency": _recency(row["timestamp"], newest, options.recency_half_life_days),
            "title": title_match.get(row["title"], 0.0),
        }
        score = sum(weight * components[name] for name, weight in weights_of.items())
        hits.append(
            Hit(
                rowid,
                row["uri"],
                row["source_type"],
                row["modality"],
                row["title"],
                row["locator"],
                row["text"],
                row["timestamp"],
                score,
                components,
            )
        )
    hits.sort(key=lambda h: (-h.score, h.chunk_id))
    return hits


def _recency(timestamp: float | None, newest: float | None, half_life_days: float) -> float:
    if timestamp is None or newest is None or half_life_days <= 0:
        return 0.0
    age_days = max(0.0, newest - timestamp) / SECONDS_PER_DAY
    return 0.5 ** (age_days / half_life_days)


def _coverages(conn: sqlite3.Connection, texts: list[str], weights: dict[str, float]) -> list[float]:
    """Idf-weighted fraction of the query's tokens that each text contains."""
    total = sum(weights.values())
    if not texts or total <= 0:
        return [0.0 for _ in texts]
    token_sets = fts.analyze(conn, [fts.index_body(t) for t in texts])
    return [sum(w for token, w in weights.items() if token in tokens) / total for tokens in token_sets]
