"""Tiny real PDF files for tests (the same writer the sample uses)."""

from io import BytesIO
from pathlib import Path

from crossmodalrag.sample.assets import pdf_file, write_pdf, write_pdf_streams

__all__ = ["add_page_labels", "write_form_pdf", "write_image_page_pdf", "write_pdf", "write_pdf_streams"]


def write_image_page_pdf(path: Path, image: Path, box: tuple[int, int, int, int], text: str = "") -> Path:
    """A one-page PDF (612 x 792 points) drawing `image` into `box` (left, bottom, width, height),
    plus `text` as a small text layer at the foot of the page (a Bates stamp, a caption)."""
    from PIL import Image

    picture = Image.open(image).convert("RGB")
    jpeg = BytesIO()
    picture.save(jpeg, "JPEG", quality=90)
    left, bottom, width, height = box
    content = f"q {width} 0 0 {height} {left} {bottom} cm /Im0 Do Q".encode()
    if text:
        content += f"\nBT /F1 8 Tf 250 20 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> /XObject << /Im0 6 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceRGB "
        b"/BitsPerComponent 8 /Filter /DCTDecode /Length %d >>\nstream\n"
        % (*picture.size, jpeg.tell())
        + jpeg.getvalue()
        + b"\nendstream",
    ]
    path.write_bytes(pdf_file(objects))
    return path


def add_page_labels(path: Path, numbering: str) -> Path:
    """Give a PDF written by write_pdf page labels (`numbering`: the /Nums array's items, e.g.
    `0 << /S /r >> 3 << /S /D >>`), as an incremental update replacing its catalog (object 1)."""
    data = path.read_bytes()
    trailer = data[data.rindex(b"trailer") : data.rindex(b"startxref")]
    previous = int(data[data.rindex(b"startxref") :].split()[1])
    catalog = f"<< /Type /Catalog /Pages 2 0 R /PageLabels << /Nums [{numbering}] >> >>".encode()
    update = b"1 0 obj\n" + catalog + b"\nendobj\n"
    xref = len(data) + len(update)
    entries = trailer.replace(b"trailer", b"").strip().removesuffix(b">>")
    update += b"xref\n1 1\n%010d 00000 n \n" % len(data)
    update += b"trailer\n" + entries + b" /Prev %d >>\nstartxref\n%d\n%%%%EOF\n" % (previous, xref)
    path.write_bytes(data + update)
    return path


def write_form_pdf(path: Path, text: str, fields: list[tuple[str, str, str]]) -> Path:
    """A one-page PDF showing `text`, with form fields (name, field type `Tx`/`Btn`, value) drawn
    below it, each value shown by its appearance stream as a viewer draws it."""
    content = f"BT /F1 12 Tf 72 700 Td ({text}) Tj ET".encode()
    count = len(fields)
    widgets = " ".join(f"{6 + 2 * i} 0 R" for i in range(count))
    objects = [
        f"<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [{widgets}] /DA (/F1 10 Tf 0 g) "
        "/DR << /Font << /F1 3 0 R >> >> >> >>".encode(),
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        f"/Resources << /Font << /F1 3 0 R >> >> /Annots [{widgets}] >>".encode(),
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
    ]
    for i, (name, kind, value) in enumerate(fields):
        top = 640 - 40 * i
        shown = f"/Tx BMC BT /F1 10 Tf 2 4 Td ({value}) Tj ET EMC".encode()
        objects.append(
            f"<< /Type /Annot /Subtype /Widget /FT /{kind} /T ({name}) /V ({value}) /Rect [72 {top - 20} 400 {top}] "
            f"/DA (/F1 10 Tf 0 g) /AP << /N {7 + 2 * i} 0 R >> /F 4 >>".encode()
        )
        objects.append(
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 328 20] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Length %d >>\nstream\n" % len(shown) + shown + b"\nendstream"
        )
    path.write_bytes(pdf_file(objects))
    return path
