"""Memory nodes in the store: writing them with their evidence links, reading them back, integrity.

Every level (events, episodes, concepts) is a row of `memory_nodes` with a stable text id; its
support is a set of `memory_evidence` rows naming exact chunk ids (a chunk that goes takes its
rows with it, through ON DELETE CASCADE), so a node can always be drilled down to cited L0 text.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from crossmodalrag import versioning
from crossmodalrag.retrieval.filters import CHUNK_TIME
from crossmodalrag.store.params import in_batches
from crossmodalrag.types import excerpt, flat_body, iso_time

LEVELS = ("event", "episode", "concept")
PREFIX = {"event": "ev_", "episode": "ep_", "concept": "co_"}


def stable_id(level: str, *parts: str) -> str:
    """A node id that depends only on what identifies the node (never on row order or time)."""
    digest = hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    return PREFIX[level] + digest[:12]


def content_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Link:
    """One supporting chunk of a node: why it is linked (its role) and how well it matches."""

    chunk_id: int
    role: str  # cited | nearest | subject | member | distill
    score: float | None = None


@dataclass
class Node:
    id: str
    level: str
    title: str
    statement: str = ""
    kind: str = ""
    project: str = ""
    people: list[str] = field(default_factory=list)
    first_time: float | None = None
    last_time: float | None = None
    confidence: float = 1.0
    supported: bool = True
    source_id: int | None = None
    source_uri: str = ""
    centrality: float = 0.0
    vector: bytes | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)

    def fingerprint(self) -> str:
        """What a cached recall card and a rebuild compare: the node's content and support."""
        return content_hash(
            self.title,
            self.statement,
            self.kind,
            self.project,
            self.supported,
            sorted({(link.chunk_id, link.role) for link in self.links}),
        )


def write_nodes(conn: sqlite3.Connection, nodes: Iterable[Node]) -> int:
    """Insert or update nodes and replace their evidence links; returns how many changed.
    An unchanged node (same fingerprint, times and vector) is left alone, so a rebuild of the same
    memory writes nothing. A new vector is compared apart from the fingerprint: an episode built before
    its events had vectors must get its centroid once they do, but a recall card (cached on the
    fingerprint) stays valid when only the embedding changes. A node made without one (no embedding
    model this run) does not count as changed for that alone."""
    now, changed = time.time(), 0
    for node in nodes:
        digest = node.fingerprint()
        row = conn.execute("SELECT fingerprint, vector FROM memory_nodes WHERE id = ?", (node.id,)).fetchone()
        if row and row[0] == digest and node.vector in (None, row[1]) and _same_times(conn, node):
            continue
        changed += 1
        values = (
            node.level, node.kind, node.title, node.statement, node.project, json.dumps(node.people),
            node.first_time, node.last_time, node.confidence, int(node.supported), node.source_id, node.source_uri,
            digest, node.vector, json.dumps(node.metadata, ensure_ascii=False), now,
        )  # fmt: skip
        if row:
            conn.execute(
                "UPDATE memory_nodes SET level=?, kind=?, title=?, statement=?, project=?, people=?, first_time=?,"
                " last_time=?, confidence=?, supported=?, source_id=?, source_uri=?, fingerprint=?, vector=?,"
                " metadata=?, updated_at=? WHERE id=?",
                (*values, node.id),
            )
        else:
            conn.execute(
                "INSERT INTO memory_nodes (level, kind, title, statement, project, people, first_time, last_time,"
                " confidence, supported, source_id, source_uri, fingerprint, vector, metadata, updated_at, id,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, node.id, now),
            )
        replace_links(conn, node.id, node.links)
        versioning.changed(conn, "memory_node", node.id)
    return changed


def _same_times(conn: sqlite3.Connection, node: Node) -> bool:
    row = conn.execute("SELECT first_time, last_time FROM memory_nodes WHERE id = ?", (node.id,)).fetchone()
    return row is not None and (row[0], row[1]) == (node.first_time, node.last_time)


def replace_links(conn: sqlite3.Connection, node_id: str, links: list[Link], roles: tuple[str, ...] = ()) -> None:
    """Set a node's evidence rows (only those of `roles`, when given); chunks that are gone are skipped."""
    if roles:
        marks = ",".join("?" * len(roles))
        conn.execute(f"DELETE FROM memory_evidence WHERE node_id = ? AND role IN ({marks})", (node_id, *roles))
    else:
        conn.execute("DELETE FROM memory_evidence WHERE node_id = ?", (node_id,))
    conn.executemany(
        "INSERT OR IGNORE INTO memory_evidence (node_id, chunk_id, role, score)"
        " SELECT ?, id, ?, ? FROM chunks WHERE id = ?",
        [(node_id, link.role, link.score, link.chunk_id) for link in links],
    )


