"""Browsing what memory holds: sources by kind, folder and date, one source with its chunks, store stats.

One set of helpers builds the payloads of `mem sources`, `mem source ID`, `mem stats` and of the
matching HTTP routes, so both return the same JSON. Sources are looked up by database id only;
a file on disk is read only through the uri stored at ingest time, never a path from a caller.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

from crossmodalrag.connectors.pdf import capped_scale
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.file_moves import file_sha256, stored_path
from crossmodalrag.store import Store
from crossmodalrag.types import iso_time

SOURCE_KINDS = ("note", "commit", "pdf", "image", "conversation", "memory")  # the last two: issue 13
MAX_LIST = 500
MAX_IMAGE_SIDE = 2000  # pixels: rendered pages and images are capped so one request stays cheap


class SourceNotFound(CMRAGError):
    """No source (or no such page, or its file is gone) for the id a caller gave."""


class BadFilter(CMRAGError):
    """A listing filter (kind, date, limit) cannot be used."""


def parse_day(text: str | None, name: str) -> float | None:
    """`YYYY-MM-DD` (or a full ISO time) as unix seconds, UTC. Raises BadFilter naming the date `name`."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadFilter(f"{name} {text!r} is not a date", "use YYYY-MM-DD, e.g. 2025-07-21") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def folder_of(source_type: str, uri: str, metadata: dict[str, Any]) -> str:
    """Where a source lives, as a person would group it: the vault folder of a note, the repository
    of a commit, the directory of a PDF or image."""
    if source_type == "note" and metadata.get("path"):
        parent = str(PurePosixPath(metadata["path"]).parent)
        return "" if parent == "." else parent
    if source_type == "commit" and metadata.get("repo"):
        return Path(metadata["repo"]).name
    return str(Path(uri).parent)


def _locator(source_type: str, uri: str, metadata: dict[str, Any]) -> str:
    if source_type == "note":
        return metadata.get("path") or Path(uri).name
    if source_type == "commit":
        return f"{Path(metadata.get('repo', '')).name}@{metadata.get('sha', '')[:7]}"
    return Path(uri).name


