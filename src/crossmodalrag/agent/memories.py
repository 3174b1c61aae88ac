"""Agent-written memories: a source type of its own (`memory`), stored, chunked, embedded and cited
like any other source, with kind, importance, tags and session/agent attribution.

Storing one: `<private>` spans are stripped and secrets masked; an exact duplicate (the same text up to
case, spacing and the punctuation around words, in the same context) returns the stored memory (current
again if it had been superseded; embedded if a store killed before its embedding left it without a
vector); `memory_update` refuses to make one. A near duplicate in the same context (cosine >= 0.95, with
the same words in the same order: a swapped or changed name says another thing) is merged into it (tags
unioned, importance max, both times kept): "Yes, ship it" replying to two different questions is two
memories. Otherwise the new memory is linked to its closest ones (cosine >= 0.75, at most 5), and an
older memory whose fact it restates with another value is marked superseded (kept, listed with
--history, ranked below the memory that replaced it by search).
Without an embedding model the similarity is the word-set Jaccard of the two texts, with the same
thresholds. Checking the input is memory_input.py's; finding duplicates, links and restated facts,
memory_matching.py's.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crossmodalrag import versioning
from crossmodalrag.agent.browse import memory_record  # noqa: F401 (memory_record lived here)
from crossmodalrag.agent.memory_input import (  # noqa: F401 (MAX_* and InvalidMemory: imported from here)
    MAX_CHARS,
    MAX_CONTEXT_CHARS,
    MAX_TAGS,
    InvalidMemory,
    check_attributes,
    clean_content,
    clean_context,
)
from crossmodalrag.agent.memory_matching import (  # noqa: F401 (content_hashes: imported from here)
    UPDATE_SIMILARITY,
    content_hash,
    content_hashes,
    exact_duplicates,
    link,
    near_duplicate,
    restated,
    similarities,
)
from crossmodalrag.agent.supersession import reinstate, supersede
from crossmodalrag.chunking.turns import CONTEXT_MARK, semantic_text
from crossmodalrag.store import Store
from crossmodalrag.store.documents import fingerprint, write_document
from crossmodalrag.types import Document, human_date, iso_time

if TYPE_CHECKING:
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import Embedder

SOURCE_TYPE = "memory"


@dataclass
class StoreResult:
    """What `remember` did: stored a new memory, found an exact duplicate, or merged a near one."""

    id: int
    status: str  # "stored" | "duplicate" | "merged"
    similarity: float | None = None  # to the memory it was merged into
    links: list[dict[str, Any]] = field(default_factory=list)
    supersedes: list[int] = field(default_factory=list)
    measure: str = "cosine"  # or "jaccard" without an embedding model
    masked: int = 0  # secrets masked in the content and context

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "uri": f"mem://source/{self.id}",
            "status": self.status,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "links": self.links,
            "supersedes": self.supersedes,
            "similarity_measure": self.measure,
            "secrets_masked": self.masked,
        }


FUTURE_SLACK_SECONDS = 86_400  # a day: a clock or time zone a little off is no future


def remember(
    store: Store,
    content: str,
    tags: list[str] | None = None,
    importance: float = 0.5,
    kind: str = "note",
    session_id: str = "",
    agent_id: str = "",
    embedder: "Embedder | None" = None,
    when: float | None = None,
    context: str = "",
) -> StoreResult:
    """Store a memory (see the module docstring). `when` (unix seconds) is the time it was said or
    learned, its date on the timeline (default: now); `context` is what it answers or follows (the
    previous turn, for a conversation stored turn by turn): indexed for words beside the memory, as a
    chat turn's previous turn is, but neither embedded nor part of its text. Raises InvalidMemory."""
    text, masked = clean_content(content)
    context, masked_in_context = clean_context(context)
    masked += masked_in_context
    tags, importance, kind = check_attributes(tags or [], importance, kind)
    now = time.time()
    if when is not None and when > now + FUTURE_SLACK_SECONDS:
        # It would become the memory's "now": "last week" and recency would be read from then.
        raise InvalidMemory("when is in the future", "give the time it was said or learned, at the latest now")
    digest = content_hash(text)
    measure = "cosine" if embedder is not None else "jaccard"
    vector = None
    if embedder is not None and not exact_duplicates(store.conn, text, context):  # a duplicate needs none
        vector = _embedded_as_stored(embedder, text, now if when is None else when, context)

    def write() -> StoreResult:
        # From the duplicate check to the insert, one write transaction: two agents storing the same
        # memory at once store it once. SQLite's BEGIN IMMEDIATE lets one writer in; on PostgreSQL,
        # where writers run side by side, the second waits on a lock named by the text's hash.
        batch.writes(f"memory-text:{digest}")
        with batch.unit() as conn:
            row = next(iter(exact_duplicates(conn, text, context)), None)
            if row:
                _merge_into(conn, row[0], tags, importance, now)
                replaced = reinstate(conn, row[0]) if row[1] else []
                return StoreResult(row[0], "duplicate", 1.0, supersedes=replaced, measure=measure, masked=masked)
            similar = similarities(store, text, vector, embedder)
            updated = restated(store, text, similar, UPDATE_SIMILARITY[measure])
            best = near_duplicate(store, text, similar, context, updated)
            if best:
                _merge_into(conn, best[0], tags, importance, now)
                return StoreResult(best[0], "merged", best[1], measure=measure, masked=masked)
            attributes = {
                "kind": kind,
                "tags": tags,
                "importance": importance,
                "session_id": session_id,
                "agent_id": agent_id,
            }
            if context:
                attributes["context"] = context
            source_id = _insert(batch, conn, text, attributes, digest, now, now if when is None else when)
            links = link(conn, source_id, similar)
            supersede(conn, source_id, updated, similar)
            return StoreResult(source_id, "stored", None, links, updated, measure, masked)

    if embedder is not None:
        from crossmodalrag.index.embeddings import model_row

        model_row(store, embedder.identity)  # registered now, on first use: inside `write` it is only read
    with store.batched() as batch:
        result = batch.run(write)  # run again if PostgreSQL aborts it as colliding (serializable)
    if embedder is not None and (result.status == "stored" or not is_embedded(store, embedder, result.id)):
        # After the commit: embedding is slow, the lock is not held. A duplicate is embedded too when a
        # store was killed between its commit and this: storing it again is how an agent retries.
        embed_source(store, embedder, result.id)
    return result


