"""What the memory levels need to know about an L0 source: its project, its text, its chunks."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path


@dataclass
class SourceRow:
    id: int
    uri: str
    source_type: str
    fingerprint: str
    timestamp: float | None
    title: str
    metadata: dict

    @property
    def project(self) -> str:
        return project_of(self.uri, self.source_type, self.metadata)


@dataclass
class ChunkRow:
    id: int
    text: str
    char_start: int
    char_end: int
    said_at: float | None = None  # its own time, when not its source's: a chat turn's, a dated journal entry's

    @property
    def body(self) -> str:
        """The chunk's own text without its breadcrumb line (which repeats the title)."""
        return self.text.split("\n", 1)[1] if "\n" in self.text else self.text


# The one project of every `mem remember` / memory_store memory (source type "memory", agent/memories.py).
# Its uri (`memory:<32 hex>`) made each memory its own project, labelled by that id in the timeline.
AGENT_MEMORIES = "agent memories"


def project_of(uri: str, source_type: str, metadata: dict) -> str:
    """What groups a source's events into episodes: its repository, its conversation, agent memories
    together, else its folder. A folder mixing notes, PDFs and screenshots is one project, so its
    episodes are cross-modal."""
    if source_type == "memory":
        return AGENT_MEMORIES
    if source_type == "commit" and metadata.get("repo"):
        return str(metadata["repo"])
    if source_type == "conversation":
        return str(metadata.get("session") or metadata.get("session_id") or uri)
    return str(Path(uri).parent) if "/" in uri or "\\" in uri else uri


def project_name(project: str) -> str:
    return Path(project).name or project


def all_sources(conn: sqlite3.Connection) -> list[SourceRow]:
    """Every source, newest first (the order extraction works in)."""
    rows = conn.execute(
        "SELECT id, uri, source_type, fingerprint, timestamp, title, metadata FROM sources"
        " ORDER BY timestamp IS NULL, timestamp DESC, id DESC"
    )
    return [SourceRow(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6] or "{}")) for r in rows]


def chunks_of(conn: sqlite3.Connection, source_id: int) -> list[ChunkRow]:
    rows = conn.execute(
        "SELECT id, text, char_start, char_end, said_at FROM chunks WHERE source_id = ? ORDER BY chunk_index",
        (source_id,),
    )
    return [ChunkRow(*row) for row in rows]


def text_hash(chunks: list[ChunkRow]) -> str:
    """A hash of the source text the chunks cover, independent of where they cut it: a re-chunk
    keeps it, so events are re-anchored to the new chunks instead of extracted again."""
    digest, covered = hashlib.sha256(), 0
    for chunk in sorted(chunks, key=lambda c: (c.char_start, c.char_end)):
        if chunk.char_end <= covered:
            continue
        span = chunk.char_end - chunk.char_start
        body = chunk.text[-span:] if span > 0 else ""
        digest.update(body[max(0, covered - chunk.char_start) :].encode("utf-8", "surrogatepass"))
        covered = chunk.char_end
    return digest.hexdigest()[:32]


def chunk_digest(chunk: ChunkRow) -> str:
    """What tells whether a chunk an event rests on is still there after an edit: an edit writes every
    chunk anew (new ids), so its text is all that can be compared."""
    return hashlib.sha256(chunk.text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def windows(chunks: list[ChunkRow], max_chars: int) -> list[list[ChunkRow]]:
    """Consecutive chunks grouped up to max_chars of body each (one extraction call per group), in
    as few groups as fit and of about equal size: a chunk goes to the share of the source its middle
    falls in. A chat of 4,700 characters is cut in two halves, not 4,500 + 200 (a call that reads the
    whole prompt for one turn, beside a window holding every event of the session)."""
    lengths = [min(len(chunk.body), max_chars) for chunk in chunks]
    share = sum(lengths) / max(1, math.ceil(sum(lengths) / max_chars))
    groups: list[list[ChunkRow]] = []
    size = before = 0
    last = -1
    for chunk, length in zip(chunks, lengths, strict=True):
        index = int((before + length / 2) // share) if share else 0
        before += length
        if groups and index == last and size + length <= max_chars:
            groups[-1].append(chunk)
            size += length
        else:
            groups.append([chunk])
            size, last = length, index
    return groups


def events_filter(store, source: str) -> tuple[str, list]:
    """The WHERE clause picking the events of the source(s) `source` names: by source id for one in
    memory (its events' uri is the one they were drawn under until the next build re-anchors them),
    by uri for one gone. Raises CMRAGError when it names none."""
    from crossmodalrag.errors import CMRAGError
    from crossmodalrag.versioning.history import known_source

    try:
        uri = known_source(store.conn, source)
    except CMRAGError as unknown:
        ids = _ids_under_path(store, source)
        if not ids:
            raise unknown from None
    else:
        ids = [row[0] for row in store.conn.execute("SELECT id FROM sources WHERE uri = ?", (uri,))]
        if not ids:
            return "source_uri = ?", [uri]
    return f"source_id IN ({','.join('?' * len(ids))})", ids


def _ids_under_path(store, path: str) -> list[int]:
    """The sources in memory read from a file or folder as `mem forget --path` finds them: a chat
    export's file holds one source per session (`<file>@<session>`), none of them named by the path."""
    from pathlib import Path

    from crossmodalrag.errors import CMRAGError
    from crossmodalrag.forget import find_sources

    try:
        return [found.id for found in find_sources(store, path=Path(path)) if found.id is not None]
    except CMRAGError:
        return []
