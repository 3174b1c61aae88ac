"""Cross-modal sample files, generated at seed time (never downloaded): a one-page PDF, a
text-heavy screenshot of a note, and a diagram whose meaning is only in layout and colour."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

SPEC_PAGES = [
    "Quillmark Plugin API Specification, version 1.0. Rate limits: a plugin may call render() at most "
    "50 times per second. Calls over the limit fail with error 429 and the plugin must back off "
    "exponentially, starting at 100 milliseconds and doubling up to 5 seconds."
]
WHITEBOARD_LINES = [
    "Whiteboard - after the 1.0 release",
    "Next steps:",
    "1. Publish the plugin API spec",
    "2. Benchmark nested emphasis",
    "3. Write the migration guide",
]
# The diagram's one fact is visual: the red box is the deprecated component. OCR sees only labels.
DIAGRAM_BOXES = [("Tokenizer", "black"), ("Renderer", "black"), ("LRU cache", "red")]


def pdf_file(objects: list[bytes], info: int | None = None) -> bytes:
    """A PDF of these objects (numbered from 1, the catalog first) with its cross-reference table;
    `info`: the number of the document information object, if any."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    described = b" /Info %d 0 R" % info if info else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, described, xref)
    return bytes(out)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _wrap(text: str, width: int = 80) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return lines + ([line] if line else [])


def write_pdf(path: Path, pages: list[str], title: str | None = None, created: str | None = None) -> Path:
    """A small valid PDF, written byte by byte: page n shows pages[n] in Helvetica ('' = no text)."""
    streams = []
    for text in pages:
        shown = " ".join(f"({_escape(line)}) Tj 0 -16 Td" for line in _wrap(text))
        streams.append(f"BT /F1 12 Tf 72 720 Td {shown} ET".encode("latin-1") if text else b"")
    return write_pdf_streams(path, streams, title, created)


def write_pdf_streams(path: Path, streams: list[bytes], title: str | None = None, created: str | None = None) -> Path:
    """A valid PDF whose page n draws streams[n] (PDF content operators; font /F1 is Helvetica)."""
    count = len(streams)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(count))}] /Count {count} >>".encode(),
    ]
    font_id = 3 + 2 * count
    for i, content in enumerate(streams):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info = ([f"/Title ({_escape(title)})"] if title else []) + ([f"/CreationDate ({created})"] if created else [])
    objects.append(f"<< {' '.join(info)} >>".encode())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pdf_file(objects, info=len(objects)))
    return path


def write_text_image(
    path: Path, lines: list[str], boxes: list[tuple[str, str]] = (), size: tuple[int, int] = (1000, 420)
) -> Path:
    """Lines of black text on white, then labelled boxes (label, outline colour) in a row with arrows."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=34)
    for row, text in enumerate(lines):
        draw.text((30, 30 + row * 60), text, fill="black", font=font)
    top = 40 + len(lines) * 60
    for column, (label, colour) in enumerate(boxes):
        left = 30 + column * 320
        draw.rectangle((left, top, left + 270, top + 90), outline=colour, width=4)
        draw.text((left + 20, top + 25), label, fill=colour, font=font)
        if column:
            draw.line((left - 50, top + 45, left, top + 45), fill="black", width=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path


def write_assets(folder: Path) -> dict[str, Path]:
    """The three files; images only when Pillow is installed (it comes with the ocr extra)."""
    written = {
        "spec": write_pdf(
            folder / "plugin-api-spec.pdf", SPEC_PAGES, title="Quillmark Plugin API", created="D:20250815100000Z"
        )
    }
    try:
        import PIL  # noqa: F401
    except ImportError:
        return written
    written["whiteboard"] = write_text_image(folder / "whiteboard-next-steps.png", WHITEBOARD_LINES)
    written["diagram"] = write_text_image(folder / "architecture-diagram.png", ["Architecture"], DIAGRAM_BOXES)
    # An image is dated by its file: on the sample's timeline, not the day it was seeded (which made
    # them the newest sources, and every note's recency small beside them).
    for name, day in (("whiteboard", "2025-08-20T16:00:00+00:00"), ("diagram", "2025-08-12T10:00:00+00:00")):
        when = datetime.fromisoformat(day).timestamp()
        os.utime(written[name], (when, when))
    return written
