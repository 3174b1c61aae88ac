"""Markdown notes (Obsidian vaults): find the notes, read one into a Document."""

from __future__ import annotations

import codecs
import os
import re
import unicodedata
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.chunking.markdown import (
    clip,
    inline_tags,
    leading_date,
    shown_links,
    split_frontmatter,
    without_code,
    written_date_line,
)
from crossmodalrag.connectors import obsidian
from crossmodalrag.connectors.files import check_name, opened_regular, unlisted_folders, unreadable
from crossmodalrag.connectors.files import shown as _shown  # its locals are named `shown`
from crossmodalrag.connectors.frontmatter import parse_frontmatter
from crossmodalrag.connectors.globs import selected
from crossmodalrag.errors import ConnectorError
from crossmodalrag.privacy import has_private, strip_private
from crossmodalrag.types import Document
from crossmodalrag.written_dates import parse_date

NOTE_SUFFIXES = (".md", ".markdown")
NOISE_DIRS = {".obsidian", ".trash", ".git", "node_modules"}
MAX_NOTE_BYTES = 20 * 1024 * 1024  # 20 MB of text is ~17,000 chunks; past that it is an export, not a note
FIRST_MOMENT = datetime(1, 1, 2, tzinfo=timezone.utc).timestamp()
LAST_MOMENT = datetime(9999, 12, 30, tzinfo=timezone.utc).timestamp()
# The closing `#`s of a heading are stripped in Python (see heading_text): a lazy `(.+?)[ \t]*#*`
# backtracks cubically on a line of spaces.
H1 = re.compile(r"^ {0,3}#[ \t]+(.*)$", re.M)
SETEXT_H1 = re.compile(r"^( {0,3}[^\s#>|<`~*+=-][^\n]*)\n {0,3}={2,}[ \t]*$", re.M)  # "Title" over "====="
# No `[` inside a link: otherwise every `[[` of a `[[[[…` line scans to the end of the line.
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
DATE_KEYS = ("date", "created")  # frontmatter that dates a note
UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
CP1252_UNDEFINED = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
WORD = re.compile(r"[^\W\d_]+")  # a run of letters
ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")  # the form notices ask for: one unread is no real day
# Part of every note's file stamp: an unchanged note file is not read again (ingest.reading._read_changed), so
# bump this whenever read_note would make another Document of the same bytes (title, text, locator).
# 3: aliases; Obsidian's hidden markup (%%comments%%, block ids) left out, links in headings as shown;
# a cp1252 note read (it was refused)
# 4: a cp1251 note read as Cyrillic (it was cp1252 mojibake); a `Date:` line under the `# Title` read
READER_VERSION = "4"  # 2: prose between opening --- lines is text, not frontmatter


def _has_body(text: str, body_start: int) -> bool:
    """Anything after the frontmatter and a leading `Date:` line, which are metadata: a note of only
    a date line was stored without a chunk."""
    return bool(text[leading_date(text, body_start)[1] :].strip())


def find_notes(
    root: Path,
    include: list[str],
    exclude: list[str],
    folder_links: list[Path] | None = None,
    canvases: list[Path] | None = None,
) -> Iterator[Path]:
    """Every note under root in a stable order, skipping vault noise and hidden folders.

    Symlinked folders are not followed (each is added to `folder_links`, for the ingest to say so):
    a link loop cannot trap the walk, a link into the vault does not store its notes twice, and the
    watcher, which does not follow links either, would never see their edits. Links to notes of the
    same vault are not followed either (see _links_within). Obsidian canvases the globs select are
    added to `canvases`, for the ingest to say they were not read. A folder that cannot be listed is
    yielded itself: reading it fails with a clear error, and the failure keeps the notes stored from
    under it (instead of their looking deleted).
    """
    unlisted: list[OSError] = []
    for folder, dirs, files in os.walk(root, onerror=unlisted.append):
        yield from unlisted_folders(unlisted)
        dirs[:] = sorted(d for d in dirs if d not in NOISE_DIRS and not d.startswith("."))
        if folder_links is not None:
            folder_links.extend(Path(folder, d) for d in dirs if Path(folder, d).is_symlink())
        for name in sorted(files):
            if name.startswith(".") or not name.lower().endswith(NOTE_SUFFIXES):
                if canvases is not None and name.lower().endswith(obsidian.CANVAS_SUFFIX) and not name.startswith("."):
                    if selected(Path(folder, name).relative_to(root).as_posix(), include, exclude):
                        canvases.append(Path(folder, name))
                continue
            path = Path(folder, name)
            if selected(path.relative_to(root).as_posix(), include, exclude) and not _links_within(path, root):
                yield path
    yield from unlisted_folders(unlisted)


