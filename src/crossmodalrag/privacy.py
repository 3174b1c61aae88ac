"""`<private>…</private>` spans: text a user marked as never to be stored, indexed or embedded.

Spans are cut out of a note before its Document leaves the connector, so nothing downstream (the
frontmatter, title, tags, chunks, FTS, vectors, metadata, fingerprint) ever sees them. Tags are
case-insensitive (`<PRIVATE>`); spans nest; an unclosed `<private>` hides the rest of the note (a
forgotten closing tag must not leak a secret); a stray `</private>` is dropped. Code blocks are not
exempt: a secret pasted into a fenced block is still a secret.
"""

from __future__ import annotations

import re

# Whitespace is allowed before the `>` (`<private >`, as HTML allows), not after the `<` or the `/`
# (`< private>` is not a tag in HTML either). No attributes: they would need `[^>]*`, which rescans the
# rest of the text for every unterminated `<private`.
TAG = re.compile(r"<(/?)private\s*>", re.I)


def strip_private(text: str) -> str:
    """The text with every private span removed; a span's line breaks are kept so the lines around
    it stay apart (a heading after a span is still a heading), otherwise it becomes one space.

    The result holds no tags at all: a removed span leaves whitespace behind, which can complete a tag
    out of the text around it (`<private<private>x</private>>` gives `<private >`), so that is
    stripped in turn. Each pass removes at least one tag, so this ends."""
    stripped = _strip_once(text)
    while stripped is not text and TAG.search(stripped):
        stripped = _strip_once(stripped)
    return stripped


def _strip_once(text: str) -> str:
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
