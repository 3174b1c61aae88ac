"""Chunking a commit: its message, then its diff hunks, each carrying its file header.

Small hunks of the same file are grouped up to the chunk size; a large hunk is split at line
boundaries and each piece repeats the file header and the hunk's `@@` line.
"""

from __future__ import annotations

import re

from crossmodalrag.chunking.text import LINE_BOUNDARIES, MAX_CHUNK_CHARS, split_span
from crossmodalrag.types import Chunk, Document

FILE_START = re.compile(r"^diff --git a/(.*?) b/(.*)$", re.M)
HUNK_START = re.compile(r"^@@[^\n]*@@.*$", re.M)


def chunk_diff(doc: Document) -> list[Chunk]:
    """The commit message as one chunk (split if long), then one or more chunks per changed file."""
    first_file = FILE_START.search(doc.text)
    message_end = first_file.start() if first_file else len(doc.text)
    crumb = f"{doc.locator}: {doc.title}"
    chunks = [
        Chunk(text=f"{crumb}\n{doc.text[s:e]}", locator=doc.locator, char_start=s, char_end=e)
        for s, e in split_span(doc.text, 0, message_end)
    ]
    files = list(FILE_START.finditer(doc.text))
    for index, match in enumerate(files):
        end = files[index + 1].start() if index + 1 < len(files) else len(doc.text)
        chunks.extend(_file_chunks(doc, crumb, match.group(2), match.start(), end))
    return chunks


def _file_chunks(doc: Document, crumb: str, path: str, start: int, end: int) -> list[Chunk]:
    text = doc.text
    hunks = list(HUNK_START.finditer(text, start, end))
    header = text[start : hunks[0].start() if hunks else end].rstrip("\n")
    header = "\n".join(
        line
        for line in header.splitlines()
        if line.startswith(("---", "+++", "Binary", "rename", "new file", "deleted file"))
    )
    locator = f"{doc.locator} {path}"
    lead = f"{crumb} ({path})\n{header}\n"
    if not hunks:
        return [Chunk(text=lead.rstrip("\n"), locator=locator, char_start=start, char_end=end, metadata={"path": path})]
    chunks: list[Chunk] = []
    group_start = group_end = hunks[0].start()
    for index, hunk in enumerate(hunks):
        hunk_end = hunks[index + 1].start() if index + 1 < len(hunks) else end
        if hunk_end - group_start > MAX_CHUNK_CHARS and group_end > group_start:
            chunks.append(_chunk(doc, lead, locator, path, group_start, group_end))
            group_start = hunk.start()
        group_end = hunk_end
        if group_end - group_start > MAX_CHUNK_CHARS:
            at_line = hunk.group(0) + "\n"
            for s, e in split_span(text, group_start, group_end, MAX_CHUNK_CHARS, LINE_BOUNDARIES):
                prefix = "" if text.startswith("@@", s) else at_line
                chunks.append(_chunk(doc, lead + prefix, locator, path, s, e))
            group_start = group_end
    if group_end > group_start:
        chunks.append(_chunk(doc, lead, locator, path, group_start, group_end))
    return chunks


def _chunk(doc: Document, lead: str, locator: str, path: str, start: int, end: int) -> Chunk:
    body = doc.text[start:end].rstrip()
    return Chunk(
        text=lead + body, locator=locator, char_start=start, char_end=start + len(body), metadata={"path": path}
    )
