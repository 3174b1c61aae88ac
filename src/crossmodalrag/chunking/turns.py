"""Conversation turns: each turn is a chunk (a long one is split at sentence boundaries), carrying
its speaker, time and the format's own turn id, so a citation leads back to the exact turn."""

from __future__ import annotations

import hashlib

from crossmodalrag.chunking.text import split_span
from crossmodalrag.types import Chunk, Document, iso_time

CONTEXT_CHARS = 160  # of the previous turn, in each turn's breadcrumb
# In each conversation's fingerprint (Document.extractor): bump it when the turn chunks change, and
# only conversations are re-derived (CHUNKER_VERSION would redo every note and commit as well).
TURNS_VERSION = "2"


def clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def chunk_turns(doc: Document, first_turn: int = 0) -> list[Chunk]:
    """Chunks of the document's turns from `first_turn` on (`doc.metadata["_turns"]`: spans of
    [start, end, speaker, turn id, unix time]). The breadcrumb names the session and the day."""
    chunks = []
    turns = doc.metadata["_turns"]
    for index, (start, end, speaker, turn_id, timestamp) in enumerate(turns):
        if index < first_turn:
            continue
        when = iso_time(timestamp if timestamp is not None else doc.timestamp)
        crumb = f"{doc.title} · {when[:10]}" if when else doc.title
        if index and CONTEXT_CHARS:
            # A reply ("Yes, I went yesterday!") is findable only with what it answers: the previous
            # turn, clipped, rides in the breadcrumb line (indexed, embedded, not part of the body).
            crumb += " · re: " + clip(doc.text[turns[index - 1][0] : turns[index - 1][1]], CONTEXT_CHARS)
        metadata = {"turn": index, "turn_id": turn_id, "speaker": speaker, "digest": turn_digest(doc.text[start:end])}
        if timestamp is not None:
            metadata["time"] = timestamp
        for s, e in split_span(doc.text, start, end):
            chunks.append(Chunk(f"{crumb}\n{doc.text[s:e]}", f"{doc.locator} · {turn_id}", s, e, dict(metadata)))
    return chunks


def turn_digest(text: str) -> str:
    """What tells a stored turn from a changed one when a transcript is read again."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