def _links_within(path: Path, root: Path) -> bool:
    """A symbolic link to a note of the same vault: that note is read as itself. Read through the
    link too, it was stored twice, and forgetting the note left its text searchable under the link.
    A link to a note that is gone is read, and fails as a link out of the vault to one does."""
    if not path.is_symlink():
        return False
    try:
        target = path.resolve()
        return target.exists() and target.is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a loop: reading it reports that
        return False


class EmptyNote(ConnectorError):
    """A note with nothing in it (a freshly created `Untitled.md`): skipped, not a failure."""


def read_note(root: Path, path: Path) -> Document:
    """Parse one note, without its `<private>` spans. Raises ConnectorError if it is unreadable,
    not a regular file, too large or not UTF-8, EmptyNote (a ConnectorError) if it is empty.

    A note that is empty only because all of it is private yields a Document without text, so the
    version stored before the user marked it private is replaced (by nothing) rather than kept.
    """
    relative = path.relative_to(root).as_posix()
    check_name(path)
    raw, mtime = _read_bytes(path)
    text, decoded_as = _decoded(raw, path)
    text = text.removeprefix("\ufeff")
    if "\x00" in text:
        raise ConnectorError(f"{_shown(path)}: binary data in a .md file", "this is not a text note; exclude it")
    frontmatter_text, body_start = split_frontmatter(text)
    if not _has_body(text, body_start) and not _worth_keeping(parse_frontmatter(frontmatter_text)):
        raise EmptyNote(f"{_shown(path)}: note is empty", "nothing to remember in it")
    withheld = has_private(text)
    text = strip_private(text)
    frontmatter_text, body_start = split_frontmatter(text)
    text = obsidian.hidden_removed(text, body_start, path.name)
    meta = parse_frontmatter(frontmatter_text)
    unread = _frontmatter_unread(frontmatter_text, meta) or _date_line_unread(text, body_start)
    said = "; ".join(part for part in (decoded_as, unread) if part)
    prose = without_code(text[body_start:])
    if obsidian.is_excalidraw(path.name):  # its heading is the plugin's own ("Text Elements")
        title = clip(str(meta.get("title") or obsidian.excalidraw_title(path.name)))
    else:
        title = clip(str(meta.get("title") or heading_text(prose) or path.stem))
        title = path.stem if obsidian.PLACEHOLDER.fullmatch(title) else title
    return Document(
        uri=str(path),
        source_type="note",
        title=title,
        text=text if _has_body(text, body_start) or _worth_keeping(meta) else "",
        format="markdown",
        timestamp=_timestamp(meta, written_date_line(text, body_start), mtime, path.stem),
        locator=relative,
        metadata={
            "vault": str(root),
            "path": relative,
            "tags": _tags(meta, prose),
            **({"aliases": aliases} if (aliases := _aliases(meta, title)) else {}),
            "wikilinks": sorted({link.strip() for link in WIKILINK.findall(prose)} - {""}),  # [[<private>x</private>]]
            **({"frontmatter": _jsonable(meta)} if meta else {}),
            **({"notice": f"{_shown(path)}: {said}"} if said else {}),
        },
        withheld_text=withheld,
    )


