"""PDFs: text per page (pypdfium2: fast, permissively licensed, can also render pages).

One source per file. Pages are kept apart (joined by form feeds) so chunks never straddle pages
and each chunk is cited by page (`spec.pdf p.4`). A page without extractable text (a scan) is
rendered and read by OCR when the ocr extra is installed, and tagged with its confidence; without
it, the page is listed in the metadata and the ingest says how to read it.
"""

from __future__ import annotations

import ctypes
import math
import re
from datetime import datetime, timedelta, timezone
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Iterator

from crossmodalrag.connectors.files import check_regular, find_files, unreadable
from crossmodalrag.errors import ConnectorError, MissingExtraError
from crossmodalrag.types import Document

PAGE_BREAK = "\f"
INSTALL_HINT = 'pip install -e ".[pdf]"'
RENDER_SCALE = 2  # a scanned page is read by OCR at 144 dpi
MAX_RENDER_PIXELS = 40_000_000  # ... or less for a huge page: a 200-inch one at 144 dpi took 2.5 GB


def capped_scale(page, scale: float) -> float:
    """`scale`, or less if the page rendered at it would pass MAX_RENDER_PIXELS."""
    width, height = page.get_size()  # points: a page may be up to 200 inches a side
    return min(scale, math.sqrt(MAX_RENDER_PIXELS / max(1.0, width * height)))


IMAGE_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": "PNG",
    b"\xff\xd8\xff": "JPEG",
    b"GIF8": "GIF",
    b"II*\x00": "TIFF",
    b"MM\x00*": "TIFF",
}


def _what_it_is(path: Path) -> str | None:
    """What a file named .pdf that is no PDF really is, when that says what to do with it."""
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError:
        return None
    if not head:
        return "the file is empty"
    kind = next((name for magic, name in IMAGE_SIGNATURES.items() if head.startswith(magic)), None)
    return f"it is a {kind} image: use `mem ingest-images`" if kind else None


def _unopenable(path: Path, error: Exception) -> ConnectorError:
    """Why PDFium would not open a file, in words: it fails with no error code (FPDF_ERR_SUCCESS,
    "PDFium: Success") when it finds no page tree, or an empty one. (It sets no code then, so after
    another file failed in the same process the code is that file's: the message gives its reason.)"""
    code = getattr(error, "err_code", None)
    if code == 0:
        return ConnectorError(f"{path}: cannot open as a PDF (it has no pages)", "check the file")
    if code == FPDF_ERR_PASSWORD or "password" in str(error).lower():
        return ConnectorError(
            f"{path}: cannot open as a PDF: it is encrypted with a password", "remove the password and try again"
        )
    return ConnectorError(f"{path}: cannot open as a PDF ({error})", _what_it_is(path) or "check the file")


FPDF_ERR_PASSWORD = 4  # pdfium's code for a PDF that needs a password to open


# Part of every PDF's file stamp (ingest.files._file_extractor): an unchanged file is not read again, so bump
# this whenever read_pdf would make another Document of the same bytes. 2: scans under a stamped text
# layer OCR'd, page labels, form fields. 3: words hyphenated at a line end joined (joined_hyphens).
READER_VERSION = "3"


def find_pdfs(path: Path) -> Iterator[Path]:
    """The PDF itself, or every PDF under a folder."""
    return find_files(path, (".pdf",))


def extractor_version(ocr_engine: str = "rapidocr") -> str:
    """Folded into the fingerprint, so an extractor (or OCR engine) upgrade re-derives every PDF."""
    from crossmodalrag.connectors import images

    version = f"pypdfium2 {package_metadata.version('pypdfium2')}"
    return f"{version} + {images.extractor_version(ocr_engine)}" if images.ocr_available(ocr_engine) else version


def extractor_version_or_raise(ocr_engine: str = "rapidocr") -> str:
    """The extractor version; MissingExtraError with the install command if it is absent."""
    try:
        return extractor_version(ocr_engine)
    except package_metadata.PackageNotFoundError as exc:
        raise MissingExtraError("PDF support is not installed", INSTALL_HINT) from exc