def load_memory_embedder(settings: "Settings") -> tuple["Embedder | None", str | None]:
    """The embedding model for similarity checks, or None and why (word overlap is used instead)."""
    from crossmodalrag.retrieval.semantic import embeddings_installed

    if not embeddings_installed():
        return None, None
    from crossmodalrag.index.embed import load_embedder
    from crossmodalrag.index.models import ModelUnavailable

    try:
        return load_embedder(settings), None
    except ModelUnavailable as error:
        return None, f"duplicates and links judged by shared words: {error.message}"


def memory_document(text: str, key: str, when: float, attributes: dict[str, Any]) -> Document:
    """A memory as a document. Its chunks' breadcrumb is its first line and its day, in words and as
    ISO, then " · re: " and its context if it has one (chunking/turns.py: indexed for words, left out
    of the vector). The day in words is what a chat turn's session breadcrumb carries ("8 May, 2023"):
    with the ISO day alone, "in May 2023" met a memory's date in neither its words nor its vector."""
    first_line = text.split("\n", 1)[0]
    title = first_line if len(first_line) <= 80 else first_line[:79] + "…"
    crumb = " · ".join(part for part in (title, day_in_words(when), (iso_time(when) or "")[:10]) if part)
    if attributes.get("context"):
        crumb += CONTEXT_MARK + attributes["context"]
    return Document(
        uri=f"memory:{key}",
        source_type=SOURCE_TYPE,
        title=title,
        text=text,
        format="plain",
        timestamp=when,
        locator=f"memory {key[:8]}",
        metadata={**attributes, "_breadcrumb": crumb},
    )


def day_in_words(when: float | None) -> str:
    """'8 May 2023' (types.human_date), or "" for no printable day."""
    return human_date(when) if iso_time(when) else ""


def _insert(batch, conn, text: str, attributes: dict[str, Any], digest: str, now: float, when: float) -> int:
    """Write the memory's source and its row, inside the open unit of `batch` (on `conn`)."""
    key = uuid.uuid4().hex
    doc = memory_document(text, key, when, attributes)
    write_document(batch, doc, fingerprint(doc))  # a unit inside the open one: part of it
    source_id = conn.execute("SELECT id FROM sources WHERE uri = ?", (doc.uri,)).fetchone()[0]
    conn.execute(
        "INSERT INTO agent_memories (source_id, kind, importance, tags, session_id, agent_id, content_hash,"
        " times, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            source_id,
            attributes["kind"],
            attributes["importance"],
            json.dumps(attributes["tags"]),
            attributes["session_id"],
            attributes["agent_id"],
            digest,
            json.dumps([now]),
            now,
            now,
        ),
    )
    return source_id


