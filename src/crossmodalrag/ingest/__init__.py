"""Connector → chunks → store → FTS index, each source one unit of a write batch (the sources of
~0.25 s share a commit; store.batched).

Each source is fingerprinted (content, title and CHUNKER_VERSION): an unchanged source is skipped,
a changed one is re-chunked in place. A crash between sources leaves every committed source whole
and no half-written one. Notes that left a vault are removed on the next ingest of that vault.

One module per connector's entry point (notes.py, files.py, git.py) over the steps they share:
reading.py reads only changed files, storing.py writes the items and removes what left.
"""

from crossmodalrag.ingest.files import ingest_images, ingest_pdfs
from crossmodalrag.ingest.git import ingest_git
from crossmodalrag.ingest.notes import ingest_notes
from crossmodalrag.ingest.report import Failure, IngestReport, Progress, Skipped, Unchanged
from crossmodalrag.ingest.storing import MASS_DELETE_MIN_SOURCES, ingest_documents, remove_gone, remove_sources

__all__ = [
    "MASS_DELETE_MIN_SOURCES",
    "Failure",
    "IngestReport",
    "Progress",
    "Skipped",
    "Unchanged",
    "ingest_documents",
    "ingest_git",
    "ingest_images",
    "ingest_notes",
    "ingest_pdfs",
    "remove_gone",
    "remove_sources",
]
