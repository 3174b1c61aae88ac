"""Header-aware markdown chunking.

Every chunk starts with a breadcrumb line `note title > heading > subheading`, so a section that is
only a formula or a table still says what it is about. Frontmatter is metadata, never a chunk; a
heading with no body of its own yields nothing; headings inside fenced code are not headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crossmodalrag.chunking.text import split_span
from crossmodalrag.types import Chunk, Document

FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^[ \t]{0,3}(```+|~~~+)")
DATE_LINE = re.compile(r"\A\s*Date:[ \t]*(\d{4}-\d{2}-\d{2})\b[^\n]*(?:\n|\Z)", re.I)
CODE = re.compile(r"^[ \t]{0,3}(```+|~~~+).*?^[ \t]{0,3}\1[ \t]*$|`[^`\n]+`", re.S | re.M)


def split_frontmatter(text: str) -> tuple[str | None, int]:
    """(frontmatter YAML or None, offset where the body starts)."""
    match = FRONTMATTER.match(text)
    return (match.group(1), match.end()) if match else (None, 0)


def leading_date(text: str, body_start: int) -> tuple[str | None, int]:
    """A leading `Date: YYYY-MM-DD` line is metadata: (the date or None, offset after it)."""
    match = DATE_LINE.match(text[body_start:])
    return (match.group(1), body_start + match.end()) if match else (None, body_start)


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code removed (links and tags in code are not links)."""
    return CODE.sub(" ", text)


@dataclass
class Section:
    headings: list[str]
    start: int  # body offsets in the document text
    end: int


def sections(text: str, body_start: int) -> list[Section]:
    """The document's sections in order, each with its heading path and body span."""
    found: list[Section] = []
    stack: list[tuple[int, str]] = []
    fence = None
    current = Section([], body_start, len(text))
    offset = body_start
    for line in text[body_start:].splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = FENCE.match(stripped)
        if fence_match:
            marker = fence_match.group(1)[0] * 3
            fence = None if fence == marker else (fence or marker)
        heading = None if fence or fence_match else HEADING.match(stripped)
        if heading:
            current.end = offset
            found.append(current)
            level = len(heading.group(1))
            stack = [(lvl, name) for lvl, name in stack if lvl < level] + [(level, heading.group(2))]
            current = Section([name for _, name in stack], offset + len(line), len(text))
        offset += len(line)
    current.end = len(text)
    found.append(current)
    return found


def breadcrumb(title: str, headings: list[str]) -> list[str]:
    """Title first, then the heading path; a top heading that repeats the title is dropped."""
    path = list(headings)
    if path and path[0].strip().casefold() == title.strip().casefold():
        path = path[1:]
    return [title] + path


def chunk_markdown(doc: Document) -> list[Chunk]:
    """Chunks of a markdown note, one or more per non-empty section."""
    _, body_start = split_frontmatter(doc.text)
    _, body_start = leading_date(doc.text, body_start)
    chunks = []
    for section in sections(doc.text, body_start):
        crumbs = breadcrumb(doc.title, section.headings)
        heading_path = " > ".join(crumbs[1:])
        locator = f"{doc.locator}#{heading_path}" if heading_path else doc.locator
        for start, end in split_span(doc.text, section.start, section.end):
            chunks.append(
                Chunk(
                    text=" > ".join(crumbs) + "\n" + doc.text[start:end],
                    locator=locator,
                    char_start=start,
                    char_end=end,
                    metadata={"headings": section.headings} if section.headings else {},
                )
            )
    return chunks