def _merge_into(conn, source_id: int, tags: list[str], importance: float, now: float) -> None:
    with versioning.changing_source(conn, source_id, reason="merged a duplicate"):
        old_tags, times, old_importance = conn.execute(
            "SELECT tags, times, importance FROM agent_memories WHERE source_id = ?", (source_id,)
        ).fetchone()
        merged = sorted(set(json.loads(old_tags)) | set(tags))
        conn.execute(
            "UPDATE agent_memories SET tags = ?, importance = ?, times = ?, updated_at = ? WHERE source_id = ?",
            (
                json.dumps(merged),
                max(importance, old_importance),
                json.dumps([*json.loads(times), now]),
                now,
                source_id,
            ),
        )
        conn.execute(
            "UPDATE sources SET metadata = json_set(metadata, '$.tags', json(?), '$.importance', ?) WHERE id = ?",
            (json.dumps(merged), max(importance, old_importance), source_id),
        )


def _embedded_as_stored(embedder: "Embedder | None", text: str, when: float, context: str):
    """The vector the memory's first piece will have once stored (breadcrumb and all, as
    `embed_source` embeds it), to compare with the stored memories' vectors, which carry theirs: the
    bare text scored 0.90-0.97 against its own stored vector, under MERGE_SIMILARITY."""
    if embedder is None:
        return None
    from crossmodalrag.chunking import chunk_document
    from crossmodalrag.index.embed import pieces

    doc = memory_document(text, "", when, {"context": context} if context else {})
    return embedder.embed(pieces(embedder, semantic_text(chunk_document(doc)[0].text))[:1])[0]


def embed_source(store: Store, embedder: "Embedder", source_id: int) -> None:
    """The memory's vector now (not at the next reindex): it is compared against the very next memory."""
    from crossmodalrag.index.embed import pieces
    from crossmodalrag.index.embeddings import model_row, store_vectors

    model_id = model_row(store, embedder.identity)
    chunks = store.conn.execute("SELECT id, text FROM chunks WHERE source_id = ?", (source_id,)).fetchall()
    rows = []
    for chunk_id, text in chunks:
        parts = pieces(embedder, semantic_text(text))
        vectors = embedder.embed(parts)
        rows += [(chunk_id, model_id, i, len(parts), store.encode_vector(v)) for i, v in enumerate(vectors)]
    store_vectors(store, rows)  # encoded as the backend stores them (pgvector's type on PostgreSQL)


def is_embedded(store: Store, embedder: "Embedder", source_id: int) -> bool:
    """Whether every chunk of the memory has its vector from this model."""
    from crossmodalrag.index.embeddings import model_row

    missing = store.conn.execute(
        "SELECT 1 FROM chunks c WHERE c.source_id = ? AND NOT EXISTS (SELECT 1 FROM chunk_vectors v"
        " WHERE v.chunk_id = c.id AND v.model_id = ?) LIMIT 1",
        (source_id, model_row(store, embedder.identity)),
    ).fetchone()
    return missing is None


def restore_memory_row(conn, source_id: int, state: dict[str, Any]) -> None:
    """Make a memory's row follow its source as a rollback restored it (versioning/sources.py): the
    attributes and content hash come back from the source's state, and a row that went with its source
    is recreated. Stored times, links and supersession marks are not versioned: `mem rollback` derives
    the links and marks again afterwards (agent/relink.py)."""
    attributes = state["metadata"]
    text = "\n".join(chunk[0].split("\n", 1)[-1] for chunk in state["chunks"])  # bodies, as memory_texts
    now = time.time()
    created = state["timestamp"] or now
    conn.execute(
        "INSERT INTO agent_memories (source_id, kind, importance, tags, session_id, agent_id, content_hash, times,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source_id) DO UPDATE SET"
        " kind = excluded.kind, importance = excluded.importance, tags = excluded.tags,"
        " session_id = excluded.session_id, agent_id = excluded.agent_id, content_hash = excluded.content_hash,"
        " updated_at = excluded.updated_at",
        (
            source_id,
            attributes.get("kind", "note"),
            attributes.get("importance", 0.5),
            json.dumps(attributes.get("tags", [])),
            attributes.get("session_id", ""),
            attributes.get("agent_id", ""),
            content_hash(text),
            json.dumps([created]),
            created,
            now,
        ),
    )
