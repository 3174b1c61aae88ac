"""The filters a search narrows its evidence by (modality, source type and id, dates), as SQL over
chunks `c` joined to sources `s`: for the lexical and vector candidates, and for the evidence a memory
level drills down to."""

from __future__ import annotations

import heapq
import sqlite3
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from crossmodalrag.store.params import in_batches

if TYPE_CHECKING:
    from crossmodalrag.retrieval.search import SearchOptions
    from crossmodalrag.retrieval.semantic import SemanticIndex

EXACT_FILTERED = 20_000  # filtered chunks scored exactly by vector rather than picked from the global nearest
# When a chunk's words were said or written: its own time (a chat turn's), else its source's date.
CHUNK_TIME = "COALESCE(c.said_at, s.timestamp)"
# The newest such time in memory: the reference recency and relative dates count from.
NEWEST_TIME = (
    "(SELECT MAX(t) FROM (SELECT MAX(timestamp) AS t FROM sources"
    " UNION ALL SELECT MAX(said_at) FROM chunks WHERE said_at IS NOT NULL) AS newest_times)"
)


def timeline_now(conn: sqlite3.Connection) -> datetime:
    """'Now' on the memory's own timeline: its newest dated source or turn (the clock for an empty memory).
    "Last week" asked of a memory whose newest session is from May 2023 is the week before that."""
    newest = conn.execute(f"SELECT {NEWEST_TIME}").fetchone()[0]
    return datetime.fromtimestamp(newest, timezone.utc) if newest else datetime.now(timezone.utc)


def is_filtered(options: SearchOptions) -> bool:
    """Whether the options narrow the evidence (modality, source type or id, dates)."""
    return (
        bool(options.modalities or options.source_types)
        or options.source_ids is not None
        or options.after is not None
        or options.before is not None
    )


def filter_clause(options: SearchOptions) -> tuple[str, list]:
    """SQL over chunks `c` joined to sources `s` for the modality, source type and date filters."""
    clauses, params = ["1 = 1"], []
    for column, values in (("c.modality", options.modalities), ("s.source_type", options.source_types)):
        if values:
            clauses.append(f"{column} IN ({','.join('?' * len(values))})")
            params.extend(values)
    if options.source_ids is not None:
        clauses.append(f"s.id IN ({','.join('?' * len(options.source_ids)) or 'NULL'})")
        params.extend(options.source_ids)
    for bound, operator in ((options.after, ">="), (options.before, "<")):
        if bound is not None:
            clauses.append(_dated_clause(operator))
            params.extend([bound, bound, bound])
    return " AND ".join(clauses), params


def _dated_clause(operator: str) -> str:
    """A chunk's time compared with a bound. The first part is implied by the second and is there for
    the indexes: the sources dated in the window or holding a turn said in it (sources_timestamp,
    chunks_said_at) instead of every chunk's time (10k sources, 50k chunks: ~3 ms instead of ~13 ms)."""
    return (
        f"(s.timestamp {operator} ? OR s.id IN (SELECT source_id FROM chunks WHERE said_at {operator} ?))"
        f" AND {CHUNK_TIME} {operator} ?"
    )


def nearest_passing(
    conn: sqlite3.Connection, semantic: "SemanticIndex", vector, limit: int, options: SearchOptions
) -> dict[int, float]:
    """The nearest chunks that pass the filters, best first. A narrow filter (one week of a large
    memory) may hold none of the global nearest: up to EXACT_FILTERED chunks are scored exactly."""
    if not is_filtered(options):
        return semantic.nearest(vector, limit)
    where, params = filter_clause(options)
    ids = [
        row[0]
        for row in conn.execute(
            f"SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id WHERE {where} LIMIT ?",
            (*params, EXACT_FILTERED + 1),
        )
    ]
    if len(ids) <= EXACT_FILTERED:
        scored = semantic.scores_for(vector, ids)
        return dict(heapq.nlargest(limit, scored.items(), key=lambda item: (item[1], -item[0])))
    return _passing_filters(conn, semantic.nearest(vector, limit * 8), options)


def _passing_filters(conn: sqlite3.Connection, scored: dict[int, float], options: SearchOptions) -> dict[int, float]:
    """Keep (in order) the chunks that pass the filters (modality, source type, dates)."""
    if not is_filtered(options) or not scored:
        return scored
    kept = passing_chunks(conn, list(scored), options)
    return {chunk: score for chunk, score in scored.items() if chunk in kept}


def passing_chunks(conn: sqlite3.Connection, chunk_ids: list[int], options: SearchOptions) -> set[int]:
    """The chunks among `chunk_ids` that pass the options' filters (modality, source type and id,
    dates): a search's own candidates, and the evidence a memory level drills down to."""
    if not is_filtered(options):
        return set(chunk_ids)
    where, params = filter_clause(options)
    kept: set[int] = set()
    for part in in_batches(chunk_ids):
        kept.update(
            row[0]
            for row in conn.execute(
                "SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id"
                f" WHERE c.id IN ({','.join('?' * len(part))}) AND {where}",
                (*part, *params),
            )
        )
    return kept
