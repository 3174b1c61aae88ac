"""Splitting documents into self-contained, citable chunks.

CHUNKER_VERSION is folded into every source fingerprint: bump it whenever a change here would
make stored chunks wrong, and the next ingest re-derives every source instead of skipping it. That
re-embeds every chunk and re-extracts every source's events (an LLM call each), so a change that only
improves on chunks that were still right is left to apply as sources change (version 2 kept when a
note's tags alone under its title stopped being a chunk of their own).
"""

from __future__ import annotations

from crossmodalrag.chunking.diff import chunk_diff
from crossmodalrag.chunking.markdown import chunk_markdown
from crossmodalrag.chunking.text import chunk_ocr, chunk_pages, chunk_plain
from crossmodalrag.chunking.turns import chunk_turns
from crossmodalrag.types import Chunk, Document

CHUNKER_VERSION = "2"

CHUNKERS = {
    "markdown": chunk_markdown,
    "diff": chunk_diff,
    "plain": chunk_plain,
    "pages": chunk_pages,
    "ocr": chunk_ocr,
    "turns": chunk_turns,
}


def chunk_document(doc: Document) -> list[Chunk]:
    """The chunks of one document, by its format."""
    return CHUNKERS[doc.format](doc)