def _decoded(raw: bytes, path: Path) -> tuple[str, str | None]:
    """The note's text and, when it was not UTF-8, a notice saying how it was read. A note written
    by an old Windows editor (cp1252, Latin-1) is readable text: it is decoded as such rather than
    refused. One that holds UTF-8 sequences too is UTF-8 damaged somewhere: refused, naming the byte,
    since read as cp1252 each of its accented letters would be stored as two wrong ones."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):  # Notepad's "Unicode"
        try:
            return raw.decode("utf-16"), "not UTF-8, read as UTF-16 (by its byte order mark)"
        except UnicodeDecodeError as exc:
            raise ConnectorError(f"{_shown(path)}: not valid UTF-16 (byte {exc.start})", "re-save it as UTF-8") from exc
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        if UTF8_SEQUENCE.search(raw):
            raise ConnectorError(
                f"{_shown(path)}: not valid UTF-8 (byte {exc.start})", "re-save the note as UTF-8"
            ) from exc
    if _reads_as_cyrillic(raw):
        return raw.decode(
            "cp1251", "replace"
        ), "not UTF-8, read as cp1251 (re-save it as UTF-8 to be sure of its letters)"
    # cp1252 leaves five bytes undefined; Latin-1 reads every byte (as a control character there)
    encoding = "cp1252" if not CP1252_UNDEFINED.search(raw) else "latin-1"
    return raw.decode(encoding), f"not UTF-8, read as {encoding} (re-save it as UTF-8 to be sure of its accents)"


def _reads_as_cyrillic(raw: bytes) -> bool:
    """Is a legacy note in cp1251 (Russian, Ukrainian, Bulgarian Windows) rather than cp1252? Both give
    every byte a letter, so the bytes alone cannot tell; the words can. In a Western note the accented
    letters sit inside words of ASCII letters (café, für): read as cp1251 those words mix scripts. In a
    Cyrillic note every letter of a word is a high byte: read as cp1251 its words are Cyrillic throughout
    (read as cp1252 they were runs like "Çàêóïêà", stored as such and found by no question)."""
    # one-letter words say nothing: Russian в, и, с read as cp1252 are French à, è, ñ
    words = [word for word in WORD.findall(raw.decode("cp1251", "replace")) if len(word) > 1 and not word.isascii()]
    cyrillic = sum(1 for word in words if all("\u0400" <= char <= "\u04ff" for char in word))
    return cyrillic > len(words) - cyrillic


def _worth_keeping(meta: dict[str, Any]) -> bool:
    """Does frontmatter alone make a note worth storing? A note titled "Call dentist" with a date and
    tags is found by them (its frontmatter is its one chunk); a template's blank `tags:` is not, nor a
    date alone (a daily note nothing was written in: a plain `Date:` line alone is empty too)."""
    return any(value not in (None, "", [], {}) for key, value in meta.items() if key not in DATE_KEYS)


def _frontmatter_unread(raw: str | None, meta: dict[str, Any]) -> str | None:
    """What was not read of a note's frontmatter, said once when the note is read: silently, a note
    dated `13/06/2023` was dated by its file, and one with a YAML error lost its tags."""
    written = [line for line in (raw or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if written and not meta:
        return "its frontmatter is not valid YAML and was left out (tags, date, title)"
    for key in DATE_KEYS:
        if meta.get(key) is not None and parse_date(meta[key]) is None:
            return f"{_not_a_date(f'{key}: {meta[key]}', str(meta[key]))}, so another date is used"
    return None


def _date_line_unread(text: str, body_start: int) -> str | None:
    """A `Date:` line (leading, or under the title) with digits that is no date mem reads (`Date:
    03/04/2024`), said as frontmatter's is: silently the note was dated by its file."""
    written = written_date_line(text, body_start) or ""
    if any(c.isdigit() for c in written) and parse_date(written) is None:
        return f"{_not_a_date(f'Date: {written[:40]}', written)}, so another date is used"
    return None


