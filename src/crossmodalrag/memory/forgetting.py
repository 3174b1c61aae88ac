"""`mem forgetting`: what you are likely forgetting. risk = importance x staleness, both shown.

importance: the node's PageRank centrality over the most central node of its level (0..1);
staleness:  1 - 0.5 ** (days since last touched / CMRAG_USAGE_HALFLIFE_DAYS), where "touched" is
            the latest use of the node or one of its chunks in the usage log, else the content's age.
Every item carries its L0 evidence. Equal risks (staleness saturates at 1 within months, and many
nodes share the top importance) are ordered by time since last touched, longest first.
"""

from __future__ import annotations

import time
from typing import Any

from crossmodalrag.memory.nodes import evidence_of, node_dict, rows
from crossmodalrag.memory.usage import chunk_target, last_used
from crossmodalrag.store import Store

DAY = 86400.0


def staleness(days: float, half_life_days: float) -> float:
    return 1.0 - 0.5 ** (max(0.0, days) / half_life_days) if half_life_days > 0 else 1.0


def forgetting(
    store: Store,
    level: str = "concept",
    top: int = 10,
    min_support: int = 1,
    half_life_days: float = 14.0,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """The nodes most at risk of being forgotten, riskiest first (level "all": every level)."""
    now = time.time() if now is None else now
    levels = ("event", "episode", "concept") if level == "all" else (level,)
    where = f"level IN ({','.join('?' * len(levels))}) AND supported = 1"
    # Support is how many events an episode or concept holds: an event holds none, so it is not filtered.
    where += " AND (level = 'event' OR COALESCE(json_extract(metadata, '$.events'), 1) >= ?)"
    found = rows(store.conn, where, (*levels, min_support))
    peak: dict[str, float] = {}
    for row in found:
        peak[row["level"]] = max(peak.get(row["level"], 0.0), row["centrality"])
    evidence = evidence_of(store.conn, [row["id"] for row in found])
    used = last_used(store.conn)
    items = []
    for row in found:
        chunks = [e for e in evidence[row["id"]] if e["role"] != "distill"]
        touches = [used[t] for t in [row["id"], *(chunk_target(e["chunk_id"]) for e in chunks)] if t in used]
        touched, by = (max(touches), "usage") if touches else (row["last_time"] or row["first_time"], "content_age")
        days = (now - touched) / DAY if touched is not None else 0.0
        importance = row["centrality"] / peak[row["level"]] if peak[row["level"]] > 0 else 0.0
        stale = staleness(days, half_life_days)
        item = node_dict(row, chunks[:5])
        item.update(
            risk=round(importance * stale, 6),
            importance=round(importance, 6),
            staleness=round(stale, 6),
            days_since_touched=round(days, 1),
            touched_by=by,
        )
        items.append(item)
    items.sort(key=lambda item: (-item["risk"], -item["days_since_touched"], item["id"]))
    return items[:top]
