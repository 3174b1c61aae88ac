"""The graph over the hierarchy: concept co-occurrence edges and PageRank centrality on every node.

PageRank runs as a power iteration over edge lists with numpy (bincount per step): at 20k events it
needs a few milliseconds per step and no graph library. The graph is undirected (membership counts
both ways: a concept with many events is important, and so is an event in an important concept).
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from typing import Any

from crossmodalrag.store import Store

DAMPING = 0.85
MAX_STEPS = 100
TOLERANCE = 1e-9


def pagerank(count: int, sources, targets, weights) -> Any:
    """PageRank scores (summing to 1) over `count` nodes and undirected weighted edges (numpy arrays)."""
    import numpy as np

    if count == 0:
        return np.zeros(0)
    src = np.concatenate([sources, targets]).astype(np.int64)
    dst = np.concatenate([targets, sources]).astype(np.int64)
    weight = np.concatenate([weights, weights]).astype(np.float64)
    out_weight = np.bincount(src, weights=weight, minlength=count)
    share = np.divide(weight, out_weight[src], out=np.zeros_like(weight), where=out_weight[src] > 0)
    dangling = out_weight == 0
    rank = np.full(count, 1.0 / count)
    for _ in range(MAX_STEPS):
        spread = np.bincount(dst, weights=rank[src] * share, minlength=count)
        new = (1.0 - DAMPING) / count + DAMPING * (spread + rank[dangling].sum() / count)
        if np.abs(new - rank).sum() < TOLERANCE:
            return new
        rank = new
    return rank


def co_occurrences(conn) -> list[tuple[str, str, float]]:
    """(concept, concept, number of episodes holding events of both), each pair once."""
    concepts: dict[str, set[str]] = {}  # episode -> concepts of its events
    concept_of = dict(conn.execute("SELECT src, dst FROM memory_edges WHERE kind = 'in_concept'").fetchall())
    for event, episode in conn.execute("SELECT src, dst FROM memory_edges WHERE kind = 'in_episode'"):
        if event in concept_of:
            concepts.setdefault(episode, set()).add(concept_of[event])
    pairs: Counter = Counter()
    for found in concepts.values():
        pairs.update(combinations(sorted(found), 2))
    return [(a, b, float(n)) for (a, b), n in sorted(pairs.items())]


def build_graph(store: Store) -> dict[str, Any]:
    """Concept co-occurrence edges (weight: episodes the two concepts share), then centrality."""
    import numpy as np

    conn = store.conn
    shared = co_occurrences(conn)
    ids = [row[0] for row in conn.execute("SELECT id FROM memory_nodes ORDER BY id")]
    position = {node: i for i, node in enumerate(ids)}
    with store.transaction():
        conn.execute("DELETE FROM memory_edges WHERE kind = 'co_occurs'")
        conn.executemany("INSERT INTO memory_edges (src, dst, kind, weight) VALUES (?, ?, 'co_occurs', ?)", shared)
        edges = conn.execute("SELECT src, dst, weight FROM memory_edges").fetchall()
        sources = np.array([position[e[0]] for e in edges], dtype=np.int64)
        targets = np.array([position[e[1]] for e in edges], dtype=np.int64)
        weights = np.array([e[2] for e in edges], dtype=np.float64)
        # Scaled by the node count: 1.0 is an average node, whatever the size of memory.
        scores = pagerank(len(ids), sources, targets, weights) * len(ids)
        conn.executemany(
            "UPDATE memory_nodes SET centrality = ? WHERE id = ? AND abs(centrality - ?) > 1e-9",
            [(float(s), node, float(s)) for node, s in zip(ids, scores, strict=True)],
        )
    return {"nodes": len(ids), "edges": len(edges), "co_occurs": len(shared)}
