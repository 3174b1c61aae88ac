"""Events moved onto chunks again without a model: re-anchored when their source was re-chunked or
renamed (same text), given back to their source when a rollback restored it under its former id."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from crossmodalrag import versioning
from crossmodalrag.memory.extract import PROMPT_VERSION
from crossmodalrag.memory.nodes import Link, replace_links, rows, write_nodes
from crossmodalrag.memory.sources import ChunkRow, SourceRow, all_sources, chunk_digest, chunks_of, text_hash
from crossmodalrag.store import Store


def reattach_restored(store: Store) -> int:
    """Give events left without a source back to a source holding every chunk text they rested on
    and no events of its own yet: a rollback across a rename removes the note at its new path (its
    events' source_id goes NULL, its extraction state with it) and restores it at its former one with
    the same text. Removed as orphans, they waited for a model to draw them again. The state written
    names no model: kept as they are without one, drawn again by one. Returns how many sources got
    events back."""
    from crossmodalrag.memory.events import _states  # events.py runs this: imported when called

    orphans = rows(store.conn, "level = 'event' AND source_id IS NULL")
    if not orphans:
        return 0
    states = _states(store)
    unread = {s.id: (s, chunks_of(store.conn, s.id)) for s in all_sources(store.conn) if s.id not in states}
    texts = {sid: {chunk_digest(c) for c in chunks} for sid, (_, chunks) in unread.items()}
    homes: dict[int, list] = {}
    for row in orphans:
        rested_on = set(json.loads(row["metadata"]).get("anchor_texts", {}))
        home = next((sid for sid in sorted(texts) if rested_on and rested_on <= texts[sid]), None)
        if home is not None:
            homes.setdefault(home, []).append(row)
    for sid, found in homes.items():
        _give_back(store, *unread[sid], found)
    return len(homes)


@dataclass(frozen=True)
class EventsBack:
    """What a rollback's restored sources got back of the hierarchy."""

    sources: int  # sources given back the events they had (reattach_restored)
    without: list[str]  # restored sources still without events, in a memory that has some: build-memory


def give_events_back(store: Store, restored: list[str]) -> EventsBack:
    """After a rollback restored these sources (uris): give them back the events still stored for
    them, as the next `mem build-memory` would, and name those left without (their events went: a
    forget removes every event left without a source, and a build removes orphans)."""
    if not restored:
        return EventsBack(0, [])
    given = _give_commits_back(store, set(restored)) + reattach_restored(store)
    if store.conn.execute("SELECT 1 FROM memory_extractions LIMIT 1").fetchone() is None:
        return EventsBack(given, [])  # no hierarchy built: nothing to say
    from crossmodalrag.memory.stats import not_extracted_sources

    pending = {row["uri"] for row in not_extracted_sources(store.conn)}
    return EventsBack(given, sorted(uri for uri in restored if uri in pending))


def _give_commits_back(store: Store, restored: set[str]) -> int:
    """A restored commit's events, by its uri: a commit's text never changes (its uri holds its sha), and
    its events, drawn without a model, keep no chunk texts to match (reattach_restored). Their links
    move onto the restored chunks by the spans they covered."""
    from crossmodalrag.memory.events import GIT_MODEL, GIT_PROMPT, _save_state

    given = 0
    for source in all_sources(store.conn):
        if source.uri not in restored or source.source_type != "commit":
            continue
        with store.transaction() as conn:
            count = conn.execute(
                "UPDATE memory_nodes SET source_id = ? WHERE level = 'event' AND source_id IS NULL AND source_uri = ?",
                (source.id, source.uri),
            ).rowcount
        if not count:
            continue
        chunks = chunks_of(store.conn, source.id)
        reanchor(store, source, chunks)
        cost = {"calls": 0, "prompt_chars": 0, "completion_tokens": 0, "started": time.monotonic()}
        with store.transaction() as conn:
            _save_state(conn, source, text_hash(chunks), (GIT_MODEL, GIT_PROMPT), "done", "", count, cost)
        given += 1
    return given


def _give_back(store: Store, source: SourceRow, chunks: list[ChunkRow], found: list) -> None:
    from crossmodalrag.memory.events import GIT_MODEL, GIT_PROMPT, _save_state, _stored_event

    nodes = [_stored_event(row, source) for row in found]
    vectors = dict(store.conn.execute("SELECT id, vector FROM memory_nodes WHERE source_id IS NULL"))
    for node in nodes:
        rested_on = node.metadata["anchor_texts"]
        node.vector = vectors.get(node.id)
        node.links = [Link(c.id, *rested_on[chunk_digest(c)]) for c in chunks if chunk_digest(c) in rested_on]
        node.metadata["anchors"] = {
            str(c.id): [c.char_start, c.char_end] for c in chunks if chunk_digest(c) in rested_on
        }
    key = (GIT_MODEL, GIT_PROMPT) if source.source_type == "commit" else ("", PROMPT_VERSION)
    cost = {"calls": 0, "prompt_chars": 0, "completion_tokens": 0, "started": time.monotonic()}
    with store.transaction() as conn:
        write_nodes(conn, nodes)
        conn.executemany(  # also where write_nodes saw nothing else change
            "UPDATE memory_nodes SET source_id = ?, source_uri = ? WHERE id = ?",
            [(source.id, source.uri, node.id) for node in nodes],
        )
        _save_state(conn, source, text_hash(chunks), key, "done", "", len(nodes), cost)


def reanchor(store: Store, source: SourceRow, chunks: list[ChunkRow]) -> None:
    """Move each event's links onto the new chunks covering the spans its old chunks covered, each with
    the role and score it had (their order is the evidence's), and onto the source's uri: a renamed note
    is re-anchored, and `mem events --source NEWPATH` must find its events."""
    with store.transaction() as conn:
        query = "SELECT id, metadata, source_uri FROM memory_nodes WHERE source_id = ?"
        for row in conn.execute(query, (source.id,)).fetchall():
            metadata = json.loads(row[1])
            spans = list(metadata.get("anchors", {}).values())
            covering = {c.id: c for c in chunks for s, e in spans if c.char_start < e and s < c.char_end}
            links = _links_kept(conn, row[0], metadata, list(covering.values()))
            replace_links(conn, row[0], links)
            metadata["anchors"] = {str(c.id): [c.char_start, c.char_end] for c in covering.values()}
            metadata["anchor_texts"] = {
                chunk_digest(covering[link.chunk_id]): [link.role, link.score] for link in links
            }
            conn.execute(
                "UPDATE memory_nodes SET metadata = ?, source_uri = ? WHERE id = ?",
                (json.dumps(metadata, ensure_ascii=False), source.uri, row[0]),
            )
            if row[2] != source.uri:  # the uri is part of a node's versioned state
                versioning.changed(conn, "memory_node", row[0])
        conn.execute(
            "UPDATE memory_extractions SET source_fingerprint = ?, updated_at = ? WHERE source_id = ?",
            (source.fingerprint, time.time(), source.id),
        )


def _links_kept(conn: sqlite3.Connection, node_id: str, metadata: dict, covering: list[ChunkRow]) -> list[Link]:
    """The links of a re-anchored event: each covering chunk with the role and score its link had,
    by chunk id (a rename keeps the chunks), else by text (a re-chunk that kept it), else cited."""
    had = {row[0]: (row[1], row[2]) for row in conn.execute(
        "SELECT chunk_id, role, score FROM memory_evidence WHERE node_id = ?", (node_id,)
    )}  # fmt: skip
    by_text = metadata.get("anchor_texts", {})
    return [Link(c.id, *(had.get(c.id) or by_text.get(chunk_digest(c)) or ("cited", None))) for c in covering]
