"""Tiny real PDF files for tests (the same writer the sample uses)."""

from crossmodalrag.sample.assets import write_pdf

__all__ = ["write_pdf"]
