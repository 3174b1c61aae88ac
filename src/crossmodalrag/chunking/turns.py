"""Conversation turns: each turn is a chunk (a long one is split at sentence boundaries), carrying
its speaker, time and the format's own turn id, so a citation leads back to the exact turn."""

from __future__ import annotations

import hashlib

from crossmodalrag.chunking.text import split_span
from crossmodalrag.types import Chunk, Document, iso_time


def chunk_turns(doc: Document, first_turn: int = 0) -> list[Chunk]:
    """Chunks of the document's turns from `first_turn` on (`doc.metadata["_turns"]`: spans of
    [start, end, speaker, turn id, unix time]). The breadcrumb names the session and the day."""
    chunks = []
    for index, (start, end, speaker, turn_id, timestamp) in enumerate(doc.metadata["_turns"]):
        if index < first_turn:
            continue
        when = iso_time(timestamp if timestamp is not None else doc.timestamp)
        crumb = f"{doc.title} · {when[:10]}" if when else doc.title
        metadata = {"turn": index, "turn_id": turn_id, "speaker": speaker, "digest": turn_digest(doc.text[start:end])}
        if timestamp is not None:
            metadata["time"] = timestamp
        for s, e in split_span(doc.text, start, end):
            chunks.append(Chunk(f"{crumb}\n{doc.text[s:e]}", f"{doc.locator} · {turn_id}", s, e, dict(metadata)))
    return chunks


def turn_digest(text: str) -> str:
    """What tells a stored turn from a changed one when a transcript is read again."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
