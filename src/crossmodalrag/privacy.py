"""`<private>…</private>` spans: text a user marked as never to be stored, indexed or embedded.

Spans are cut out of a note before its Document leaves the connector, so nothing downstream (the
frontmatter, title, tags, chunks, FTS, vectors, metadata, fingerprint) ever sees them. Tags are
case-insensitive (`<PRIVATE>`); spans nest; an unclosed `<private>` hides the rest of the note (a
forgotten closing tag must not leak a secret); a stray `</private>` is dropped. Code blocks are not
exempt: a secret pasted into a fenced block is still a secret.
"""

from __future__ import annotations

import re

# No whitespace or attributes inside a tag. A removed span leaves whitespace behind, so stripping can
# then never assemble a new tag out of the text around it (`<<private>x</private>private>` would give
# `< private>`): the result holds no tags at all. (Attributes would also need `[^>]*`, which rescans
# the rest of the text for every unterminated `<private`.)
TAG = re.compile(r"<(/?)private>", re.I)


def strip_private(text: str) -> str:
    """The text with every private span removed; a span's line breaks are kept so the lines around
    it stay apart (a heading after a span is still a heading), otherwise it becomes one space."""
    out, depth, start = [], 0, 0
    for tag in TAG.finditer(text):
        closing = bool(tag.group(1))
        if depth == 0:
            out.append(text[start : tag.start()])
            start = tag.end()
            if closing:
                out.append(" ")  # a stray closing tag: drop it, keep the words around it apart
                continue
        if not closing:
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            out.append(_gap(text[start : tag.start()]))
            start = tag.end()
    # An unclosed span hides everything after its opening tag.
    out.append(_gap(text[start:]) if depth else text[start:])
    return "".join(out) if len(out) > 1 else text


def _gap(hidden: str) -> str:
    """What is left in place of a hidden span: its line breaks, or a single space."""
    breaks = hidden.count("\n")
    return "\n" * breaks if breaks else " "


def has_private(text: str) -> bool:
    """Does the text contain a private tag?"""
    return TAG.search(text) is not None
