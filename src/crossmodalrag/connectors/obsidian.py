"""What Obsidian hides in its reading view is not part of a note's stored text: `%%comments%%`
(an Excalidraw drawing keeps its JSON in one), block ids at line ends (`^cake42`), and an Excalidraw
file's banner. Removed as `<private>` spans are: line breaks kept, so the lines around stay apart
and a heading after a comment is still a heading; offsets then follow the stored text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from crossmodalrag.chunking.markdown import code_ranges

COMMENT_MARK = "%%"
# A block id ends its line (or is the line): `A paragraph. ^tapir1`, or `^table1` under a table.
BLOCK_ID = re.compile(r"(?:^|[ \t]+)\^[A-Za-z0-9-]+[ \t]*(?=\r?$)", re.M)
# The Excalidraw plugin's line asking to switch views, above its "Text Elements".
EXCALIDRAW_BANNER = re.compile(r"^==⚠.*⚠==[ \t]*\r?$", re.M)
EXCALIDRAW_SUFFIX = ".excalidraw.md"
CANVAS_SUFFIX = ".canvas"
# Where Obsidian's Templates core plugin and the Templater plugin keep their settings: (file, key).
TEMPLATE_SETTINGS = (
    (".obsidian/templates.json", "folder"),
    (".obsidian/plugins/templater-obsidian/data.json", "templates_folder"),
)
# A title that is a template's placeholder (`# {{title}}`, `# <% tp.file.title %>`): no note's name.
PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}|<%.*%>")


def hidden_removed(text: str, body_start: int, name: str) -> str:
    """The note's text without what Obsidian's reading view hides, below its frontmatter; markup in
    code stays (a Mermaid `%%` or a `^` in a regex is code)."""
    body = text[body_start:]
    if COMMENT_MARK in body:
        body = _blanked(body, _comments(body), " ")
    if "^" in body:
        body = _blanked(body, _outside(BLOCK_ID, body), "")
    if is_excalidraw(name):
        body = _blanked(body, _outside(EXCALIDRAW_BANNER, body), "")
    return text[:body_start] + body


def is_excalidraw(name: str) -> bool:
    """An Excalidraw drawing: its labels ("Text Elements") are its text, and its file name its title."""
    return name.lower().endswith(EXCALIDRAW_SUFFIX)


def excalidraw_title(name: str) -> str:
    return name[: -len(EXCALIDRAW_SUFFIX)]


def _comments(text: str) -> list[tuple[int, int]]:
    """The `%%…%%` spans opened outside code. An unclosed `%%` stays text: Obsidian would hide the
    rest of the note, but a stray `%%` must not lose it from memory."""
    spans, code, at = [], code_ranges(text), 0
    while (start := text.find(COMMENT_MARK, at)) >= 0:
        inside = next((end for begin, end in code if begin <= start < end), None)
        if inside is not None:
            at = inside
            continue
        end = text.find(COMMENT_MARK, start + len(COMMENT_MARK))
        if end < 0:
            break
        spans.append((start, end + len(COMMENT_MARK)))
        at = end + len(COMMENT_MARK)
    return spans


def _outside(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    code = code_ranges(text)
    return [m.span() for m in pattern.finditer(text) if not any(b <= m.start() < e for b, e in code)]


def _blanked(text: str, spans: list[tuple[int, int]], gap: str) -> str:
    """The text with each span replaced by its line breaks, or `gap` if it has none (a space
    between words: `a%%x%%b` is `a b`)."""
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        breaks = "".join(c for c in text[start:end] if c in "\r\n")
        out += [text[at:start], breaks or gap]
        at = end
    out.append(text[at:])
    return "".join(out)


def templates_folders(vault: Path) -> list[str]:
    """The vault's templates folders (relative, as configured), for the ingest to leave out: a template
    stored as a note was found as `{{title}}`, its placeholders answering questions. Unreadable or
    odd settings name none."""
    found = []
    for settings, key in TEMPLATE_SETTINGS:
        try:
            folder = json.loads((vault / settings).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(folder, str) and folder.strip("/ ") and ".." not in folder.split("/"):
            found.append(folder.strip("/ "))
    return list(dict.fromkeys(found))
