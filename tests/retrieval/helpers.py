"""Put small documents into a store through the real ingest path."""

from __future__ import annotations

from crossmodalrag.ingest import IngestReport, ingest_documents
from crossmodalrag.types import Document

DAY = 86400.0


def add_docs(store, *docs: Document) -> None:
    ingest_documents(store, docs, known={}, report=IngestReport())


def note(name: str, text: str, title: str | None = None, days: float = 0.0) -> Document:
    """A markdown note `name` whose timestamp is `days` after an epoch in 2025."""
    return Document(
        uri=f"/vault/{name}.md",
        source_type="note",
        title=title or name,
        text=text,
        format="markdown",
        timestamp=1_735_689_600.0 + days * DAY,
        locator=f"{name}.md",
    )
