"""The opt-in usage log: which nodes and chunks a person retrieved, accepted or rated, and when.

Only a target id ("ev_…", "chunk:42"), an event name and a time are stored: never the question.
Tracking is off unless CMRAG_USAGE_TRACKING=on or a call says --track / --accept; --no-track always
wins. Rehearsal strength (recent uses count most, saturating) feeds the `usage` ranking profile and
the staleness of `mem forgetting`.
"""

from __future__ import annotations

import math
import sqlite3
import time
from typing import Any, Iterable

from crossmodalrag.config import Settings
from crossmodalrag.store import Store
from crossmodalrag.store.params import in_batches

EVENTS = ("retrieved", "accepted", "opened", "feedback_up", "feedback_down")
DAY = 86400.0


def is_enabled(settings: Settings, track: bool = False, no_track: bool = False, accept: bool = False) -> bool:
    """Whether this call records usage: --no-track wins, then --track / --accept, then the setting."""
    if no_track:
        return False
    return track or accept or settings.usage_tracking


def chunk_target(chunk_id: int) -> str:
    return f"chunk:{chunk_id}"


def record(store_or_conn: Store | sqlite3.Connection, targets: Iterable[str], event: str) -> int:
    """Append one usage event per target (callers check `is_enabled` first). Returns rows written.
    Raises ValueError for an unknown event name."""
    if event not in EVENTS:
        raise ValueError(f"unknown usage event {event!r} (one of {', '.join(EVENTS)})")
    rows = [(target, event, time.time()) for target in dict.fromkeys(targets)]
    if isinstance(store_or_conn, Store):
        with store_or_conn.transaction() as conn:
            conn.executemany("INSERT INTO memory_usage (target_id, event, at) VALUES (?, ?, ?)", rows)
    else:
        store_or_conn.executemany("INSERT INTO memory_usage (target_id, event, at) VALUES (?, ?, ?)", rows)
    return len(rows)


def record_answer(store: Store, answer, event: str = "retrieved") -> int:
    """Log what an answer showed: its evidence chunks and the memory nodes it matched."""
    targets = [chunk_target(e.hit.chunk_id) for e in answer.evidence]
    targets += [node["id"] for node in answer.matched_nodes or []]
    return record(store, targets, event) if targets else 0


def strength(conn: sqlite3.Connection, targets: list[str], half_life_days: float, saturation: float) -> dict:
    """target -> rehearsal strength in [0, 1): 1 - exp(-sum of decayed uses / saturation).
    A 'feedback_down' counts against; every other use for."""
    if not targets:
        return {}
    now, found = time.time(), {}
    for part in in_batches(targets):
        for target, event, at in conn.execute(
            f"SELECT target_id, event, at FROM memory_usage WHERE target_id IN ({','.join('?' * len(part))})", part
        ):
            weight = 0.5 ** (max(0.0, now - at) / DAY / half_life_days) if half_life_days > 0 else 1.0
            found[target] = found.get(target, 0.0) + (-weight if event == "feedback_down" else weight)
    return {t: 1.0 - math.exp(-max(0.0, r) / max(saturation, 1e-9)) for t, r in found.items()}


def last_used(conn: sqlite3.Connection) -> dict[str, float]:
    """target -> time of its latest use."""
    return dict(conn.execute("SELECT target_id, MAX(at) FROM memory_usage GROUP BY target_id").fetchall())


def usage_view(store: Store, top: int = 20) -> dict[str, Any]:
    """The most used targets with counts per event and the last use (`mem usage --json`)."""
    rows = store.conn.execute(
        "SELECT target_id, event, COUNT(*), MAX(at) FROM memory_usage GROUP BY target_id, event"
    ).fetchall()
    targets: dict[str, dict[str, Any]] = {}
    for target, event, count, at in rows:
        item = targets.setdefault(target, {"target_id": target, "uses": 0, "events": {}, "last_used": 0.0})
        item["uses"] += count
        item["events"][event] = count
        item["last_used"] = max(item["last_used"], at)
    ranked = sorted(targets.values(), key=lambda item: (-item["uses"], item["target_id"]))[:top]
    from crossmodalrag.types import iso_time

    for item in ranked:
        item["last_used"] = iso_time(item["last_used"])
    total = store.conn.execute("SELECT COUNT(*) FROM memory_usage").fetchone()[0]
    return {"events": total, "targets": ranked}


def clear(store: Store) -> int:
    """Wipe the usage log; returns how many events went."""
    with store.transaction() as conn:
        return conn.execute("DELETE FROM memory_usage").rowcount
