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
thresholds.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crossmodalrag import versioning
from crossmodalrag.agent.browse import memory_record, memory_texts  # noqa: F401 (memory_record lived here)
from crossmodalrag.agent.supersession import reinstate, supersede
from crossmodalrag.agent.updates import restates_with_new_value, says_the_same
from crossmodalrag.chunking.turns import CONTEXT_CHARS, CONTEXT_MARK, clip, semantic_text
from crossmodalrag.connectors.chats.secrets import mask_secrets
from crossmodalrag.errors import CMRAGError
from crossmodalrag.privacy import strip_private
from crossmodalrag.retrieval.diversify import jaccard, word_set
from crossmodalrag.retrieval.values import EDGE_PUNCTUATION, value_words
from crossmodalrag.store import Store
from crossmodalrag.store.documents import fingerprint, write_document
from crossmodalrag.types import Document, iso_time

if TYPE_CHECKING:
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embed import Embedder

SOURCE_TYPE = "memory"
MERGE_SIMILARITY = 0.95
LINK_SIMILARITY = 0.75
MAX_LINKS = 5
UPDATE_CANDIDATES = 20  # the most similar memories checked for a restated fact
# ... and how similar they must be at least: MiniLM cosines of restated facts were 0.49-0.98 on
# bench/agent_updates.py's pairs; storing LoCoMo turns one by one without this floor marked 281 of 419
# as superseded (a speaker's turns share their first word).
UPDATE_SIMILARITY = {"cosine": 0.45, "jaccard": 0.2}
MAX_CHARS = 20_000
MAX_CONTEXT_CHARS = 2_000  # accepted; its first CONTEXT_CHARS are kept, as a chat turn keeps the one before it
MAX_TAGS = 20
KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
TAG = re.compile(r"^[\w][\w./:-]{0,63}$")


class InvalidMemory(CMRAGError):
    """A memory's content or attributes are unusable (empty, too long, out of range)."""


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
            similar = _similarities(store, text, vector, embedder)
            updated = restated(store, text, similar, UPDATE_SIMILARITY[measure])
            best = _near_duplicate(store, text, similar, context, updated)
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
            links = _link(conn, source_id, similar)
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


def clean_content(content: Any) -> tuple[str, int]:
    """The text to store and how many secrets were masked in it: `<private>` spans dropped, API keys,
    tokens and passwords masked as in chat transcripts (agents paste them too). Raises InvalidMemory."""
    if not isinstance(content, str):
        raise InvalidMemory("a memory's content must be text", "pass the memory as a string")
    if len(content) > MAX_CHARS * 2:
        raise InvalidMemory(f"a memory is at most {MAX_CHARS} characters", "store a summary, or ingest the file")
    text, masked = mask_secrets(strip_private(content).strip())
    if not text:
        raise InvalidMemory("the memory is empty (or all of it was <private>)", "give the text to remember")
    if len(text) > MAX_CHARS:
        raise InvalidMemory(f"a memory is at most {MAX_CHARS} characters", "store a summary, or ingest the file")
    return text, masked


def clean_context(context: Any) -> tuple[str, int]:
    """The stored context (private spans dropped, secrets masked, one line, clipped) and how many
    secrets were masked. Raises InvalidMemory."""
    if context is None:
        return "", 0
    if not isinstance(context, str) or len(context) > MAX_CONTEXT_CHARS:
        raise InvalidMemory(
            f"context must be text of at most {MAX_CONTEXT_CHARS} characters", "pass what the memory replies to"
        )
    text, masked = mask_secrets(strip_private(context))
    return clip(text, CONTEXT_CHARS), masked


def check_attributes(tags: Any, importance: Any, kind: Any) -> tuple[list[str], float, str]:
    """Validated (tags, importance, kind). Raises InvalidMemory."""
    if isinstance(tags, str):
        tags = [t for t in re.split(r"[,\s]+", tags) if t]
    if not isinstance(tags, list) or len(tags) > MAX_TAGS or not all(isinstance(t, str) and TAG.match(t) for t in tags):
        raise InvalidMemory(f"tags must be up to {MAX_TAGS} words of letters, digits, ./:_-", "e.g. tags ops,deploy")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
        raise InvalidMemory("importance must be a number from 0 to 1", "e.g. 0.8 for something to keep in mind")
    if not isinstance(kind, str) or not KIND.match(kind):
        raise InvalidMemory("kind must be one short lowercase word", "e.g. fact, decision, preference, task, note")
    return sorted({t.lower() for t in tags}), float(importance), kind


def normalized_text(text: str) -> str:
    """The text as the exact-duplicate check reads it: case, spacing and the punctuation around words
    ignored. A text of punctuation only keeps it ("???" is not "!!!")."""
    words = [word.strip(EDGE_PUNCTUATION) for word in text.lower().split()]
    return " ".join(word for word in words if word) or " ".join(text.lower().split())


def content_hash(text: str) -> str:
    return _sha256(normalized_text(text))


