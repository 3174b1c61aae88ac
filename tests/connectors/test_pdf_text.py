"""What a PDF's text and metadata become through the real pypdfium2: line-end hyphens, dates, titles."""

from __future__ import annotations

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors.pdf import joined_hyphens, read_pdf
from tests.pdfs import write_pdf_streams

pytestmark = pytest.mark.integration
pytest.importorskip("pypdfium2")


def _lines_pdf(path, lines: list[str]):
    """A one-page PDF showing each of `lines` on a line of its own, as a typesetter breaks them."""
    shown = " ".join(f"({line}) Tj 0 -16 Td" for line in lines)
    return write_pdf_streams(path, [f"BT /F1 12 Tf 72 720 Td {shown} ET".encode()])


def test_a_word_hyphenated_at_a_line_end_is_stored_whole(tmp_path):
    """PDFium gives a line-end hyphen as U+FFFE and drops the line break: `synchro<U+FFFE>nization`
    was stored, split in two for the keyword index and shown with a noncharacter."""
    path = _lines_pdf(
        tmp_path / "paper.pdf",
        ["The synchro-", "nization protocol guarantees consis-", "tency for COVID-", "19 data, says Jean-", "Paul."],
    )
    doc = read_pdf(path)
    assert doc.text == "The synchronization protocol guarantees consistency for COVID-19 data, says Jean-Paul."
    assert not any("\ufffe" in chunk.text for chunk in chunk_document(doc))


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("synchro\ufffenization", "synchronization"),
        ("hy\u00adphen\u00ad", "hyphen"),  # soft hyphens are never shown
        ("consis\x02\ntency", "consistency"),  # PDFium's other mark, before a line break kept
        ("2019\ufffe2020", "2019-2020"),
        ("end\ufffe", "end"),
    ],
)
def test_line_end_hyphen_marks(raw, stored):
    assert joined_hyphens(raw) == stored
