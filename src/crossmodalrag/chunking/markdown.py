"""Header-aware markdown chunking.

Every chunk starts with a breadcrumb line `note title > heading > subheading`, so a section that is
only a formula or a table still says what it is about. Frontmatter is metadata, not a chunk (unless
it is all a note holds), and so are tags alone above subsections; a heading with no body of its own
yields nothing; headings inside fenced code are not headings.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from crossmodalrag.chunking.text import split_span
from crossmodalrag.types import Chunk, Document
from crossmodalrag.written_dates import parse_date

FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S | re.M)
# The heading text keeps its closing `#`s here; heading_name strips them in Python, because a lazy
# `(.*?)[ \t]*#*[ \t]*$` backtracks cubically on a long line of spaces (4,000 spaces: 109 s).
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*)$")  # up to three spaces before it, as in CommonMark
FENCE = re.compile(r"^[ \t]{0,3}(```+|~~~+)(.*)$")
CANDIDATE_LINE = re.compile(
    r"^(?:[ \t]{0,3}(?:```|~~~)| {0,3}#{1,6}[ \t]|[ \t]{0,3}(?:={2,}|-{2,})[ \t]*\r?$)[^\n]*", re.M
)
# A setext heading: a line of text underlined with `===` (level 1) or `---` (level 2). The line above
# must be plain text: after a list item, quote, table row or blank line `---` is a rule, not a heading.
SETEXT_UNDERLINE = re.compile(r"[ \t]{0,3}(={2,}|-{2,})[ \t]*")
NOT_SETEXT_TEXT = re.compile(r"\s*\Z|[ \t]{4}|[ \t]{0,3}(?:[-*+>|<]|\d{1,9}[.)]|#{1,6}(?:[ \t]|\Z)|```|~~~)")
# Headings and the title are repeated in every chunk's breadcrumb, locator and metadata: a 10 MB
# heading line would otherwise be copied into each of the ~8,000 chunks of the body under it.
MAX_HEADING_CHARS = 200
# A property name of this many words is the start of a sentence ("This is a thought about gardening:"):
# properties are named in one or two ("tags", "date created").
PROSE_KEY_WORDS = 3
DATE_LINE = re.compile(r"\A\s*Date:([^\n]*)(?:\n|\Z)", re.I)  # stripped in Python: no backtracking
TITLE_LINE = re.compile(r"\A\s*#[ \t][^\n]*\n")  # the `# Title` a meeting note's `Date:` line sits under
FENCE_LINE = re.compile(r"^[ \t]{0,3}(?:```|~~~)[^\n]*", re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")
SHOWN_LINK = re.compile(r"!?\[\[([^\[\]|\n]*)(?:\|([^\[\]\n]*))?\]\]")  # no `[` inside: see notes.WIKILINK
BLOCK_ID_END = re.compile(r"(?:\A|[ \t]+)\^[A-Za-z0-9-]+[ \t]*\Z")
# A tag starts with a letter, of any script (#über, #日本語), and runs over letters, digits, `_`, `/`,
# `-` and combining marks (see tag_end): `\w` stops at a mark, and cut #ฐานข้อมูล to ฐานข, #हिन्दी to ह.
TAG_START = re.compile(r"(?<![\w&#/])#(?=[^\W\d_])")


def split_frontmatter(text: str) -> tuple[str | None, int]:
    """(frontmatter YAML or None, offset where the body starts)."""
    match = FRONTMATTER.match(text)
    if not match or not _opens_a_mapping(match.group(1)):
        return None, 0
    return match.group(1), match.end()


def _opens_a_mapping(block: str) -> bool:
    """Does a block between `---` lines open as YAML's key-value mapping, as frontmatter does? A line
    of prose (Markdown: a rule, then a setext heading) or a `- item` list is the note's text, and
    dropping it as frontmatter lost it from memory. Judged by the first line, as a rule a typo later
    in real frontmatter does not turn it into text; an empty block is (empty) frontmatter."""
    for line in block.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith(("- ", "[")) or stripped == "-":
            return False
        if len(stripped.split(":", 1)[0].split()) >= PROSE_KEY_WORDS:
            return False  # "Note to self: call the vet" is a sentence, not a property named "Note to self"
        return stripped.startswith(("{", "? ")) or ": " in stripped or ":\t" in stripped or stripped.endswith(":")
    return True


def leading_date(text: str, body_start: int) -> tuple[str | None, int]:
    """A leading `Date:` line is metadata when it holds a date frontmatter would read (written_dates.py):
    (the date or None, offset after it)."""
    match = DATE_LINE.match(text[body_start:])
    if match is None or parse_date(written := match.group(1).strip()) is None:
        return None, body_start
    return written, body_start + match.end()


def written_date_line(text: str, body_start: int) -> str | None:
    """What the note's `Date:` line says, whether it leads the note or sits right under its `# Title`
    (the usual meeting-note layout: that one was passed over and the note dated by its file)."""
    body = text[body_start:]
    match = DATE_LINE.match(body)
    if match is None and (title := TITLE_LINE.match(body)) is not None:
        match = DATE_LINE.match(body[title.end() :])
    return match.group(1).strip() if match else None


def inline_tags(text: str) -> list[str]:
    """The `#tags` of a note's text, in order, composed (NFC): a decomposed `#über`, as text copied
    from a macOS file name is, is the same tag as one typed."""
    text = unicodedata.normalize("NFC", text)
    return [text[start.end() : tag_end(text, start.end())] for start in TAG_START.finditer(text)]


def tag_end(text: str, start: int) -> int:
    """Where the tag whose name starts at `start` ends."""
    end = start
    while end < len(text) and (text[end].isalnum() or text[end] in "_/-" or unicodedata.category(text[end])[0] == "M"):
        end += 1
    return end


def only_tags(text: str) -> bool:
    """Is the text nothing but tags ("#bug #ci #über"), the note's metadata rather than a chunk?"""
    words = text.replace("#", " #").split()
    return all(TAG_START.match(word) and tag_end(word, 1) == len(word) for word in words)


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code removed (links and tags in code are not links).

    Fences are matched line by line, as `sections` does (an unclosed fence runs to the end): one
    regex over the whole text rescanned the rest of the note for every unclosed fence.
    """
    if "`" not in text and "~~~" not in text:
        return text  # most notes: skip the scan entirely
    kept, start, fence = [], 0, None
    for line in FENCE_LINE.finditer(text):
        opened, _ = _fence_change(fence, line.group(0).rstrip("\r"))
        if fence is None and opened is not None:
            kept.append(text[start : line.start()])
        elif fence is not None and opened is None:
            kept.append(" ")
            start = line.end()
        fence = opened
    kept.append(" " if fence is not None else text[start:])
    return INLINE_CODE.sub(" ", "".join(kept))


def code_ranges(text: str) -> list[tuple[int, int]]:
    """Where fenced blocks (an unclosed one runs to the end) and inline code outside them are, as
    (start, end) offsets in order: markup there is code, not markup."""
    if "`" not in text and "~~~" not in text:
        return []
    fenced, fence, opened_at = [], None, 0
    for line in FENCE_LINE.finditer(text):
        opened, _ = _fence_change(fence, line.group(0).rstrip("\r"))
        if fence is None and opened is not None:
            opened_at = line.start()
        elif fence is not None and opened is None:
            fenced.append((opened_at, line.end()))
        fence = opened
    if fence is not None:
        fenced.append((opened_at, len(text)))
    inline, at = [], 0
    for start, end in [*fenced, (len(text), len(text))]:
        inline += [match.span() for match in INLINE_CODE.finditer(text, at, start)]
        at = end
    return sorted(fenced + inline)


def shown_links(text: str) -> str:
    """Wikilinks as Obsidian shows them (`[[Alpha|the alpha team]]` → the alpha team, `[[Alpha]]`
    → Alpha, `[[Alpha#Plan]]` → Alpha > Plan) and a block id at the end (`^cake42`) dropped: for the
    labels made of a heading (breadcrumbs, locators, titles), which read as Obsidian's own links do."""
    if "[[" in text:
        text = SHOWN_LINK.sub(lambda m: m.group(2) or m.group(1).replace("#^", " > ").replace("#", " > "), text)
    return BLOCK_ID_END.sub("", text) if "^" in text else text