def _not_a_date(line: str, written: str) -> str:
    """Why a written date was not read: `2023-02-30` is in the form asked for, a day that never was."""
    if ISO_DAY.fullmatch(written.strip()):
        return f"`{line}` is a day that does not exist (check the month and day)"
    return f"`{line}` is not a date mem reads (write YYYY-MM-DD)"


def _read_bytes(path: Path) -> tuple[bytes, float]:
    """(contents, mtime) of a regular file of at most MAX_NOTE_BYTES. Raises ConnectorError.

    The size is checked again after reading because a file can grow between the check and the read.
    """
    shown, too_large = _shown(path), f"notes over {MAX_NOTE_BYTES // 2**20} MB are skipped; split or exclude it"
    with opened_regular(path, "exclude it from the vault") as (descriptor, info):
        if info.st_size > MAX_NOTE_BYTES:
            raise ConnectorError(f"{shown}: note is {info.st_size // 2**20} MB", too_large)
        try:
            with os.fdopen(descriptor, "rb", closefd=False) as handle:
                raw = handle.read(MAX_NOTE_BYTES + 1)
        except OSError as exc:
            raise unreadable(path, exc) from exc
    if len(raw) > MAX_NOTE_BYTES:
        raise ConnectorError(f"{shown}: note grew past {MAX_NOTE_BYTES // 2**20} MB while being read", too_large)
    return raw, info.st_mtime


def heading_text(prose: str) -> str | None:
    """The text of the first non-empty level-1 heading (`# Title`, without a closing run of `#`s, or
    a line underlined with `===`)."""
    found = [(m.start(), m.group(1).rstrip(" \t\r").rstrip("#").rstrip(" \t")) for m in H1.finditer(prose)]
    found += [(m.start(), m.group(1).strip()) for m in SETEXT_H1.finditer(prose)]
    return next((shown for _, text in sorted(found) if (shown := shown_links(text))), None)


NAME_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?!\d)")


def _timestamp(meta: dict[str, Any], date_line: str | None, mtime: float, name: str = "") -> float | None:
    """Frontmatter `date:`/`created:`, else a `Date:` line (leading or under the title), else a date the
    file's name starts with (Obsidian's daily notes: `2024-01-15.md`, `2024-01-15 standup.md`; a copied or cloned vault
    gives every file the same mtime), else the file's mtime; a moment outside years 1-9999 is skipped
    (`date: 9999-12-31T23:59-12:00` would break every display)."""
    named = NAME_DATE.match(name)
    for value in (*(meta.get(key) for key in DATE_KEYS), date_line, named and named.group(0)):
        if value is not None and (stamp := parse_date(value)) is not None and FIRST_MOMENT <= stamp <= LAST_MOMENT:
            return stamp
    return mtime if FIRST_MOMENT <= mtime <= LAST_MOMENT else None


def _tags(meta: dict[str, Any], body: str) -> list[str]:
    raw = meta.get("tags") or meta.get("tag") or []
    if isinstance(raw, str):
        listed = raw.replace(",", " ").split()
    elif isinstance(raw, (list, tuple, set, dict)):
        listed = [str(t) for t in raw if t]
    else:
        listed = [str(raw)]  # `tags: 2025` or `tags: true` is one tag, not a crash
    inline = inline_tags(body) if "#" in body else []
    # Composed (NFC), as inline_tags reads them: a decomposed `über` is the same tag as a typed one.
    return sorted({unicodedata.normalize("NFC", tag.lstrip("#")) for tag in listed + inline} - {""})


def _aliases(meta: dict[str, Any], title: str) -> list[str]:
    """Frontmatter `aliases` (or `alias`): a list, or one string whose commas separate them, as
    Obsidian reads it; the title itself and repeats left out."""
    raw = meta.get("aliases") or meta.get("alias") or []
    listed = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, (list, tuple)) else [raw]
    found = [clip(" ".join(str(alias).split())) for alias in listed if alias not in (None, "")]
    return [a for a in dict.fromkeys(found) if a and a.casefold() != title.casefold()]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
