"""Markdown notes (Obsidian vaults): find the notes, read one into a Document."""

from __future__ import annotations

import os
import re
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.chunking.markdown import leading_date, split_frontmatter, without_code
from crossmodalrag.connectors.frontmatter import parse_frontmatter
from crossmodalrag.connectors.globs import selected
from crossmodalrag.errors import ConnectorError
from crossmodalrag.types import Document

NOTE_SUFFIXES = (".md", ".markdown")
NOISE_DIRS = {".obsidian", ".trash", ".git", "node_modules"}
MAX_NOTE_BYTES = 20 * 1024 * 1024
H1 = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
WIKILINK = re.compile(r"\[\[([^\]|#\n]+)(?:#[^\]|\n]*)?(?:\|[^\]\n]*)?\]\]")
INLINE_TAG = re.compile(r"(?<![\w&#/])#([A-Za-z][\w/-]*)")


def find_notes(root: Path, include: list[str], exclude: list[str]) -> Iterator[Path]:
    """Every note under root in a stable order, skipping vault noise and hidden folders.

    Symlinked folders are not followed, so a link loop cannot trap the walk.
    """
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in NOISE_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or not name.lower().endswith(NOTE_SUFFIXES):
                continue
            path = Path(folder, name)
            if selected(path.relative_to(root).as_posix(), include, exclude):
                yield path


def read_note(root: Path, path: Path) -> Document:
    """Parse one note. Raises ConnectorError if it is unreadable, too large, empty or not UTF-8."""
    relative = path.relative_to(root).as_posix()
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = os.fsencode(path).decode("utf-8", "replace")
        raise ConnectorError(f"{shown}: file name is not valid UTF-8", "rename the file") from exc
    try:
        stat = path.stat()
        if stat.st_size > MAX_NOTE_BYTES:
            raise ConnectorError(
                f"{path}: note is {stat.st_size // 2**20} MB", "notes over 20 MB are skipped; split it"
            )
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConnectorError(f"{path}: not valid UTF-8 (byte {exc.start})", "re-save the note as UTF-8") from exc
    except OSError as exc:
        raise ConnectorError(f"{path}: cannot read ({exc.strerror})", "check the file's permissions") from exc
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        raise ConnectorError(f"{path}: binary data in a .md file", "this is not a text note; exclude it")
    frontmatter_text, body_start = split_frontmatter(text)
    meta = parse_frontmatter(frontmatter_text)
    if not text[body_start:].strip():
        raise ConnectorError(f"{path}: note is empty", "nothing to remember in it")
    prose = without_code(text[body_start:])
    heading = H1.search(prose)
    title = str(meta.get("title") or (heading.group(1) if heading else path.stem))
    return Document(
        uri=str(path),
        source_type="note",
        title=title,
        text=text,
        format="markdown",
        timestamp=_timestamp(meta, leading_date(text, body_start)[0], stat.st_mtime),
        locator=relative,
        metadata={
            "vault": str(root),
            "path": relative,
            "tags": _tags(meta, prose),
            "wikilinks": sorted({link.strip() for link in WIKILINK.findall(prose)}),
            **({"frontmatter": _jsonable(meta)} if meta else {}),
        },
    )


def parse_date(value: Any) -> float | None:
    """A frontmatter or `Date:` value as unix seconds (UTC midnight for bare dates), else None."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.timestamp()
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=timezone.utc).timestamp()
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        for candidate in (text, text[:10]):
            try:
                return parse_date(datetime.fromisoformat(candidate))
            except ValueError:
                continue
    return None


def _timestamp(meta: dict[str, Any], date_line: str | None, mtime: float) -> float:
    """Frontmatter `date:`/`created:`, else a leading `Date:` line, else the file's mtime."""
    for value in (meta.get("date"), meta.get("created"), date_line):
        if value is not None and (stamp := parse_date(value)) is not None:
            return stamp
    return mtime


def _tags(meta: dict[str, Any], body: str) -> list[str]:
    raw = meta.get("tags") or meta.get("tag") or []
    listed = raw.replace(",", " ").split() if isinstance(raw, str) else [str(t) for t in raw if t]
    inline = INLINE_TAG.findall(body) if "#" in body else []
    return sorted({tag.lstrip("#") for tag in listed + inline})


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
