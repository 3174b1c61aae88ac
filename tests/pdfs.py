"""Tiny real PDF files for tests (the same writer the sample uses)."""

from crossmodalrag.sample.assets import write_pdf, write_pdf_streams

__all__ = ["write_pdf", "write_pdf_streams"]