def read_pdf(path: Path, ocr_engine: str = "rapidocr") -> Document:
    """Text of every page. Raises ConnectorError for a corrupt, encrypted or unreadable file."""
    try:
        import pypdfium2
    except ImportError as exc:
        raise MissingExtraError("PDF support is not installed", INSTALL_HINT) from exc
    version = extractor_version(ocr_engine)
    check_regular(path)
    try:
        document = pypdfium2.PdfDocument(str(path))
    except OSError as exc:  # gone or changed since the check
        raise unreadable(path, exc) from exc
    except pypdfium2.PdfiumError as exc:
        raise _unopenable(path, exc) from exc
    try:
        has_form = _init_form(document)
        pages = [_page_text(document, index) for index in range(len(document))]
        if has_form:
            _add_form_values(document, pages)
        scanned = _scanned_page_indexes(document, pages)
        ocr_pages = _read_scanned_pages(document, pages, scanned, ocr_engine)
        labels = _page_labels(document)
        info = document.get_metadata_dict()
        title = document_title(info.get("Title") or "", path)
    except pypdfium2.PdfiumError as exc:
        raise ConnectorError(f"{path}: unreadable page ({exc})", "the file may be truncated") from exc
    finally:
        document.close()
    offsets, position = [], 0
    for text in pages:
        offsets.append(position)
        position += len(text) + len(PAGE_BREAK)
    return Document(
        uri=str(path),
        source_type="pdf",
        title=title,
        text=PAGE_BREAK.join(pages),
        format="pages",
        modality="pdf",
        timestamp=_creation_time(info.get("CreationDate", "")) or path.stat().st_mtime,
        locator=path.name,
        extractor=version,
        metadata={
            "path": str(path),
            "pages": len(pages),
            "page_offsets": offsets,
            "empty_pages": [n for n, text in enumerate(pages, 1) if not text.strip()],
            "ocr_pages": ocr_pages,
            **({"page_labels": labels} if labels else {}),
            "extractor": version,
            **({"notice": notice} if (notice := _scan_notice(path, scanned, ocr_engine)) else {}),
        },
    )


# What tools write when nobody gave a title (reportlab, Word's first unsaved document, ...): shown in
# every citation and heading every chunk, it says less than the file's name.
PLACEHOLDER_TITLES = re.compile(r"(untitled( document)?|\(?anonymous\)?|no title|document\d*|title)", re.I)
OFFICE_PREFIX = re.compile(r"^Microsoft (Word|PowerPoint|Excel) - ", re.I)
FILE_NAME = re.compile(
    r"^(?:.*[/\\])?([^/\\]+)\.(docx?|odt|rtf|pptx?|xlsx?|txt|tex|dvi|ps|pdf|html?|indd|pages)$", re.I
)


def document_title(given: str, path: Path) -> str:
    """The PDF's own title, or its file's stem when the title is a placeholder: empty, `untitled`,
    `(anonymous)`; `Microsoft Word - Budget.docx` and `C:\\work\\Budget.docx` are `Budget`."""
    title = " ".join(given.split())
    title = OFFICE_PREFIX.sub("", title)
    if named := FILE_NAME.match(title):
        title = named.group(1).strip()
    return path.stem if not title or PLACEHOLDER_TITLES.fullmatch(title) else title


SPARSE_TEXT_CHARS = 200  # fewer than a typed page holds: a Bates stamp, a footer, a scanner's watermark
SCAN_COVERAGE = 0.5  # images cover at least half the page: a scan, not a page with a logo


def _scanned_page_indexes(document, pages: list[str]) -> list[int]:
    """Pages that are scans: no text layer, or a sparse one stamped over an image that covers most of
    the page. Only sparse pages have their objects inspected, so an ordinary text PDF costs the same."""
    return [
        index
        for index, text in enumerate(pages)
        if not text.strip() or (len(text.strip()) < SPARSE_TEXT_CHARS and _mostly_image(document, index))
    ]


