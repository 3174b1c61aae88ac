"""Changing and erasing what is stored: `memory_update` (an agent memory's text or attributes) and
`memory_forget` (an agent memory, erased as `mem forget` erases it: chunks, vectors, derived nodes).

memory_forget reaches agent memories only. The rest (notes, commits, PDFs, chat sessions) is the
user's: text an agent reads from memory may steer it, and an erase cannot be undone. Chat sessions
are refused too, even those an agent digested: nothing records who ingested a session (the user's
own `mem ingest-chat` of an export stores the same thing), and a session whose file is still
configured is read back by the next sync anyway. The user erases those with `mem forget`."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from crossmodalrag import versioning
from crossmodalrag.agent.browse import memory_record, memory_texts
from crossmodalrag.agent.memories import embed_source, memory_document
from crossmodalrag.agent.memory_input import check_attributes, clean_content
from crossmodalrag.agent.memory_matching import content_hash, exact_duplicates
from crossmodalrag.agent.relink import derive_marks, drop_marks
from crossmodalrag.agent.tools import InvalidArgument
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.store import Store
from crossmodalrag.store.documents import fingerprint, write_document

if TYPE_CHECKING:
    from crossmodalrag.index.embed import Embedder


def update_memory(
    store: Store,
    source_id: int,
    content: str | None = None,
    tags: list[str] | None = None,
    importance: float | None = None,
    kind: str | None = None,
    embedder: "Embedder | None" = None,
) -> dict[str, Any]:
    """Change a memory in place (same id); values it already has change nothing, not even its `updated`
    time. Raises InvalidArgument (no such memory, no field given) / InvalidMemory."""
    if content is None and tags is None and importance is None and kind is None:
        raise InvalidArgument(
            "nothing to change: no field was given", "memory_update takes content, tags, importance or kind"
        )
    record = memory_record(store.conn, source_id)
    if record is None:
        raise InvalidArgument(
            f"no agent memory with id {source_id}", "memory_update changes memories; list them with memory_browse"
        )
    tags, importance, kind = check_attributes(
        record["tags"] if tags is None else tags,
        record["importance"] if importance is None else importance,
        record["kind"] if kind is None else kind,
    )
    text = None if content is None else clean_content(content)[0]
    if text == memory_texts(store, [source_id]).get(source_id):
        text = None  # the same text: nothing to rewrite or embed again
    if text is None and (tags, importance, kind) == (record["tags"], record["importance"], record["kind"]):
        return record  # a write would only say it changed: `memory_diff` and `mem changes` would list it
    now = time.time()
    if text is not None:
        _refuse_a_copy(store, source_id, text, record.get("context") or "")
        _rewrite(store, source_id, text, embedder)
    with store.transaction() as conn, versioning.changing_source(conn, source_id, reason="memory_update"):
        conn.execute(
            "UPDATE agent_memories SET tags = ?, importance = ?, kind = ?, updated_at = ? WHERE source_id = ?",
            (json.dumps(tags), importance, kind, now, source_id),
        )
        conn.execute(
            "UPDATE sources SET metadata = json_set(metadata, '$.tags', json(?), '$.importance', ?, '$.kind', ?)"
            " WHERE id = ?",
            (json.dumps(tags), importance, kind, source_id),
        )
    return memory_record(store.conn, source_id)


def _refuse_a_copy(store: Store, source_id: int, text: str, context: str) -> None:
    """memory_store keeps one memory per text and context; an update may not make a second. Raises
    InvalidArgument naming the memory that already says it."""
    others = [other for other, _ in exact_duplicates(store.conn, text, context) if other != source_id]
    if others:
        raise InvalidArgument(
            f"memory {others[0]} already says this",
            f"forget memory {source_id} if it is no longer needed, or update memory {others[0]}",
        )


def _rewrite(store: Store, source_id: int, text: str, embedder: "Embedder | None") -> None:
    uri, when, metadata = store.conn.execute(
        "SELECT uri, timestamp, metadata FROM sources WHERE id = ?", (source_id,)
    ).fetchone()
    doc = memory_document(text, uri.removeprefix("memory:"), when, json.loads(metadata))
    with store.batched() as batch:
        write_document(batch, doc, fingerprint(doc))
        with batch.unit() as conn:
            conn.execute(
                "UPDATE agent_memories SET content_hash = ? WHERE source_id = ?", (content_hash(text), source_id)
            )
            # What the old text linked to or replaced says nothing about the new one: derived again,
            # the new text taken as stated now.
            drop_marks(conn, [source_id])
            derive_marks(store, conn, source_id, embedder, time.time())
    if embedder is not None:
        embed_source(store, embedder, source_id)


FORGETTABLE = "memory"  # the source type memory_forget erases (see the module docstring)


def forget_source(store: Store, source_id: int) -> dict[str, Any]:
    """Erase one agent memory and everything derived from it. Raises InvalidArgument if there is none,
    or if the source is not an agent memory."""
    row = store.conn.execute("SELECT uri, source_type FROM sources WHERE id = ?", (int(source_id),)).fetchone()
    if row is None:
        raise InvalidArgument(f"no source with id {source_id}", "ids come from memory_search or memory_browse")
    uri, source_type = row
    if source_type != FORGETTABLE:
        raise InvalidArgument(
            f"source {source_id} is a {source_type}, not an agent memory: memory_forget erases agent memories only",
            f"the user can erase it on the command line with `mem forget {source_id}`",
        )
    return forget_sources(store, find_sources(store, uri=uri)).to_dict()