def content_hashes(text: str) -> tuple[str, str]:
    """The hash and the one memories stored before punctuation was ignored carry (case and spacing
    only): both find an exact duplicate, without rewriting the stored rows."""
    return content_hash(text), _sha256(" ".join(text.lower().split()))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def exact_duplicates(conn, text: str, context: str) -> list[tuple[int, int | None]]:
    """(source id, superseded by) of the memories stored with this text, up to case, spacing and
    punctuation, in the same context."""
    rows = conn.execute(
        "SELECT source_id, superseded_by FROM agent_memories WHERE content_hash IN (?, ?) ORDER BY source_id",
        content_hashes(text),
    ).fetchall()
    in_context = _in_context(conn, [row[0] for row in rows], context)
    return [(row[0], row[1]) for row in rows if row[0] in in_context]


def memory_document(text: str, key: str, when: float, attributes: dict[str, Any]) -> Document:
    """A memory as a document. Its chunks' breadcrumb is its first line and its day, then " · re: " and
    its context if it has one (chunking/turns.py: indexed for words, left out of the vector)."""
    first_line = text.split("\n", 1)[0]
    title = first_line if len(first_line) <= 80 else first_line[:79] + "…"
    crumb = f"{title} · {(iso_time(when) or '')[:10]}"
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


def _near_duplicate(
    store: Store, text: str, similar: dict[int, float], context: str, updated: list[int]
) -> tuple[int, float] | None:
    """(id, similarity) of the memory the new text says again in other words, if one is close enough
    in the same context and has the same words in the same order (updates.says_the_same) and the same
    numbers, dates, times and identifiers: an embedding barely sees those ("booked for 14:00 on
    2026-12-08" and "... 10:00 on 2026-12-09" scored 0.987, "gym on Monday" and "on Tuesday" 0.987)
    nor word order ("I prefer spaces over tabs" after "tabs over spaces" scored 0.982), and merging
    would lose the new one. A restated fact with another value ("the timeout is 60 s" after "30 s") is
    an update, not a duplicate, however close."""
    close = [i for i, score in similar.items() if score >= MERGE_SIMILARITY and i not in updated]
    close = _in_context(store.conn, close, context)
    if not close:
        return None
    values = value_words(text)
    texts = memory_texts(store, sorted(close))
    same = [i for i in close if value_words(texts.get(i, "")) == values and says_the_same(texts.get(i, ""), text)]
    return max(((i, similar[i]) for i in same), key=lambda item: item[1], default=None)


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


def _in_context(conn, source_ids: list[int], context: str) -> set[int]:
    """Those of the memories that were stored with the same context (both none, or the same words)."""
    if not source_ids:
        return set()
    marks = ",".join("?" * len(source_ids))
    rows = conn.execute(
        f"SELECT id, json_extract(metadata, '$.context') FROM sources WHERE id IN ({marks})", source_ids
    )
    wanted = " ".join(context.lower().split())
    return {source_id for source_id, stored in rows if " ".join((stored or "").lower().split()) == wanted}


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


def _similarities(store: Store, text: str, vector, embedder: "Embedder | None") -> dict[int, float]:
    """source id -> similarity of every current memory to the new text."""
    if vector is not None:
        from crossmodalrag.index.embeddings import model_row

        model_id = model_row(store, embedder.identity)
        rows = store.conn.execute(
            "SELECT c.source_id, v.vector FROM agent_memories m JOIN chunks c ON c.source_id = m.source_id"
            " JOIN chunk_vectors v ON v.chunk_id = c.id AND v.model_id = ? AND v.piece = 0"
            " WHERE m.superseded_by IS NULL",
            (model_id,),
        ).fetchall()

        best: dict[int, float] = {}
        for source_id, blob in rows:
            score = float(store.decode_vector(blob) @ vector)
            best[source_id] = max(score, best.get(source_id, -1.0))
        return best
    words = word_set(text)
    bodies: dict[int, list[str]] = {}
    for source_id, chunk in store.conn.execute(
        "SELECT c.source_id, c.text FROM agent_memories m JOIN chunks c ON c.source_id = m.source_id"
        " WHERE m.superseded_by IS NULL ORDER BY c.source_id, c.chunk_index"
    ):
        # The body only: a breadcrumb adds the day and the context, which are not the memory's words.
        bodies.setdefault(source_id, []).append(chunk.split("\n", 1)[-1])
    return {source_id: jaccard(words, word_set(" ".join(parts))) for source_id, parts in bodies.items()}


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


def _link(conn, source_id: int, similar: dict[int, float]) -> list[dict[str, Any]]:
    closest = sorted(((s, i) for i, s in similar.items() if s >= LINK_SIMILARITY), reverse=True)[:MAX_LINKS]
    if closest:
        conn.executemany(
            "INSERT OR REPLACE INTO agent_memory_links (source_id, target_id, relation, similarity)"
            " VALUES (?, ?, 'similar', ?)",
            [(source_id, target, score) for score, target in closest],
        )
    return [{"id": target, "similarity": round(score, 4)} for score, target in closest]


def restated(store: Store, text: str, similar: dict[int, float], floor: float) -> list[int]:
    """The memories whose fact `text` restates with another value (agent/updates.py), among those at
    least `floor` similar (the same subject is also close in meaning; two turns of one speaker are not)."""
    candidates = [i for i in sorted(similar, key=lambda i: -similar[i]) if similar[i] >= floor][:UPDATE_CANDIDATES]
    if not candidates:
        return []
    texts = memory_texts(store, candidates)
    return sorted(old for old, old_text in texts.items() if restates_with_new_value(old_text, text))


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