def _mostly_image(document, index: int) -> bool:
    import pypdfium2.raw as pdfium_c

    page = document[index]
    try:
        left, bottom, right, top = page.get_bbox()
        covered = 0.0
        for image in page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE]):
            x0, y0, x1, y1 = image.get_bounds()
            covered += max(0.0, min(x1, right) - max(x0, left)) * max(0.0, min(y1, top) - max(y0, bottom))
    finally:
        page.close()
    return covered >= SCAN_COVERAGE * max(1.0, (right - left) * (top - bottom))


def _read_scanned_pages(document, pages: list[str], scanned: list[int], engine: str) -> dict[str, float]:
    """OCR the scanned pages, in place; returns {page number: confidence}. A text layer a scan carries
    is kept, followed by the OCR lines it does not already hold (OCR reads a stamped footer too)."""
    from crossmodalrag.connectors import images

    if not scanned or not images.ocr_available(engine):
        return {}
    import numpy as np

    confidences = {}
    for index in scanned:
        page = document[index]
        try:
            pixels = np.asarray(page.render(scale=capped_scale(page, RENDER_SCALE)).to_pil().convert("RGB"))
        finally:
            page.close()
        layer = " ".join(pages[index].split())
        lines = [line for line in images.recognize(pixels, engine) if " ".join(line[0].split()) not in layer]
        if lines:
            read = "\n".join(text for text, _, _ in lines)
            pages[index] = f"{pages[index].rstrip()}\n{read}" if layer else read
            confidences[str(index + 1)] = sum(score for _, score, _ in lines) / len(lines)
    return confidences


def _scan_notice(path: Path, scanned: list[int], engine: str) -> str | None:
    """What to say of scanned pages: without OCR, how to read them; with it, nothing (a blank page,
    or a picture without words: OCR found none)."""
    from crossmodalrag.connectors import images

    if not scanned or images.ocr_available(engine):
        return None
    try:  # what is missing: the OCR extra, the tesseract program, or a language's data
        images.extractor_version(engine)
        install = INSTALL_HINT.replace("pdf", "ocr")
    except MissingExtraError as missing:
        install = missing.hint
    return f"{path.name}: {len(scanned)} page(s) are scans with no text layer (or only a stamp); {install} reads them"


MAX_LABEL_CHARS = 24  # a label is a page number (`iv`, `A-3`); a longer one is no use in a citation


def _page_labels(document) -> dict[str, str]:
    """{page number: its label} for the pages whose label (front matter's `iii`, a book's `2` on its
    fifth page) is not their number; 800 pages take ~3 ms."""
    labels = {}
    for index in range(len(document)):
        label = " ".join(document.get_page_label(index).split())[:MAX_LABEL_CHARS]
        if label and label != str(index + 1):
            labels[str(index + 1)] = label
    return labels


PDF_DATE = re.compile(r"D?:?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(?:([Zz])|([+-])(\d{2})'?(\d{2})?'?)?")


def _creation_time(value: str) -> float | None:
    """A PDF date (`D:20190207093000+01'00'`) as unix seconds, or None if absent or malformed. Its
    offset from UTC is applied (`Z` is UTC); with none, the time is local, as a photo's is."""
    match = PDF_DATE.match(value.strip())
    if not match or match.group(2) is None or match.group(3) is None:  # a day at least
        return None
    year, month, day, hour, minute, second = (int(part or 0) for part in match.groups()[:6])
    utc, sign, hours, minutes = match.groups()[6:]
    try:
        zone = timezone.utc if utc else None
        if sign:
            offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
            zone = timezone(offset if sign == "+" else -offset)
        return datetime(year, month, day, hour, minute, second, tzinfo=zone).timestamp()
    except ValueError:  # a 13th month, an offset of 24 hours or more
        return None