def _in_folder(wanted: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a listed source is in `wanted` or below: its folder as listed (a vault folder, a
    repository's name), or, for a path on disk (absolute, `~` or `./`), where the source lives."""
    wanted = wanted.strip().rstrip("/") or "/"
    # resolve() reads the disk: once per listing, not once per source (26k calls made an absolute
    # --folder 2-3x slower than a vault-relative one)
    where = str(Path(wanted).expanduser().resolve()) if wanted.startswith(("/", "~", ".")) else None

    def matches(item: dict[str, Any]) -> bool:
        folder = item["folder"]
        if folder == wanted or folder.startswith(wanted + "/"):
            return True
        return where is not None and _lives_in(item, where)

    return matches


def _lives_in(item: dict[str, Any], where: str) -> bool:
    uri = stored_path(item["uri"], item["source_type"])
    # a commit: its repository. dirname, not Path.parent: this runs for every source in memory, and
    # stored uris are already resolved paths, which Path would only parse again
    place = uri if item["source_type"] == "commit" else os.path.dirname(uri)
    return place == where or place.startswith(where.rstrip("/") + "/")


def _relative_directory(folder: str, relative_to: Path | None) -> str | None:
    """`papers` as the folder papers/ of `relative_to`, if there is one (`./papers` is a path anyway)."""
    if relative_to is None or folder.startswith(("/", "~", ".")):
        return None
    directory = relative_to / folder
    return str(directory.resolve()) if directory.is_dir() else None


@dataclass
class SourceList:
    total: int
    limit: int
    offset: int
    filters: dict[str, Any]
    kinds: dict[str, int]
    sources: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "limit": self.limit,
            "offset": self.offset,
            "filters": self.filters,
            "kinds": self.kinds,
            "sources": self.sources,
        }


def list_sources(
    store: Store,
    kind: str | None = None,
    folder: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 50,
    offset: int = 0,
    names: tuple[str, str] = ("--since", "--until"),
    relative_to: Path | None = None,
) -> SourceList:
    """Sources newest first, filtered by kind, folder (and below) and date (inclusive days). Raises BadFilter;
    `names`: what its messages call the two dates (the CLI's flags, or the API's parameters);
    `relative_to`: the folder a bare relative path is taken from (the CLI's working directory; the API
    has none of its caller's) when it names no vault folder or repository."""
    if kind is not None and kind not in SOURCE_KINDS:
        raise BadFilter(f"unknown kind {kind!r}", f"use one of {', '.join(SOURCE_KINDS)}")
    if not 1 <= limit <= MAX_LIST or offset < 0:
        raise BadFilter(f"limit must be 1..{MAX_LIST} and offset at least 0", "page with --offset")
    start, end = parse_day(since, names[0]), parse_day(until, names[1])
    if end is not None and until and len(until) == 10:
        end += 86_400  # an --until day includes that whole day
    clauses, params = [], []
    if kind:
        clauses.append("s.source_type = ?")
        params.append(kind)
    if start is not None:
        clauses.append("s.timestamp >= ?")
        params.append(start)
    if end is not None:
        clauses.append("s.timestamp < ?")
        params.append(end)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    query = (
        "SELECT s.id, s.source_type, s.uri, s.title, s.timestamp, s.metadata, "
        "(SELECT COUNT(*) FROM chunks c WHERE c.source_id = s.id) AS chunks "
        f"FROM sources s {where} ORDER BY s.timestamp IS NULL, s.timestamp DESC, s.id DESC"
    )
    if folder:  # the folder is derived from metadata in Python: filter every candidate, then page
        candidates = list(_listed(store.conn.execute(query, params)))
        listed = list(filter(_in_folder(folder), candidates))
        if not listed and (directory := _relative_directory(folder, relative_to)):
            listed = list(filter(_in_folder(directory), candidates))
        total, page = len(listed), listed[offset : offset + limit]
    else:  # SQLite pages: at 10k sources this is what keeps the Sources view fast
        total = store.conn.execute(f"SELECT COUNT(*) FROM sources s {where}", params).fetchone()[0]
        page = list(_listed(store.conn.execute(query + " LIMIT ? OFFSET ?", [*params, limit, offset])))
    kinds = dict(store.conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY source_type ORDER BY 1"))
    filters = {"kind": kind, "folder": folder, "since": since, "until": until}
    return SourceList(total, limit, offset, filters, kinds, page)


def _listed(rows) -> Iterator[dict[str, Any]]:
    for row in rows:
        metadata = json.loads(row["metadata"] or "{}")
        where_from = folder_of(row["source_type"], row["uri"], metadata)
        yield (
            {
                "id": row["id"],
                "source_type": row["source_type"],
                "title": row["title"],
                "uri": row["uri"],
                "locator": _locator(row["source_type"], row["uri"], metadata),
                "folder": where_from,
                "timestamp": iso_time(row["timestamp"]),
                "chunks": row["chunks"],
            }
        )


def stored_source_id(store: Store, given: str) -> int:
    """The id of the stored source `given` names as `mem history` takes it (an id, mem://source/ID,
    a uri or path, a commit as `ask` cites it: `repo@1e62948`, or its sha alone). Raises
    SourceNotFound, or CMRAGError when a sha prefix names several commits."""
    from crossmodalrag.versioning.history import resolve_source

    row = store.conn.execute("SELECT id FROM sources WHERE uri = ?", (resolve_source(store.conn, given),)).fetchone()
    if row is None and given.isascii() and given.isdigit():
        raise SourceNotFound(f"no source with id {int(given)}", "list them with `mem sources`")
    if row is None:
        raise SourceNotFound(
            f"no stored source {given!r}",
            "see `mem sources`; give a source's id, mem://source/ID or path, or a commit as <repo>@<sha> or a"
            " unique sha prefix",
        )
    return row[0]


def source_detail(store: Store, source_id: int) -> dict[str, Any]:
    """One source with every chunk in order (breadcrumb apart from body). Raises SourceNotFound."""
    row = store.conn.execute(
        "SELECT id, source_type, uri, title, timestamp, ingested_at, metadata FROM sources WHERE id = ?", (source_id,)
    ).fetchone()
    if row is None:
        raise SourceNotFound(f"no source with id {source_id}", "list them with `mem sources`")
    metadata = json.loads(row["metadata"] or "{}")
    chunks = []
    for chunk in store.conn.execute(
        "SELECT id, chunk_index, locator, modality, text, metadata FROM chunks "
        "WHERE source_id = ? ORDER BY chunk_index",
        (source_id,),
    ):
        extra = json.loads(chunk["metadata"] or "{}")
        breadcrumb, _, body = chunk["text"].partition("\n")
        chunks.append(
            {
                "id": chunk["id"],
                "index": chunk["chunk_index"],
                "locator": chunk["locator"],
                "modality": chunk["modality"],
                "breadcrumb": breadcrumb,
                "body": body,
                **{
                    k: extra[k]
                    for k in ("headings", "path", "page", "page_label", "ocr_confidence")
                    if extra.get(k) is not None
                },
            }
        )
    return {
        "id": row["id"],
        "source_type": row["source_type"],
        "title": row["title"],
        "uri": row["uri"],
        "locator": _locator(row["source_type"], row["uri"], metadata),
        "folder": folder_of(row["source_type"], row["uri"], metadata),
        "timestamp": iso_time(row["timestamp"]),
        "ingested_at": iso_time(row["ingested_at"]),
        "metadata": metadata,
        "chunks": chunks,
    }


def store_stats(store: Store) -> dict[str, Any]:
    """Counts a person checks first: sources per kind, chunks per modality, vectors per model, sources per month."""
    conn = store.conn
    months = conn.execute(
        "SELECT strftime('%Y-%m', timestamp, 'unixepoch') AS month, COUNT(*) FROM sources "
        "WHERE timestamp IS NOT NULL GROUP BY month ORDER BY month"
    ).fetchall()
    span = conn.execute("SELECT MIN(timestamp), MAX(timestamp) FROM sources").fetchone()
    vectors = conn.execute(
        "SELECT m.name, COUNT(DISTINCT v.chunk_id) FROM embedding_models m "
        "JOIN chunk_vectors v ON v.model_id = m.id GROUP BY m.id ORDER BY m.name"
    ).fetchall()
    return {
        "database": store.location,
        "schema_version": _version(conn),
        "sources": dict(conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY 1 ORDER BY 1")),
        "chunks": dict(conn.execute("SELECT modality, COUNT(*) FROM chunks GROUP BY 1 ORDER BY 1")),
        "embedded_chunks": {name: count for name, count in vectors},
        "eval_queries": conn.execute("SELECT COUNT(*) FROM queries_eval").fetchone()[0],
        "first": iso_time(span[0]),
        "last": iso_time(span[1]),
        "per_month": [{"month": month, "sources": count} for month, count in months],
    }


def _version(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0] or 0


def _file_of(store: Store, source_id: int, source_type: str) -> Path:
    """The stored file of a PDF or image source, as it was ingested: a file replaced on disk but not
    synced yet would show another document's page as this source's evidence."""
    row = store.conn.execute(
        "SELECT source_type, uri, json_extract(metadata, '$.file_stamp') AS stamp,"
        " json_extract(metadata, '$.file_sha256') AS sha256 FROM sources WHERE id = ?",
        (source_id,),
    ).fetchone()
    if row is None or row["source_type"] != source_type:
        raise SourceNotFound(f"no {source_type} source with id {source_id}", "list them with `mem sources`")
    path = Path(row["uri"])
    if not path.is_file():
        raise SourceNotFound(f"{path} is no longer on disk", _gone_hint(source_id, source_type))
    if not _as_ingested(path, row["stamp"], row["sha256"]):
        raise SourceNotFound(f"{path} has changed since it was ingested", reingest_hint(path, source_type))
    return path


# `mem sync` alone is no hint here: it reads only configured folders, and with none it refuses to run.
INGEST_COMMANDS = {"pdf": "ingest-pdf", "image": "ingest-images"}


def reingest_hint(path: Path, source_type: str) -> str:
    """What brings a PDF or image that changed on disk up to date: ingesting that file again."""
    command = f"mem {INGEST_COMMANDS[source_type]} {shlex.quote(str(path))}"
    return f"ingest it again: `{command}` (or `mem sync`, if its folder is configured)"


def _gone_hint(source_id: int, source_type: str) -> str:
    return (
        f"drop it from memory with `mem forget {source_id}`; if it moved, first ingest it from there "
        f"(`mem {INGEST_COMMANDS[source_type]} FILE`)"
    )


def _as_ingested(path: Path, stamp: str | None, sha256: str | None) -> bool:
    """Whether the file holds the bytes ingested: its size and mtime as stamped (no read: a page image
    must not hash a 50 MB PDF), else its hash (a touched file). A source stored without a stamp
    cannot be checked; one with a stamp but no hash yet, whose stamp differs, is taken as changed."""
    if not stamp:
        return True
    try:
        stat = path.stat()
    except OSError:  # gone since is_file()
        return False
    if stamp.startswith(f"{stat.st_size}:{stat.st_mtime_ns}:"):  # the extractor after it does not matter here
        return True
    return sha256 is not None and file_sha256(path) == sha256


def _png(image) -> bytes:
    image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE))
    if image.mode not in ("RGB", "RGBA", "L"):
        image = image.convert("RGBA")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def pdf_page_png(store: Store, source_id: int, page: int, chunk_id: int | None = None) -> bytes:
    """Page `page` (1-based) of a stored PDF as a PNG; with `chunk_id` (a chunk of this source) its
    text is boxed where the page's text layer finds it. Raises SourceNotFound, MissingExtraError."""
    path = _file_of(store, source_id, "pdf")
    highlight = ""
    if chunk_id is not None:
        row = store.conn.execute(
            "SELECT text FROM chunks WHERE id = ? AND source_id = ?", (chunk_id, source_id)
        ).fetchone()
        highlight = row["text"].partition("\n")[2] if row else ""
    try:
        import pypdfium2
        from PIL import ImageDraw
    except ImportError:
        raise MissingExtraError(
            "rendering PDF pages needs pypdfium2 and Pillow", 'pip install -e ".[ui,pdf]"'
        ) from None
    try:
        document = pypdfium2.PdfDocument(str(path))
    except pypdfium2.PdfiumError as error:  # changed on disk since it was ingested
        raise SourceNotFound(f"{path.name} cannot be read as a PDF: {error}", reingest_hint(path, "pdf")) from None
    try:
        if not 1 <= page <= len(document):
            raise SourceNotFound(f"{path.name} has no page {page}", f"pages run 1..{len(document)}")
        pdf_page = document[page - 1]
        scale = capped_scale(pdf_page, 1.5)  # a 200-inch page at 1.5 took 3.7 GB
        image = pdf_page.render(scale=scale).to_pil().convert("RGB")
        boxes = line_boxes(_text_boxes(pdf_page, highlight)) if highlight else []
        height = pdf_page.get_height()
        draw = ImageDraw.Draw(image, "RGBA")
        for left, bottom, right, top in boxes:
            # a translucent marker, no outline: an outline around every word hid the text it marked
            draw.rectangle(
                [left * scale, (height - top) * scale, right * scale, (height - bottom) * scale],
                fill=(255, 210, 0, 80),
            )
        return _png(image)
    finally:
        document.close()


def _text_boxes(pdf_page, text: str) -> list[tuple[float, float, float, float]]:
    """Rectangles (PDF points) of `text` on the page: found by its first words in the text layer, then
    boxed for as many characters as it has (pdfium's line breaks are \r\n where the stored text has \n)."""
    words = " ".join(text.split()[:12])
    if not words:
        return []
    textpage = pdf_page.get_textpage()
    try:
        searcher = textpage.search(words, match_case=False)
        found = searcher.get_next()
        if not found:
            return []
        start, _ = found
        body = text.strip()
        count = max(1, min(len(body) + body.count("\n"), textpage.count_chars() - start))
        boxes = []
        for index in range(textpage.count_rects(start, count)):
            boxes.append(textpage.get_rect(index))
        return boxes
    finally:
        textpage.close()


Box = tuple[float, float, float, float]  # left, bottom, right, top in PDF points


def line_boxes(boxes: list[Box]) -> list[Box]:
    """The text's boxes, in reading order, merged into one per line: pdfium may give one per glyph,
    and hundreds of boxes drawn over each other made the cited text unreadable. A box joins the line
    before it when they overlap by half the smaller height and it starts no further right than a
    line's height (a word space) past the line's end; anything else (a new line, a column) starts one."""
    lines: list[Box] = []
    for box in boxes:
        if lines and _same_line(lines[-1], box):
            left, bottom, right, top = lines[-1]
            lines[-1] = (min(left, box[0]), min(bottom, box[1]), max(right, box[2]), max(top, box[3]))
        else:
            lines.append(box)
    return lines


def _same_line(line: Box, box: Box) -> bool:
    overlap = min(line[3], box[3]) - max(line[1], box[1])
    smaller = min(line[3] - line[1], box[3] - box[1])
    gap = box[0] - line[2]
    return overlap >= smaller / 2 and -smaller <= gap <= max(line[3] - line[1], box[3] - box[1])


def image_png(store: Store, source_id: int) -> bytes:
    """A stored image re-encoded as a plain PNG (whatever it was, nothing active survives). Raises
    SourceNotFound, MissingExtraError."""
    path = _file_of(store, source_id, "image")
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise MissingExtraError("showing images needs Pillow", 'pip install -e ".[ui]"') from None
    try:
        with Image.open(path) as image:
            image.load()
            return _png(image.copy())
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as error:
        raise SourceNotFound(f"{path.name} cannot be read as an image: {error}", reingest_hint(path, "image")) from None
