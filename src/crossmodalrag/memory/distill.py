"""Distillation: per episode and concept, the few real L0 chunks that stand for it (never a paraphrase).

The stand-ins are the node's chunks that the most member events rest on (ties: the best support
score), sized to CMRAG_DISTILL_COMPRESSION_RATIO of its chunks. `scripts/distill_gate.py` measures
whether retrieval through them loses recall; `mem ask` is not changed by them.
"""

from __future__ import annotations

import math
from typing import Any

from crossmodalrag.memory.nodes import Link, replace_links, rows, with_evidence
from crossmodalrag.store import Store


def stand_ins(chunk_support: dict[int, tuple[int, float]], ratio: float) -> list[tuple[int, float]]:
    """(chunk, share of member events citing it), the top `ratio` of the chunks (at least one)."""
    if not chunk_support:
        return []
    keep = max(1, math.ceil(ratio * len(chunk_support)))
    ranked = sorted(chunk_support.items(), key=lambda item: (-item[1][0], -item[1][1], item[0]))
    most = ranked[0][1][0]
    return [(chunk, count / most) for chunk, (count, _) in ranked[:keep]]


def build_distill(store: Store, ratio: float) -> dict[str, Any]:
    conn = store.conn
    support: dict[str, dict[int, tuple[int, float]]] = {}
    for parent, chunk, count, score in conn.execute(
        "SELECT m.dst, e.chunk_id, COUNT(DISTINCT m.src), MAX(COALESCE(e.score, 0)) FROM memory_edges m"
        " JOIN memory_evidence e ON e.node_id = m.src AND e.role != 'distill'"
        " WHERE m.kind IN ('in_episode', 'in_concept') GROUP BY m.dst, e.chunk_id"
    ):
        support.setdefault(parent, {})[chunk] = (count, score)
    with store.transaction():
        conn.execute("DELETE FROM memory_evidence WHERE role = 'distill'")
        for parent, chunks in support.items():
            links = [Link(chunk, "distill", score) for chunk, score in stand_ins(chunks, ratio)]
            replace_links(conn, parent, links, ("distill",))
    kept = conn.execute("SELECT COUNT(*) FROM memory_evidence WHERE role = 'distill'").fetchone()[0]
    total = sum(len(c) for c in support.values())
    return {"nodes": len(support), "chunks_kept": kept, "chunks_total": total}


def distill_view(store: Store, top: int = 20) -> list[dict[str, Any]]:
    """Episodes and concepts (most central first) with their summary and stand-in chunks."""
    found = rows(
        store.conn,
        "level IN ('episode', 'concept') AND EXISTS"
        " (SELECT 1 FROM memory_evidence e WHERE e.node_id = memory_nodes.id AND e.role = 'distill')",
        (),
        "centrality DESC, id",
        top,
    )
    out = with_evidence(store.conn, found, ("distill",))
    totals = dict(
        store.conn.execute(
            "SELECT node_id, COUNT(*) FROM memory_evidence WHERE role = 'member' GROUP BY node_id"
        ).fetchall()
    )
    for item in out:
        item["summary"] = item["statement"]
        item["stand_ins"] = item.pop("evidence")
        item["chunks_total"] = totals.get(item["id"], 0)
        item["ratio"] = round(len(item["stand_ins"]) / max(1, item["chunks_total"]), 4)
    return out
