"""Chunking a commit: its message, then its diff hunks, each carrying its file header.

Small hunks of the same file are grouped up to the chunk size; a large hunk is split at line
boundaries and each piece repeats the file header and the hunk's `@@` line.
"""

from __future__ import annotations

import re

from crossmodalrag.chunking.text import LINE_BOUNDARIES, MAX_CHUNK_CHARS, split_span
from crossmodalrag.types import Chunk, Document

FILE_START = re.compile(r"^diff --(?:git|cc) ", re.M)  # --cc: a merge's combined diff (what the merge itself wrote)
HUNK_START = re.compile(r"^@@[^\n]*@@.*$", re.M)
DIFF_LEFT_OUT = "Diff left out:"  # the connector's line in place of an oversized file's hunks


def chunk_diff(doc: Document) -> list[Chunk]:
    """The commit message as one chunk (split if long), then one or more chunks per changed file."""
    message_end = message_length(doc)
    crumb = f"{doc.locator}: {doc.title}"
    chunks = [
        Chunk(text=f"{crumb}\n{doc.text[s:e]}", locator=doc.locator, char_start=s, char_end=e)
        for s, e in split_span(doc.text, 0, message_end)
    ]
    first_file = FILE_START.search(doc.text, message_end)
    if first_file is None:
        return chunks
    start = first_file.start()
    for _, path, piece in file_diffs(doc.text[start:]):
        chunks.extend(_file_chunks(doc, crumb, path, start, start + len(piece)))
        start += len(piece)
    return chunks


def message_length(doc: Document) -> int:
    """Where a commit's message ends: the connector says (a message may quote a `diff --git` line),
    else at its first file's diff."""
    if "_message_chars" in doc.metadata:
        return doc.metadata["_message_chars"]
    first_file = FILE_START.search(doc.text)
    return first_file.start() if first_file else len(doc.text)


def file_diffs(diff: str) -> list[tuple[str, str, str]]:
    """(path before, path after, its text) of each file in a commit's diff."""
    starts = [match.start() for match in FILE_START.finditer(diff)]
    ends = [*starts[1:], len(diff)] if starts else []
    pieces = [diff[start:end] for start, end in zip(starts, ends, strict=True)]
    return [(*_diff_paths(piece), piece) for piece in pieces]


def _diff_paths(piece: str) -> tuple[str, str]:
    """(path before, path after) of one file's diff. Its `diff --git a/X b/Y` line is ambiguous when a
    path holds " b/", so the lines after it decide: `rename from`/`copy from`, `--- a/X`, and their
    counterparts (quoted as C strings when a path holds a quote, a tab or a control character; git ends
    `---`/`+++` lines with a tab when the path holds a space). A binary or mode-only change has none of
    them, and its header names one path twice."""
    header, _, rest = piece.partition("\n")
    found: dict[str, str] = {}
    for line in rest.split("\n"):
        if line.startswith("@@"):
            break
        for side, prefix in NAMING_LINES:
            if line.startswith(prefix):
                found[side] = _unquote(line[len(prefix) :])
        for side, prefix in FILE_LINES:
            if line.startswith(prefix) and side not in found:
                path = _unquote(line[4:].rstrip("\t"))
                found[side] = path[2:] if path[:2] in ("a/", "b/") else path
    if not found and header.startswith("diff --cc "):
        found = {"new": _unquote(header[len("diff --cc ") :])}  # a combined diff names the merge's path alone
    if not found:
        found = dict(zip(("old", "new"), _header_paths(header[len("diff --git ") :]), strict=True))
    old = found.get("old") or found["new"]
    return old, found.get("new") or old


NAMING_LINES = (("old", "rename from "), ("new", "rename to "), ("old", "copy from "), ("new", "copy to "))
FILE_LINES = (("old", "--- a/"), ("new", "+++ b/"), ("old", '--- "a/'), ("new", '+++ "b/'))


def _header_paths(text: str) -> tuple[str, str]:
    """Both paths of a `diff --git` line without other clues: two quoted strings, or the one path
    twice (`a/P b/P`); else split at the first " b/", as good a guess as any."""
    if text.startswith('"'):
        first, end = _quoted(text, 0)
        after = end + 2  # past the closing quote and the space
        second = _quoted(text, after)[0] if text[after : after + 1] == '"' else text[after:]
        return first[2:], second[2:]
    half = (len(text) - 1) // 2
    if text[:2] == "a/" and text[half : half + 3] == " b/" and text[2:half] == text[half + 3 :]:
        return text[2:half], text[half + 3 :]
    before, _, after = text[2:].partition(" b/")
    return before, after


def _unquote(text: str) -> str:
    """A path as git wrote it: as is, or a C-quoted string ("a\\tb", octal escapes for bytes)."""
    return _quoted(text, 0)[0] if text.startswith('"') else text


ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The C-quoted string opening at text[start], and the index of its closing quote."""
    out, index = bytearray(), start + 1
    while index < len(text) and text[index] != '"':
        char = text[index]
        if char == "\\" and text[index + 1 : index + 4].isdigit():
            out.append(int(text[index + 1 : index + 4], 8) & 0xFF)
            index += 4
        elif char == "\\" and index + 1 < len(text):
            out.append(ESCAPES.get(text[index + 1], ord(text[index + 1]) & 0xFF))
            index += 2
        else:
            out += char.encode("utf-8")
            index += 1
    return out.decode("utf-8", "replace"), index


def _file_chunks(doc: Document, crumb: str, path: str, start: int, end: int) -> list[Chunk]:
    text = doc.text
    hunks = list(HUNK_START.finditer(text, start, end))
    header = text[start : hunks[0].start() if hunks else end].rstrip("\n")
    header = "\n".join(
        line
        for line in header.splitlines()
        if line.startswith(("---", "+++", "Binary", "rename", "new file", "deleted file", DIFF_LEFT_OUT))
    )
    shown = _one_line(path)
    locator = f"{doc.locator} {shown}"
    lead = f"{crumb} ({shown})\n{header}\n"
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


def _one_line(path: str) -> str:
    """The path with its line breaks escaped as git quotes them (`new\\nline.txt`): raw, a newline in a
    file's name splits the chunk's first line, and its tail reads as the first line of the hunk."""
    return "".join(char.encode("unicode_escape").decode() if char.splitlines() != [char] else char for char in path)


def _chunk(doc: Document, lead: str, locator: str, path: str, start: int, end: int) -> Chunk:
    body = doc.text[start:end].rstrip()
    return Chunk(
        text=lead + body, locator=locator, char_start=start, char_end=start + len(body), metadata={"path": path}
    )
