"""`mem memory-stats`: what the hierarchy holds, whether it is sound, and what is left to build;
and the cascade `mem forget` runs so that nothing derived from a forgotten source survives it."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from crossmodalrag.memory.nodes import LEVELS, delete_nodes
from crossmodalrag.store import Store
from crossmodalrag.store.params import in_batches

if TYPE_CHECKING:
    from crossmodalrag.versioning import Erasure


def memory_stats(store: Store) -> dict[str, Any]:
    """Counts per level and edge kind, integrity checks, pending and failed sources."""
    conn = store.conn
    levels = {level: 0 for level in LEVELS}
    levels.update(dict(conn.execute("SELECT level, COUNT(*) FROM memory_nodes GROUP BY level").fetchall()))
    edges = dict(conn.execute("SELECT kind, COUNT(*) FROM memory_edges GROUP BY kind ORDER BY kind").fetchall())
    failed = conn.execute(
        "SELECT x.source_id, s.uri, x.reason FROM memory_extractions x JOIN sources s ON s.id = x.source_id"
        " WHERE x.status = 'failed' ORDER BY s.uri"
    ).fetchall()
    scalar = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    not_done = not_extracted(conn)
    return {
        "nodes": levels,
        "edges": edges,
        "evidence_links": scalar("SELECT COUNT(*) FROM memory_evidence"),
        "integrity": {
            "unsupported_events": scalar(
                f"SELECT COUNT(*) FROM memory_nodes WHERE level='event' AND supported=0 AND NOT {WAITING_EVENT}"
            ),
            "events_waiting_for_model": events_waiting(conn),
            "nodes_without_evidence": scalar(
                "SELECT COUNT(*) FROM memory_nodes n WHERE NOT EXISTS"
                " (SELECT 1 FROM memory_evidence e WHERE e.node_id = n.id)"
            ),
            "events_with_source_gone": events_with_source_gone(conn),
        },
        "sources": {
            "total": scalar("SELECT COUNT(*) FROM sources"),
            "extracted": scalar(
                "SELECT COUNT(*) FROM memory_extractions x JOIN sources s ON s.id = x.source_id"
                " WHERE x.status = 'done' AND x.source_fingerprint = s.fingerprint"
            ),
            # extracted + not_extracted + failed = total: those build-memory has yet to try (they wait
            # for a model, or a later run) apart from those it tried and failed on
            "not_extracted": not_done - len(failed),
            "failed": [{"source_id": r[0], "uri": r[1], "reason": r[2]} for r in failed],
            "not_extracted_sources": not_extracted_sources(conn),
            "pending": not_done,  # the old key (not_extracted + failed), kept for scripts that read it
        },
        "drift_concepts": scalar(
            "SELECT COUNT(*) FROM memory_nodes WHERE level='concept' AND json_type(metadata, '$.drift') IS NOT NULL"
        ),
        "distilled_nodes": scalar("SELECT COUNT(DISTINCT node_id) FROM memory_evidence WHERE role = 'distill'"),
        "recall_cards": scalar("SELECT COUNT(*) FROM memory_cards"),
        "usage_events": scalar("SELECT COUNT(*) FROM memory_usage"),
    }


WAITING_EVENT = "json_type(metadata, '$.waiting') IS NOT NULL"  # events.WAITING: set by a recheck without a model


def events_waiting(conn) -> int:
    """Events of sources edited while no model was configured that only a model can tell are still
    said (the chunk they rested on changed): out of retrieval until one reads the source again."""
    return conn.execute(f"SELECT COUNT(*) FROM memory_nodes WHERE level='event' AND {WAITING_EVENT}").fetchone()[0]


def without_events(conn) -> int:
    """Sources whose current text no extraction has read, even in part: a source edited while no model
    was configured keeps the events its new text still says (a recheck), so it is not one of them."""
    return conn.execute(
        "SELECT COUNT(*) FROM sources s WHERE NOT EXISTS (SELECT 1 FROM memory_extractions x"
        " WHERE x.source_id = s.id AND x.status IN ('done', 'rechecked') AND x.source_fingerprint = s.fingerprint)"
    ).fetchone()[0]


def events_with_source_gone(conn: sqlite3.Connection) -> int:
    """Events whose source a sync saw deleted: kept until `mem build-memory` reports and removes them."""
    return conn.execute("SELECT COUNT(*) FROM memory_nodes WHERE level='event' AND source_id IS NULL").fetchone()[0]


def forget_derived(conn: sqlite3.Connection, erasure: Erasure | None = None) -> tuple[int, int]:
    """Inside `mem forget`'s transaction, after its sources are deleted: remove their events and every
    episode or concept built on them (their titles and summaries came from forgotten text; the next
    `mem build-memory` re-derives them from what remains), and with `erasure` their hashes in the log.
    Returns (how many nodes went, how many remaining events lost their episode or concept with them:
    until that build they are in no timeline)."""
    gone = [row[0] for row in conn.execute("SELECT id FROM memory_nodes WHERE level='event' AND source_id IS NULL")]
    if not gone:
        return 0, 0
    parents: set[str] = set()
    for part in in_batches(gone):
        parents |= {
            row[0]
            for row in conn.execute(
                f"SELECT dst FROM memory_edges WHERE src IN ({','.join('?' * len(part))})"
                " AND kind IN ('in_episode', 'in_concept')",
                part,
            )
        }
    stranded = _members_of(conn, parents) - set(gone)
    deleted = delete_nodes(conn, gone) + delete_nodes(conn, parents)
    if erasure is not None:
        erasure.erase("memory_node", gone + sorted(parents))
    return deleted, len(stranded)


def _members_of(conn: sqlite3.Connection, parents: set[str]) -> set[str]:
    """The events that are members of any of these episodes or concepts."""
    members: set[str] = set()
    for part in in_batches(sorted(parents)):
        members |= {
            row[0]
            for row in conn.execute(
                f"SELECT src FROM memory_edges WHERE dst IN ({','.join('?' * len(part))})"
                " AND kind IN ('in_episode', 'in_concept')",
                part,
            )
        }
    return members


def not_extracted_sources(conn) -> list[dict[str, Any]]:
    """The sources counted as not extracted yet (failed ones apart), each with why: what `mem ask
    --level`'s note sends a user here to find out. Newest first, the order extraction reads them in
    and `mem build-memory` names them (by uri here, the two named different first five)."""
    found = conn.execute(
        "SELECT s.id, s.uri, x.status, x.reason FROM sources s LEFT JOIN memory_extractions x ON x.source_id = s.id"
        " WHERE x.source_id IS NULL OR (x.status <> 'failed'"
        " AND (x.status <> 'done' OR x.source_fingerprint <> s.fingerprint))"
        " ORDER BY s.timestamp IS NULL, s.timestamp DESC, s.id DESC"
    ).fetchall()
    return [{"source_id": r[0], "uri": r[1], "reason": _why_not_extracted(r[2], r[3])} for r in found]


NOT_DRAWN = "no events drawn from it yet: `mem build-memory` draws them, with a language model but for git commits"


def _why_not_extracted(status: str | None, reason: str | None) -> str:
    if status is None:  # never read, or skipped for want of a model: the build records neither
        return NOT_DRAWN
    if status == "rechecked" and reason:
        return reason
    return "changed since its events were drawn"


def not_extracted(conn) -> int:
    """Sources without a current extraction into events, failed ones included: no level sees them."""
    return conn.execute(
        "SELECT COUNT(*) FROM sources s WHERE NOT EXISTS (SELECT 1 FROM memory_extractions x"
        " WHERE x.source_id = s.id AND x.status = 'done' AND x.source_fingerprint = s.fingerprint)"
    ).fetchone()[0]
