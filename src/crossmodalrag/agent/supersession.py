"""The marks of knowledge updates between agent memories: a memory whose fact a newer one restates
with another value (agent/updates.py) is superseded by it, kept and ranked lower. The chain of marks
is kept true as memories are stored again, forgotten and restored."""

from __future__ import annotations


def supersede(conn, source_id: int, replaced: list[int], similar: dict[int, float]) -> None:
    """Mark the older memories the new one restates (kept, ranked lower, listed with --history)."""
    for old in replaced:
        # Search reads the mark from this row (retrieval/scoring.py); forgetting the newer memory
        # sets it back to NULL, so the older one is current again.
        conn.execute("UPDATE agent_memories SET superseded_by = ? WHERE source_id = ?", (source_id, old))
        conn.execute(
            "INSERT OR REPLACE INTO agent_memory_links (source_id, target_id, relation, similarity)"
            " VALUES (?, ?, 'supersedes', ?)",
            (source_id, old, similar[old]),
        )


def reinstate(conn, source_id: int) -> list[int]:
    """A superseded value stated again is current again ("monthly", "weekly", then "monthly"): the
    current memory of its chain of updates is superseded by it in turn (inside the caller's write
    transaction). Returns that memory's id."""
    newer, seen = source_id, {source_id}
    while (row := conn.execute("SELECT superseded_by FROM agent_memories WHERE source_id = ?", (newer,)).fetchone())[0]:
        if row[0] in seen:
            break  # a cycle of marks: stop at the last one not seen
        newer = row[0]
        seen.add(newer)
    if newer == source_id:
        return []
    conn.execute("UPDATE agent_memories SET superseded_by = NULL WHERE source_id = ?", (source_id,))
    conn.execute("UPDATE agent_memories SET superseded_by = ? WHERE source_id = ?", (source_id, newer))
    # The link turns around: the newer memory no longer supersedes this one, this one supersedes it.
    link = conn.execute(
        "SELECT similarity FROM agent_memory_links WHERE target_id = ? AND relation = 'supersedes'", (source_id,)
    ).fetchone()
    conn.execute("DELETE FROM agent_memory_links WHERE target_id = ? AND relation = 'supersedes'", (source_id,))
    conn.execute(
        "INSERT OR REPLACE INTO agent_memory_links (source_id, target_id, relation, similarity)"
        " VALUES (?, ?, 'supersedes', ?)",
        (source_id, newer, link[0] if link else 1.0),
    )
    return [newer]


def keep_updates_linked(conn, forgotten: list[int]) -> None:
    """Before memories are erased (in the same transaction): a memory superseded by one of them stays
    superseded, by the erased one's own successor. Forgetting "weekly" in monthly -> weekly -> daily
    leaves monthly superseded by daily; only forgetting the newest value makes the one before it
    current again (the foreign key sets the mark to NULL)."""
    gone = set(forgotten)
    for source_id in sorted(gone):
        newer = _successor_outside(conn, source_id, gone) or _latest_predecessor(conn, source_id, gone)
        if newer is None:
            continue
        older = conn.execute(
            "SELECT m.source_id, l.similarity FROM agent_memories m LEFT JOIN agent_memory_links l"
            " ON l.source_id = m.superseded_by AND l.target_id = m.source_id AND l.relation = 'supersedes'"
            " WHERE m.superseded_by = ?",
            (source_id,),
        ).fetchall()
        for old, similarity in older:
            if old in gone or old == newer:
                continue
            conn.execute("UPDATE agent_memories SET superseded_by = ? WHERE source_id = ?", (newer, old))
            conn.execute(
                "INSERT OR REPLACE INTO agent_memory_links (source_id, target_id, relation, similarity)"
                " VALUES (?, ?, 'supersedes', ?)",
                (newer, old, 1.0 if similarity is None else similarity),
            )


def _latest_predecessor(conn, source_id: int, gone: set[int]) -> int | None:
    """When the newest value goes and several memories it superseded stay (a value stated again took
    over from another): the latest stored of them becomes current, the others stay superseded by it."""
    row = conn.execute(
        "SELECT source_id FROM agent_memories WHERE superseded_by = ? ORDER BY created_at DESC, source_id DESC",
        (source_id,),
    ).fetchall()
    kept = [r[0] for r in row if r[0] not in gone]
    if len(kept) < 2:
        return None  # none or one: the foreign key makes it current
    conn.execute("UPDATE agent_memories SET superseded_by = NULL WHERE source_id = ?", (kept[0],))
    return kept[0]


def _successor_outside(conn, source_id: int, gone: set[int]) -> int | None:
    """The memory that supersedes `source_id`, skipping those in `gone` (None: it is the newest)."""
    seen, current = {source_id}, source_id
    while True:
        row = conn.execute("SELECT superseded_by FROM agent_memories WHERE source_id = ?", (current,)).fetchone()
        if row is None or row[0] is None or row[0] in seen:
            return None
        current = row[0]
        if current not in gone:
            return current
        seen.add(current)
