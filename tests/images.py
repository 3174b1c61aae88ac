"""Images with known text for OCR tests (the same drawing code the sample uses)."""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.sample.assets import write_text_image as draw


def write_text_image(path: Path, lines: list[str], boxed: list[str] = (), size: tuple[int, int] = (1000, 400)) -> Path:
    """Black text lines on white, then each `boxed` label inside a black rectangle (a diagram)."""
    return draw(path, lines, [(label, "black") for label in boxed], size)
