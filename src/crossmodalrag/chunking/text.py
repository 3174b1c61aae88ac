"""Boundary-aware splitting shared by every chunker: paragraphs, then sentences, then spaces."""

from __future__ import annotations

import re
from pathlib import Path

from crossmodalrag.types import Chunk, Document

MAX_CHUNK_CHARS = 1200
# Preferred cut points, best first. Each pattern matches the separator; we cut after it.
PROSE_BOUNDARIES = (
    re.compile(r"\n\s*\n"),
    re.compile(r"(?<=[.!?])[\"')\]]?\s+"),
    re.compile(r"\n"),
    re.compile(r"\s+"),
)
LINE_BOUNDARIES = (re.compile(r"\n"), re.compile(r"\s+"))


def split_span(
    text: str,
    start: int,
    end: int,
    max_chars: int = MAX_CHUNK_CHARS,
    boundaries: tuple[re.Pattern[str], ...] = PROSE_BOUNDARIES,
) -> list[tuple[int, int]]:
    """Cut text[start:end] into trimmed spans of at most max_chars, never inside a word.

    A single word longer than max_chars is the only thing ever cut mid-token.
    """
    spans = []
    while start < end:
        start = _skip_space(text, start, end)
        if start >= end:
            break
        if end - start <= max_chars:
            spans.append((start, _trim_end(text, start, end)))
            break
        cut = _best_cut(text, start, start + max_chars, boundaries)
        spans.append((start, _trim_end(text, start, cut)))
        start = cut
    return [(s, e) for s, e in spans if e > s]


def _best_cut(text: str, start: int, limit: int, boundaries: tuple[re.Pattern[str], ...]) -> int:
    """The best boundary before limit; the last third of the window first, so pieces stay large."""
    for lower in (start + (limit - start) // 3, start + 1):
        for pattern in boundaries:
            last = None
            for match in pattern.finditer(text, lower, limit):
                last = match
            if last is not None:
                return last.end()
        if limit < len(text) and text[limit].isspace():
            return limit
    return limit  # a single word longer than the window: the only mid-word cut


def _skip_space(text: str, start: int, end: int) -> int:
    while start < end and text[start].isspace():
        start += 1
    return start


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def chunk_plain(doc: Document) -> list[Chunk]:
    """Plain text: breadcrumb = title (or the document's own `_breadcrumb`), body split at natural boundaries."""
    crumb = doc.metadata.get("_breadcrumb", doc.title)
    return [
        Chunk(text=f"{crumb}\n{doc.text[s:e]}", locator=doc.locator, char_start=s, char_end=e)
        for s, e in split_span(doc.text, 0, len(doc.text))
    ]


def chunk_pages(doc: Document) -> list[Chunk]:
    """Paged text (pages joined by form feeds): chunks never straddle a page; each knows its page.

    The breadcrumb names the file as well as the title: file names (`3M_2018_10K.pdf`) often say
    more about a document than its embedded title does.
    """
    chunks, start = [], 0
    name = doc.locator if doc.title == Path(doc.locator).stem else f"{doc.locator} · {doc.title}"
    ocr_pages, labels = doc.metadata.get("ocr_pages", {}), doc.metadata.get("page_labels", {})
    pages = doc.text.split("\f")
    for number, page in enumerate(pages, 1):
        confidence, label = ocr_pages.get(str(number)), labels.get(str(number))
        extras = ({"ocr_confidence": confidence} if confidence is not None else {}) | (
            {"page_label": label} if label else {}
        )
        # A labelled page is cited by the number printed on it, as a PDF viewer shows it.
        shown = f"p.{label} (page {number} of {len(pages)})" if label else f"p.{number}"
        for s, e in split_span(doc.text, start, start + len(page)):
            chunks.append(
                Chunk(
                    text=f"{name} > {shown}{' (OCR)' if confidence is not None else ''}\n{doc.text[s:e]}",
                    locator=f"{doc.locator} {shown}",
                    char_start=s,
                    char_end=e,
                    metadata={"page": number, **extras},
                )
            )
        start += len(page) + 1
    return chunks


def chunk_ocr(doc: Document) -> list[Chunk]:
    """Recognized text of an image: marked as OCR in the breadcrumb, with the OCR confidence."""
    confidence = doc.metadata.get("ocr_confidence")
    return [
        Chunk(
            text=f"{doc.locator} (image text)\n{doc.text[s:e]}",
            locator=doc.locator,
            char_start=s,
            char_end=e,
            metadata={"ocr_confidence": confidence},
        )
        for s, e in split_span(doc.text, 0, len(doc.text))
    ]
