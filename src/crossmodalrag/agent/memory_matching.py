"""Which stored memories a new one says again, restates with another value, or is close to: exact
duplicates by a hash of the normalized text, near ones and links by cosine (word-set Jaccard without
an embedding model), restated facts by agent/updates.py. Apart from memories.py, which stores, merges,
links and supersedes by what these find; agent/relink.py derives the links and marks again with them."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from crossmodalrag.agent.browse import memory_texts
from crossmodalrag.agent.updates import restates_with_new_value, says_the_same
from crossmodalrag.retrieval.diversify import jaccard, word_set
from crossmodalrag.retrieval.values import EDGE_PUNCTUATION, value_words
from crossmodalrag.store import Store

if TYPE_CHECKING:
    from crossmodalrag.index.embed import Embedder

MERGE_SIMILARITY = 0.95
LINK_SIMILARITY = 0.75
MAX_LINKS = 5
UPDATE_CANDIDATES = 20  # the most similar memories checked for a restated fact
# ... and how similar they must be at least: MiniLM cosines of restated facts were 0.49-0.98 on
# bench/agent_updates.py's pairs; storing LoCoMo turns one by one without this floor marked 281 of 419
# as superseded (a speaker's turns share their first word).
UPDATE_SIMILARITY = {"cosine": 0.45, "jaccard": 0.2}


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


def near_duplicate(
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


def similarities(store: Store, text: str, vector, embedder: "Embedder | None") -> dict[int, float]:
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


def link(conn, source_id: int, similar: dict[int, float]) -> list[dict[str, Any]]:
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
