"""SVG diagrams: their text is in the file (labels, titles), so it is read, not recognized.

Draw.io, Excalidraw, Mermaid and most diagram tools export SVG; rasterizing it for OCR would only
lose what the XML already says. A label drawn twice (draw.io's `<switch>`: an HTML label plus a
plain-text fallback for viewers without HTML) counts once.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from crossmodalrag.errors import ConnectorError
from crossmodalrag.types import Document

_TEXT_ELEMENTS = {"text", "title", "desc"}
_SKIPPED = {"style", "script", "metadata", "defs"}  # CSS, code, editor data, unused templates
_SPACE = re.compile(r"\s+")


def read_svg(path: Path, extractor: str) -> Document:
    """The text lines of one SVG file. Raises ConnectorError when it is not readable XML.
    (Python's expat refuses exponential entity expansion and never fetches external entities.)"""
    try:
        root = ElementTree.parse(path).getroot()
    except (ElementTree.ParseError, UnicodeDecodeError, ValueError) as exc:
        raise ConnectorError(f"{path}: not a readable SVG ({exc})", "check or re-export the file") from exc
    if _name(root) != "svg":
        raise ConnectorError(f"{path}: not an SVG image (its root element is <{_name(root)}>)", "re-export as SVG")
    lines = _lines(root)
    return Document(
        uri=str(path),
        source_type="image",
        title=path.stem,
        text="\n".join(lines),
        format="ocr",
        modality="image",
        timestamp=path.stat().st_mtime,
        locator=path.name,
        extractor=extractor,
        metadata={"path": str(path), "svg_text": True, "lines": len(lines)},
    )


def _lines(element: ElementTree.Element) -> list[str]:
    """Text lines in document order: one per text element or HTML label block."""
    name = _name(element)
    if name in _SKIPPED:
        return []
    if name in _TEXT_ELEMENTS or name in {"div", "p", "span", "li", "td"} and not _has_blocks(element):
        text = _SPACE.sub(" ", " ".join(element.itertext())).strip()  # a <tspan> a line: spaced
        return [text] if text else []
    if name == "switch":  # the renderer shows the first child it can: so does this
        return next((lines for child in element if (lines := _lines(child))), [])
    return [line for child in element for line in _lines(child)]


def _has_blocks(element: ElementTree.Element) -> bool:
    return any(_name(child) in {"div", "p", "li", "table", "ul", "ol"} for child in element)


def _name(element: ElementTree.Element) -> str:
    return element.tag.rpartition("}")[2] if isinstance(element.tag, str) else ""