def delete_nodes(conn: sqlite3.Connection, ids: Iterable[str]) -> int:
    ids = list(ids)
    for part in in_batches(ids):
        marks = ",".join("?" * len(part))
        conn.execute(f"DELETE FROM memory_nodes WHERE id IN ({marks})", part)
        conn.execute(f"DELETE FROM memory_usage WHERE target_id IN ({marks})", part)  # no trace of what went
    for node_id in ids:
        versioning.changed(conn, "memory_node", node_id)
    return len(ids)


def node_ids(conn: sqlite3.Connection, level: str) -> set[str]:
    return {row[0] for row in conn.execute("SELECT id FROM memory_nodes WHERE level = ?", (level,))}


def evidence_of(conn: sqlite3.Connection, node_ids_: list[str], roles: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """node id -> its supporting chunks with their L0 locators (best first), for JSON and drill-down."""
    if not node_ids_:
        return {}
    marks = ",".join("?" * len(node_ids_))
    role_clause = f" AND e.role IN ({','.join('?' * len(roles))})" if roles else ""
    rows = conn.execute(
        "SELECT e.node_id, e.chunk_id, e.role, e.score, c.locator, c.text, c.char_start, c.char_end, s.id AS source_id,"
        f" s.uri, s.title, s.source_type, {CHUNK_TIME} AS timestamp, json_extract(c.metadata, '$.page') AS page,"
        " CASE WHEN n.level = 'event' THEN n.statement END AS event"
        " FROM memory_evidence e JOIN chunks c ON c.id = e.chunk_id JOIN sources s ON s.id = c.source_id"
        " JOIN memory_nodes n ON n.id = e.node_id"
        f" WHERE e.node_id IN ({marks}){role_clause} ORDER BY e.node_id, e.score IS NULL, e.score DESC, e.chunk_id",
        (*node_ids_, *roles),
    )
    found: dict[str, list[dict]] = {node: [] for node in node_ids_}
    for row in rows:
        found[row["node_id"]].append(
            {
                "chunk_id": row["chunk_id"],
                "role": row["role"],
                "score": None if row["score"] is None else round(row["score"], 4),
                "source_id": row["source_id"],
                "source_uri": row["uri"],
                "source_type": row["source_type"],
                "title": row["title"],
                "locator": row["locator"],
                **({"page": row["page"]} if row["page"] is not None else {}),
                "char_start": row["char_start"],
                "char_end": row["char_end"],
                "timestamp": iso_time(row["timestamp"]),
                "excerpt": excerpt(row["text"], 200, _focus(row["text"], row["event"])),
            }
        )
    return found


def _focus(text: str, event: str | None) -> int:
    """Where an event's excerpt of a chunk starts: at the sentence saying it (a daily note is one chunk
    of many events, and its first 200 characters hold one or two of them), else at the top."""
    from crossmodalrag.memory.provenance import supporting_sentence

    said = supporting_sentence(event, text.split("\n", 1)[1] if "\n" in text else text) if event else ""
    return max(flat_body(text).find(said), 0) if said else 0


def node_dict(row: sqlite3.Row, evidence: list[dict] | None = None) -> dict[str, Any]:
    """The JSON of one node row, as every command, the API and the MCP server show it."""
    out = {
        "id": row["id"],
        "level": row["level"],
        "title": row["title"],
        "statement": row["statement"],
        "type": row["kind"] or None,
        "project": row["project"],
        "people": json.loads(row["people"]),
        "first_time": iso_time(row["first_time"]),
        "last_time": iso_time(row["last_time"]),
        "confidence": round(row["confidence"], 4),
        "supported": bool(row["supported"]),
        "source_uri": row["source_uri"] or None,
        "centrality": round(row["centrality"], 6),
    }
    if evidence is not None:
        out["evidence"] = evidence
    return out


def rows(conn: sqlite3.Connection, where: str = "1", params: tuple = (), order: str = "id", limit: int = -1):
    return conn.execute(
        "SELECT id, level, kind, title, statement, project, people, first_time, last_time, confidence, supported,"
        f" source_id, source_uri, fingerprint, centrality, metadata FROM memory_nodes WHERE {where}"
        f" ORDER BY {order} LIMIT ?",
        (*params, limit),
    ).fetchall()


def with_evidence(conn: sqlite3.Connection, found: list[sqlite3.Row], roles: tuple[str, ...] = ()) -> list[dict]:
    evidence = evidence_of(conn, [row["id"] for row in found], roles)
    return [node_dict(row, evidence[row["id"]]) for row in found]
