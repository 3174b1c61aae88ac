"""Images with known text for OCR tests, drawn with Pillow."""

from __future__ import annotations

from pathlib import Path


def write_text_image(path: Path, lines: list[str], boxed: list[str] = (), size: tuple[int, int] = (1000, 400)) -> Path:
    """Black text lines on white, then each `boxed` label inside a drawn rectangle (a diagram)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=34)
    for row, text in enumerate(lines):
        draw.text((30, 30 + row * 60), text, fill="black", font=font)
    for column, label in enumerate(boxed):
        left, top = 30 + column * 320, 40 + len(lines) * 60
        draw.rectangle((left, top, left + 280, top + 90), outline="black", width=3)
        draw.text((left + 20, top + 25), label, fill="black", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path
