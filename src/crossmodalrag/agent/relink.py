"""Links and supersession marks derived again for a memory whose text changed in place: rewritten by
`memory_update`, or put back by a rollback. The marks are derived, not versioned: what the old text
linked to or replaced says nothing about the new one, so they are dropped and the store's own step
(agent/memories.py) runs on the text the memory has now."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from crossmodalrag.agent.browse import memory_texts
from crossmodalrag.agent.memories import _embedded_as_stored
from crossmodalrag.agent.memory_matching import UPDATE_SIMILARITY, link, restated, similarities
from crossmodalrag.agent.supersession import keep_updates_linked, supersede
from crossmodalrag.agent.updates import restates_with_new_value
from crossmodalrag.store import Store

if TYPE_CHECKING:
    from crossmodalrag.index.embed import Embedder


def drop_marks(conn, source_ids: list[int]) -> None:
    """Before the memories' texts are derived again (in the caller's transaction): what they superseded
    passes on as if they were forgotten (to their successor, or current again), their own marks and
    their links in both directions go."""
    keep_updates_linked(conn, source_ids)
    for source_id in source_ids:
        conn.execute("UPDATE agent_memories SET superseded_by = NULL WHERE superseded_by = ?", (source_id,))
        conn.execute("UPDATE agent_memories SET superseded_by = NULL WHERE source_id = ?", (source_id,))
        conn.execute("DELETE FROM agent_memory_links WHERE source_id = ? OR target_id = ?", (source_id, source_id))


def derive_marks(store: Store, conn, source_id: int, embedder: "Embedder | None", stated_at: float) -> None:
    """Link the memory to its closest current ones and mark supersession as a store does, the memory
    taken as stated at `stated_at`: it replaces older memories it restates with another value, and the
    first newer one restating it replaces it (as it did when that one was stored)."""
    text = memory_texts(store, [source_id]).get(source_id)
    if text is None:
        return
    when, metadata = conn.execute("SELECT timestamp, metadata FROM sources WHERE id = ?", (source_id,)).fetchone()
    vector = _embedded_as_stored(embedder, text, when, json.loads(metadata).get("context") or "")
    similar = similarities(store, text, vector, embedder)
    similar.pop(source_id, None)
    stored = _stored_order(conn, list(similar))
    older = {i: score for i, score in similar.items() if stored[i] < (stated_at, source_id)}
    link(conn, source_id, similar)
    floor = UPDATE_SIMILARITY["cosine" if vector is not None else "jaccard"]
    supersede(conn, source_id, restated(store, text, older, floor), similar)
    newer = sorted((i for i in similar if i not in older and similar[i] >= floor), key=stored.__getitem__)
    texts = memory_texts(store, newer) if newer else {}
    successor = next((i for i in newer if restates_with_new_value(text, texts.get(i, ""))), None)
    if successor is not None:
        supersede(conn, successor, [source_id], {source_id: similar[successor]})


def _stored_order(conn, source_ids: list[int]) -> dict[int, tuple[float, int]]:
    """(created_at, id) of each memory: the order a store would have met them in."""
    if not source_ids:
        return {}
    rows = conn.execute(
        f"SELECT source_id, created_at FROM agent_memories WHERE source_id IN ({','.join('?' * len(source_ids))})",
        source_ids,
    )
    return {source_id: (created, source_id) for source_id, created in rows}


def relink_restored(store: Store, uris: list[str], embedder: "Embedder | None") -> int:
    """After a rollback: the restored memories' marks derived again, each as of when it was stored, the
    oldest first. Returns how many memories were relinked."""
    if not uris:
        return 0
    rows = store.conn.execute(
        "SELECT m.source_id, m.created_at FROM agent_memories m JOIN sources s ON s.id = m.source_id"
        f" WHERE s.uri IN ({','.join('?' * len(uris))}) ORDER BY m.created_at, m.source_id",
        uris,
    ).fetchall()
    if not rows:
        return 0
    with store.transaction() as conn:
        drop_marks(conn, [source_id for source_id, _ in rows])
        for source_id, created in rows:
            derive_marks(store, conn, source_id, embedder, created)
    return len(rows)