def heading_name(raw: str) -> str:
    """A heading's text without trailing blanks and the optional closing run of `#`s, its links
    as shown, clipped."""
    return clip(shown_links(raw.rstrip(" \t").rstrip("#").rstrip(" \t")))


def clip(text: str, limit: int = MAX_HEADING_CHARS) -> str:
    """The text, cut to at most `limit` characters with an ellipsis if it was longer."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass
class Section:
    headings: list[str]
    start: int  # body offsets in the document text
    end: int
    heading_start: int = 0  # where its heading line starts

    def contains(self, other: "Section") -> bool:
        """Is `other` a subsection of this one?"""
        return len(other.headings) > len(self.headings) and other.headings[: len(self.headings)] == self.headings


def _fence_change(fence: str | None, line: str) -> tuple[str | None, bool]:
    """(the open fence after this line, is this line a fence line)."""
    match = FENCE.match(line)
    if not match:
        return fence, False
    run = match.group(1)
    if fence is None:
        return run, True
    # Only a run of the same character, at least as long, with nothing after it closes a fence.
    closes = run[0] == fence[0] and len(run) >= len(fence) and not match.group(2).strip()
    return (None if closes else fence), True


def sections(text: str, body_start: int) -> list[Section]:
    """The document's sections in order, each with its heading path and body span.

    Only lines that could be a heading or a fence are looked at (a regex finds them), not
    every line of the note: this was a sixth of the ingest time when done line by line.
    """
    found: list[Section] = []
    stack: list[tuple[int, str]] = []
    fence = None
    current = Section([], body_start, len(text))
    for candidate in CANDIDATE_LINE.finditer(text, body_start):
        line = candidate.group(0).rstrip("\r")
        fence, is_fence_line = _fence_change(fence, line)
        if fence or is_fence_line:
            continue
        heading = _heading(text, line, candidate.start(), body_start)
        if heading:
            level, name, heading_start = heading
            current.end = heading_start
            found.append(current)
            stack = [(lvl, kept) for lvl, kept in stack if lvl < level] + [(level, name)]
            body = min(candidate.end() + 1, len(text))  # past the newline
            current = Section([kept for _, kept in stack], body, len(text), heading_start)
    current.end = len(text)
    found.append(current)
    return found


def _heading(text: str, line: str, start: int, body_start: int) -> tuple[int, str, int] | None:
    """(level, name, where the heading starts) if the line at `start` is or ends a heading."""
    atx = HEADING.match(line)
    if atx:
        return len(atx.group(1)), heading_name(atx.group(2)), start
    underline = SETEXT_UNDERLINE.fullmatch(line)
    if not underline or start <= body_start:
        return None
    above_start = text.rfind("\n", body_start, start - 1) + 1 or body_start
    above = text[above_start : start - 1].rstrip("\r")
    if NOT_SETEXT_TEXT.match(above):
        return None
    return (1 if underline.group(1)[0] == "=" else 2), heading_name(above.strip()), above_start


def breadcrumb(title: str, headings: list[str]) -> list[str]:
    """Title first, then the heading path; a top heading that repeats the title is dropped."""
    path, title = list(headings), clip(title)
    if path and path[0].strip().casefold() == title.strip().casefold():
        path = path[1:]
    return [title] + path


def with_aliases(title: str, aliases: list[str] | None) -> str:
    """The breadcrumb's first crumb: the title, then the note's frontmatter aliases in parentheses
    (`Project Zeta (Skunkworks)`). Obsidian users name a note by its aliases, and a question asked
    by one was refused as mentioning nothing in memory; in the breadcrumb they are found by keyword
    and in meaning."""
    return f"{title} ({clip(', '.join(aliases))})" if aliases else title


def chunk_markdown(doc: Document) -> list[Chunk]:
    """Chunks of a markdown note, one or more per non-empty section."""
    _, body_start = split_frontmatter(doc.text)
    _, body_start = leading_date(doc.text, body_start)
    chunks = []
    found = sections(doc.text, body_start)
    seen: dict[str, int] = {}
    for index, section in enumerate(found):
        crumbs = breadcrumb(doc.title, section.headings)
        crumbs[0] = with_aliases(crumbs[0], doc.metadata.get("aliases"))
        heading_path = " > ".join(crumbs[1:])
        locator = f"{doc.locator}#{heading_path}" if heading_path else doc.locator
        # A heading that repeats (a "Notes" under every day) is numbered from its second time, so a
        # citation leads to the section it quotes rather than to the first of that name.
        if heading_path:
            seen[heading_path] = seen.get(heading_path, 0) + 1
            if seen[heading_path] > 1:
                locator += f" ({seen[heading_path]})"
        is_leaf = index + 1 == len(found) or not section.contains(found[index + 1])
        # Tags under the title, before the first subsection: a chunk of them said nothing and, short
        # and all title, outranked the sections under it.
        tags_only = not is_leaf and only_tags(doc.text[section.start : section.end])
        spans = [] if tags_only else split_span(doc.text, section.start, section.end)
        if not spans and section.headings and is_leaf:
            # A heading with nothing under it (a list of headings, a stub) is still searchable;
            # one that only introduces subsections is carried by their breadcrumbs instead.
            spans = split_span(doc.text, section.heading_start, section.start)
        metadata = {"headings": section.headings} if section.headings else {}
        if (day := section_day(section.headings)) is not None:
            metadata["time"] = day  # the chunk's own time (its said_at), as a chat turn's
        for start, end in spans:
            chunks.append(
                Chunk(
                    text=" > ".join(crumbs) + "\n" + doc.text[start:end],
                    locator=locator,
                    char_start=start,
                    char_end=end,
                    metadata=dict(metadata),
                )
            )
    return chunks or _frontmatter_chunks(doc)


def section_day(headings: list[str]) -> float | None:
    """The day the innermost dated heading names ("## 2024-03-05", "## March 5, 2024", "## 5. März
    2024"): a journal kept in one note dates each entry by its heading, not all of them by the file."""
    for heading in reversed(headings):
        if (day := parse_date(heading)) is not None:
            return day
    return None


def _frontmatter_chunks(doc: Document) -> list[Chunk]:
    """A note that is only frontmatter (a title, a date, tags: a reminder) is searchable by it: its
    YAML becomes its chunks, cited as the note."""
    match = FRONTMATTER.match(doc.text)
    if not match:
        return []
    title = with_aliases(breadcrumb(doc.title, [])[0], doc.metadata.get("aliases"))
    spans = split_span(doc.text, match.start(1), match.end(1))
    return [
        Chunk(text=f"{title}\n{doc.text[start:end]}", locator=doc.locator, char_start=start, char_end=end)
        for start, end in spans
    ]
