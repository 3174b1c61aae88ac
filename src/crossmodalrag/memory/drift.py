"""Concept drift: how a concept's events moved in meaning over time.

Per concept, member events are bucketed in fixed windows (CMRAG_DRIFT_WINDOW_DAYS) from its first
event; each non-empty window gets a centroid, and drift between consecutive non-empty windows is
1 - cos of their centroids. An empty window between two non-empty ones means the topic was left and
picked up again: relearning.
"""

from __future__ import annotations

import json
import math
from typing import Any

from crossmodalrag.store import Store
from crossmodalrag.types import iso_time

DAY = 86400.0
SPARK = "▁▂▃▄▅▆▇█"


def concept_drift(times: list[float], vectors, window_days: float) -> dict[str, Any]:
    """The windows series, mean consecutive drift, net drift (first to last window) and relearning."""
    import numpy as np

    start, width = min(times), window_days * DAY
    buckets: dict[int, list[int]] = {}
    for i, moment in enumerate(times):
        buckets.setdefault(int((moment - start) // width), []).append(i)
    windows, previous, steps, centroids = [], None, [], []
    for index in range(max(buckets) + 1):
        members = buckets.get(index, [])
        entry = {"start": iso_time(start + index * width), "events": len(members), "drift": None}
        if members:
            mean = np.mean(vectors[members], axis=0)
            centroid = mean / max(float(np.linalg.norm(mean)), 1e-12)
            if previous is not None:
                entry["drift"] = round(1.0 - float(centroid @ previous), 4)
                steps.append(entry["drift"])
            previous = centroid
            centroids.append(centroid)
        windows.append(entry)
    filled = [w["events"] > 0 for w in windows]
    relearning = any(not filled[i] and any(filled[:i]) and any(filled[i + 1 :]) for i in range(len(filled)))
    net = 1.0 - float(centroids[0] @ centroids[-1]) if len(centroids) > 1 else 0.0
    return {
        "overall_drift": round(sum(steps) / len(steps), 4) if steps else 0.0,
        "net_drift": round(net, 4),
        "relearning": relearning,
        "windows": windows,
        "last_time": iso_time(max(times)),  # where the series ends: the last window only starts there
    }


def build_drift(store: Store, window_days: float) -> dict[str, Any]:
    """Compute and store the drift of every concept whose events span more than one window."""
    import numpy as np

    from crossmodalrag.memory.concepts import why_no_concepts

    conn = store.conn
    concepts = [row[0] for row in conn.execute("SELECT id FROM memory_nodes WHERE level = 'concept'")]
    if not concepts:
        return {"skipped": f"no concepts: {why_no_concepts(conn)}"}
    computed = 0
    with store.transaction():
        for concept in concepts:
            members = conn.execute(
                "SELECT n.first_time, n.vector, n.source_uri FROM memory_edges e JOIN memory_nodes n ON n.id = e.src"
                " WHERE e.dst = ? AND e.kind = 'in_concept' AND n.vector IS NOT NULL AND n.first_time IS NOT NULL"
                " ORDER BY n.first_time",
                (concept,),
            ).fetchall()
            drift = None
            if members and members[-1][0] - members[0][0] >= window_days * DAY:
                vectors = np.vstack([np.frombuffer(m[1], dtype=np.float32) for m in members])
                drift = concept_drift([m[0] for m in members], vectors, window_days)
                drift["grounding_uri"] = members[-1][2]
                computed += 1
            conn.execute(
                "UPDATE memory_nodes SET metadata = json_set(metadata, '$.drift', json(?)) WHERE id = ?",
                (json.dumps(drift), concept),
            )
    return {"concepts": len(concepts), "with_drift": computed}


def drift_view(store: Store, top: int = 10, min_support: int = 2) -> list[dict[str, Any]]:
    """Concepts with a drift series, most drifting first (the JSON a plot draws)."""
    found = store.conn.execute(
        "SELECT id, title, json_extract(metadata, '$.drift'), json_extract(metadata, '$.events') FROM memory_nodes"
        " WHERE level = 'concept' AND json_type(metadata, '$.drift') = 'object'"
        " AND json_extract(metadata, '$.events') >= ?",
        (min_support,),
    ).fetchall()
    out = [{"concept_id": row[0], "title": row[1], "support": int(row[3]), **json.loads(row[2])} for row in found]
    out.sort(key=lambda item: (-item["overall_drift"], item["concept_id"]))
    return out[:top]


def sparkline(values: list[float | None]) -> str:
    """One character per window: the bar height is the drift, a dot an empty or first window."""
    top = max((v for v in values if v is not None), default=0.0) or 1.0
    return "".join(
        "·" if v is None else SPARK[min(len(SPARK) - 1, int(math.floor(v / top * (len(SPARK) - 1))))] for v in values
    )