FORM_TEXT_FIELDS = ("FPDF_FORMFIELD_TEXTFIELD", "FPDF_FORMFIELD_COMBOBOX", "FPDF_FORMFIELD_LISTBOX")


def _init_form(document) -> bool:
    """Load the form of a PDF that has one, for its fields' values; pdfium needs that done before
    any page is loaded. A PDF without a form (nearly all) costs one call."""
    import pypdfium2.raw as pdfium_c

    if document.get_formtype() == pdfium_c.FORMTYPE_NONE:
        return False
    document.init_forms()
    return True


def _add_form_values(document, pages: list[str]) -> None:
    """Append `field: value` lines of filled-in form fields to the page each stands on: a viewer shows
    them on the page, yet they are no part of its text layer."""
    for index in range(len(pages)):
        layer = " ".join(pages[index].split())
        lines = [f"{name}: {value}" for name, value in _field_values(document, index) if value not in layer]
        if lines:
            pages[index] = "\n".join([pages[index].rstrip(), *lines]).lstrip("\n")


def _field_values(document, index: int) -> list[tuple[str, str]]:
    """(name, value) of the text, combo and list fields on a page that hold a value; check boxes
    (`Yes`/`Off`) say nothing searchable."""
    import pypdfium2.raw as pdfium_c

    kinds = {getattr(pdfium_c, kind) for kind in FORM_TEXT_FIELDS}
    page, found = document[index], []
    try:
        for number in range(pdfium_c.FPDFPage_GetAnnotCount(page)):
            annot = pdfium_c.FPDFPage_GetAnnot(page, number)
            try:
                if pdfium_c.FPDFAnnot_GetFormFieldType(document.formenv, annot) in kinds:
                    value = " ".join(_annot_string(pdfium_c.FPDFAnnot_GetFormFieldValue, document, annot).split())
                    name = _annot_string(pdfium_c.FPDFAnnot_GetFormFieldName, document, annot)
                    # A designer's `form1[0].page1[0].reason[0]` is shown as `reason`.
                    name = " ".join(re.sub(r"\[\d+\]", "", name).rsplit(".", 1)[-1].split())
                    if value:
                        found.append((name or "field", value))
            finally:
                pdfium_c.FPDFPage_CloseAnnot(annot)
    finally:
        page.close()
    return found


def _annot_string(function, document, annot) -> str:
    """A UTF-16 string a pdfium form function writes: asked for its size first, then for it."""
    size = function(document.formenv, annot, None, 0)
    if size <= 2:
        return ""
    buffer = (ctypes.c_ushort * (size // 2))()
    function(document.formenv, annot, buffer, size)
    return bytes(buffer).decode("utf-16-le", errors="replace").rstrip("\x00")


def _page_text(document, index: int) -> str:
    page = document[index]
    try:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()
    # pdfium ends lines with \r\n; a stray form feed would look like a page break.
    return joined_hyphens(text.replace("\r\n", "\n").replace("\r", "\n").replace(PAGE_BREAK, "\n"))


# PDFium marks a hyphen that ends a line as U+FFFE (a noncharacter; U+0002 in some files) and drops the
# line break after it.
LINE_END_HYPHEN = re.compile(r"(\w?)[\ufffe\u0002]\n?(\w?)")
SOFT_HYPHEN = "\u00ad"  # where a word may be broken: never shown unless it is


def joined_hyphens(text: str) -> str:
    """`synchro<U+FFFE>nization` as `synchronization`, one word that a search for it finds; `COVID-19`
    and `Jean-Paul` keep their hyphen (a second part that starts with a capital or a digit is no
    word broken at a line end). No noncharacter or soft hyphen is left in the text."""

    def join(match: re.Match) -> str:
        before, after = match.groups()
        broken_word = before.isalpha() and after.isalpha() and after.islower()
        return before + after if broken_word or not (before and after) else f"{before}-{after}"

    return LINE_END_HYPHEN.sub(join, text.replace(SOFT_HYPHEN, ""))
