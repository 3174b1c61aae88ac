"""Reading agent memories back: listing by kind, tags and date (no query), and saying when a fact
that answers a question was later restated with another value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crossmodalrag.agent.memories import memory_record
from crossmodalrag.store import Store
from crossmodalrag.types import iso_time

if TYPE_CHECKING:
    from crossmodalrag.types import Answer

MAX_LIMIT = 500


def list_memories(
    store: Store,
    kind: str | None = None,
    tags: list[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    history: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Memories newest first, filtered; superseded ones only with `history`. Each with its text."""
    clauses, params = ["1 = 1"], []
    if not history:
        clauses.append("m.superseded_by IS NULL")
    if kind:
        clauses.append("m.kind = ?")
        params.append(kind)
    for tag in tags or []:
        clauses.append("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE json_each.value = ?)")
        params.append(tag.lower())
    if since is not None:
        clauses.append("s.timestamp >= ?")
        params.append(since)
    if until is not None:
        clauses.append("s.timestamp <= ?")
        params.append(until)
    rows = store.conn.execute(
        "SELECT m.source_id FROM agent_memories m JOIN sources s ON s.id = m.source_id"
        f" WHERE {' AND '.join(clauses)} ORDER BY s.timestamp DESC, m.source_id DESC LIMIT ? OFFSET ?",
        (*params, max(1, min(limit, MAX_LIMIT)), max(0, offset)),
    ).fetchall()
    return [memory_with_text(store, source_id) for (source_id,) in rows]


def memory_with_text(store: Store, source_id: int) -> dict[str, Any]:
    from crossmodalrag.agent.memories import memory_texts

    record = memory_record(store.conn, source_id) or {"id": source_id}
    return {**record, "text": memory_texts(store, [source_id]).get(source_id, "")}


def change_notices(store: Store, source_ids: list[int]) -> list[str]:
    """One line per cited memory that replaced an older value, or that a newer one replaced."""
    if not source_ids:
        return []
    marks = ",".join("?" * len(source_ids))
    rows = store.conn.execute(
        "SELECT l.source_id, l.target_id, s_new.timestamp, s_old.title FROM agent_memory_links l"
        " JOIN sources s_new ON s_new.id = l.source_id JOIN sources s_old ON s_old.id = l.target_id"
        f" WHERE l.relation = 'supersedes' AND (l.source_id IN ({marks}) OR l.target_id IN ({marks}))",
        (*source_ids, *source_ids),
    ).fetchall()
    return [
        f'memory {new} ({(iso_time(when) or "")[:10]}) replaced an older one, memory {old}: "{title}"'
        for new, old, when, title in rows
    ]


def note_changes(store: Store, answer: "Answer") -> None:
    """Add to an answer's notices when a memory it cites replaced, or was replaced by, another."""
    cited = sorted({e.hit.source_id for e in answer.evidence if e.hit.source_type == "memory" and e.hit.source_id})
    answer.notices.extend(change_notices(store, cited))


def memory_counts(store: Store) -> dict[str, Any]:
    """How many memories, by kind, and how many were superseded."""
    kinds = dict(store.conn.execute("SELECT kind, COUNT(*) FROM agent_memories GROUP BY kind").fetchall())
    superseded = store.conn.execute("SELECT COUNT(*) FROM agent_memories WHERE superseded_by IS NOT NULL").fetchone()
    return {"memories": sum(kinds.values()), "by_kind": kinds, "superseded": superseded[0]}
