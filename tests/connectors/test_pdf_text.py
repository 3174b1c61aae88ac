"""What a PDF's text and metadata become through the real pypdfium2: line-end hyphens, dates, titles."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors.pdf import joined_hyphens, read_pdf
from tests.pdfs import write_pdf, write_pdf_streams

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


def test_a_creation_date_with_an_offset_is_read_in_utc(tmp_path):
    """`+09'00'` was dropped: Tokyo's 00:30 on March 1 was stored as 00:30 UTC, nine hours late
    (a photo's OffsetTimeOriginal was applied): a filter `--before 2024-03-01` missed it."""
    tokyo = write_pdf(tmp_path / "tokyo.pdf", ["Text."], created="D:20240301003000+09'00'")
    assert read_pdf(tokyo).timestamp == datetime(2024, 2, 29, 15, 30, tzinfo=timezone.utc).timestamp()
    quito = write_pdf(tmp_path / "quito.pdf", ["Text."], created="D:20240301003000-05'30'")
    assert read_pdf(quito).timestamp == datetime(2024, 3, 1, 6, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("given", "title"),
    [
        ("untitled", "lease-2024"),
        ("(anonymous)", "lease-2024"),
        ("Microsoft Word - Document1.docx", "lease-2024"),
        ("Microsoft Word - Lease agreement.docx", "Lease agreement"),
        ("C:\\Users\\bob\\Q3 report.doc", "Q3 report"),
        ("Lease 2024, signed", "Lease 2024, signed"),
    ],
)
def test_a_placeholder_title_gives_way_to_the_file_name(tmp_path, given, title):
    """`untitled — lease-2024.pdf p.1` in every citation and chunk heading said nothing of the file."""
    doc = read_pdf(write_pdf(tmp_path / "lease-2024.pdf", ["Rent is due monthly."], title=given))
    assert doc.title == title
    heading = "lease-2024.pdf > p.1" if title == "lease-2024" else f"lease-2024.pdf · {title} > p.1"
    assert chunk_document(doc)[0].text.startswith(heading + "\n")


def test_an_encrypted_pdf_is_said_so_in_one_clean_line(tmp_path):
    """It read `cannot open as a PDF (Failed to load document (PDFium: Incorrect password error).)`."""
    import pypdfium2

    from crossmodalrag.connectors.pdf import _unopenable

    path = write_pdf(tmp_path / "locked.pdf", ["Secret."])
    error = _unopenable(path, pypdfium2.PdfiumError("Failed to load document (PDFium: Incorrect password error).", 4))
    assert (
        str(error)
        == f"{path}: cannot open as a PDF: it is encrypted with a password (hint: remove the password and try again)"
    )
