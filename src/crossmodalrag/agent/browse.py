"""Reading agent memories back: listing by kind, tags and date (no query), and saying when a fact
that answers a question was later restated with another value."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

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
    where, params = _memory_filter(kind, tags, since, until, history)
    rows = store.conn.execute(
        "SELECT m.source_id FROM agent_memories m JOIN sources s ON s.id = m.source_id"
        f" WHERE {where} ORDER BY s.timestamp DESC, m.source_id DESC LIMIT ? OFFSET ?",
        (*params, max(1, min(limit, MAX_LIMIT)), max(0, offset)),
    ).fetchall()
    return [memory_with_text(store, source_id) for (source_id,) in rows]


def count_memories(
    store: Store,
    kind: str | None = None,
    tags: list[str] | None = None,
    since: float | None = None,
    until: float | None = None,
    history: bool = False,
) -> int:
    """How many memories list_memories would list without a limit: a listing says what it left out."""
    where, params = _memory_filter(kind, tags, since, until, history)
    return store.conn.execute(
        f"SELECT COUNT(*) FROM agent_memories m JOIN sources s ON s.id = m.source_id WHERE {where}", params
    ).fetchone()[0]


def matching_memories(store: Store, kind: str | None, tags: list[str] | None) -> list[int]:
    """The ids of every memory of this kind with all these tags, superseded ones included (a search
    shows them with a notice of what replaced them)."""
    where, params = _memory_filter(kind, tags, None, None, history=True)
    rows = store.conn.execute(f"SELECT m.source_id FROM agent_memories m WHERE {where}", params)
    return [source_id for (source_id,) in rows]


def _memory_filter(
    kind: str | None, tags: list[str] | None, since: float | None, until: float | None, history: bool
) -> tuple[str, list[Any]]:
    """SQL over agent_memories `m` (and, for dates, sources `s`); `until` excludes its own instant, as
    `before` does in a search."""
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
        clauses.append("s.timestamp < ?")
        params.append(until)
    return " AND ".join(clauses), params


def memory_with_text(store: Store, source_id: int) -> dict[str, Any]:
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


def memory_texts(store: Store, source_ids: list[int]) -> dict[int, str]:
    """The stored text of each memory (its chunks' bodies, without their breadcrumb lines)."""
    marks = ",".join("?" * len(source_ids))
    texts: dict[int, list[str]] = {}
    for source_id, text in store.conn.execute(
        f"SELECT source_id, text FROM chunks WHERE source_id IN ({marks}) ORDER BY source_id, chunk_index", source_ids
    ):
        texts.setdefault(source_id, []).append(text.split("\n", 1)[-1])
    return {source_id: "\n".join(parts) for source_id, parts in texts.items()}


def memory_record(conn, source_id: int) -> dict[str, Any] | None:
    """A stored memory with its attributes, links and history, or None if there is none."""
    row = conn.execute(
        "SELECT m.kind, m.importance, m.tags, m.session_id, m.agent_id, m.times, m.superseded_by, m.created_at,"
        " m.updated_at, s.title, s.timestamp, json_extract(s.metadata, '$.context') FROM agent_memories m"
        " JOIN sources s ON s.id = m.source_id WHERE m.source_id = ?",
        (source_id,),
    ).fetchone()
    if row is None:
        return None
    kind, importance, tags, session_id, agent_id, times, superseded_by, created, updated, title, when, context = row
    links = conn.execute(
        "SELECT target_id, relation, similarity FROM agent_memory_links WHERE source_id = ?"
        " UNION ALL SELECT source_id, CASE relation WHEN 'supersedes' THEN 'superseded_by' ELSE relation END,"
        " similarity FROM agent_memory_links WHERE target_id = ?",
        (source_id, source_id),
    ).fetchall()
    return {
        "id": source_id,
        "title": title,
        "kind": kind,
        "importance": importance,
        "tags": json.loads(tags),
        "session_id": session_id,
        "agent_id": agent_id,
        "date": iso_time(when),
        "context": context or "",
        "created": iso_time(created),
        "updated": iso_time(updated),
        "stored_times": [iso_time(t) for t in json.loads(times)],
        "superseded_by": superseded_by,
        "links": [{"id": i, "relation": r, "similarity": round(s, 4)} for i, r, s in links],
    }
