"""Reading chat files without loading them whole: JSON Lines one line at a time, a JSON array one
element at a time, and the timestamp spellings the formats use."""

from __future__ import annotations

import codecs
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from crossmodalrag.errors import ConnectorError

BLOCK = 1 << 20  # bytes read at a time from a JSON array
MAX_LINE = 64 << 20  # a single JSONL record past this is not a chat turn (a pasted dump): skipped
DECODER = json.JSONDecoder()
SEPARATORS = re.compile(r"[\s,]*")
# A problem that loses nothing (every record was read): see `lost_nothing`.
REPLACED = "not UTF-8, read with its undecodable bytes replaced"


UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def encoding_of(head: bytes) -> str:
    """`utf-16` for a file opening with a UTF-16 byte order mark (an export re-saved by Windows
    Notepad as "Unicode"), else `utf-8` (its own byte order mark, if any, is skipped by the readers)."""
    return "utf-16" if head.startswith(UTF16_BOMS) else "utf-8"


def check_encoding(path: Path) -> None:
    """Read a whole file once to make sure it decodes (UTF-8, or UTF-16 by its byte order mark).
    Raises ConnectorError naming the first byte that does not: an export re-saved in a legacy
    encoding (cp1252) would otherwise be stored with every accented letter replaced, and then be
    kept in place of the good copy of the same conversations."""
    with path.open("rb") as handle:
        block = handle.read(BLOCK)
        encoding = encoding_of(block)
        decoder = codecs.getincrementaldecoder(encoding)()
        offset = 0
        while True:
            try:
                decoder.decode(block, final=not block)
            except UnicodeDecodeError as error:
                raise _not_decodable(path, encoding, offset + error.start - len(error.object) + len(block)) from error
            if not block:
                return
            offset += len(block)
            block = handle.read(BLOCK)


def _not_decodable(path: Path, encoding: str, where: int) -> ConnectorError:
    return ConnectorError(
        f"{path}: not valid {encoding.upper()} (byte {max(where, 0)}); nothing was read from it",
        "re-save it as UTF-8, the encoding the service exported it in",
    )


def lost_nothing(problems: list[str]) -> bool:
    """Whether every record of a file was read despite its problems (only odd bytes replaced)."""
    return all(problem.endswith(REPLACED) for problem in problems)


def json_lines(path: Path, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each JSON object line; a malformed line is reported and skipped."""
    with path.open("rb") as handle:
        utf16 = encoding_of(handle.read(2)) == "utf-16"
        handle.seek(0)
        for number, raw in enumerate(_utf16_lines(path) if utf16 else handle, 1):
            if not raw.strip():
                continue
            if len(raw) > MAX_LINE:
                problems.append(f"{path}:{number}: a {len(raw) >> 20} MB line, skipped")
                continue
            if number == 1:  # a byte order mark some Windows editors write is not JSON
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:  # a line some tool wrote in Latin-1: kept, its odd bytes replaced
                text = raw.decode("utf-8", "replace")
                problems.append(f"{path}:{number}: {REPLACED}")
            try:
                record = json.loads(text)
            except ValueError:
                problems.append(f"{path}:{number}: not valid JSON, skipped (a truncated or damaged line)")
                continue
            except RecursionError:  # json's C decoder recurses once per nesting level
                problems.append(f"{path}:{number}: JSON nested too deeply, skipped")
                continue
            if isinstance(record, dict):
                yield number, record


def _utf16_lines(path: Path) -> Iterator[bytes]:
    """A UTF-16 file's lines as UTF-8 bytes, for the line reader (a pair of bytes that is no character
    read as a replacement character)."""
    with path.open(encoding="utf-16", errors="replace", newline="\n") as handle:
        for line in handle:
            yield line.encode("utf-8")


def json_array(path: Path, problems: list[str]) -> Iterator[Any]:
    """Each element of a top-level JSON array (or the one top-level object), read block by block:
    a 1 GB export never sits in memory whole, only its largest element does. A truncated file
    yields its complete elements and reports where it broke off."""
    with path.open("rb") as raw:
        yield from _json_array(path, Utf8Blocks(raw, path, problems), problems)


class Utf8Blocks:
    """A binary file read as UTF-8 (or, by its byte order mark, UTF-16) text, its undecodable bytes
    replaced and said so once, as the JSONL reader does: a replacement character the file really holds is
    told apart by counting its own encoded form in the bytes read."""

    REPLACEMENT = "\ufffd".encode()

    def __init__(self, raw: BinaryIO, path: Path, problems: list[str]) -> None:
        self.raw, self.path, self.problems = raw, path, problems
        encoding = encoding_of(raw.read(2))
        raw.seek(0)
        # A UTF-16 file (by its byte order mark) is decoded as such, its replacements not counted: the
        # encoded form counted is UTF-8's (exports are checked whole before they are read, open_chat).
        self.decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self.tail, self.replacements_read, self.replacements_decoded, self.said = b"", 0, 0, encoding != "utf-8"

    def read(self, size: int = -1) -> str:
        data = self.raw.read(size)
        text = self.decoder.decode(data, final=not data or size < 0)
        # The tail (2 bytes) catches an encoded replacement character cut between two reads.
        self.replacements_read += (self.tail + data).count(self.REPLACEMENT)
        self.tail = (self.tail + data)[-2:]
        self.replacements_decoded += text.count("\ufffd")
        if self.replacements_decoded > self.replacements_read and not self.said:
            self.said = True
            self.problems.append(f"{self.path}: {REPLACED}")
        return text


def _json_array(path: Path, handle: Utf8Blocks, problems: list[str]) -> Iterator[Any]:
    buffer, position, eof = handle.read(BLOCK).lstrip("\ufeff \t\r\n"), 0, False
    if buffer.startswith("{"):
        buffer += handle.read()
        try:
            decoded = DECODER.decode(buffer)
        except ValueError as error:
            problems.append(f"{path}: not valid JSON ({error.msg} at character {error.pos}), skipped")
            return
        except RecursionError:
            problems.append(f"{path}: JSON nested too deeply, skipped")
            return
        yield decoded
        return
    if not buffer.startswith("["):
        problems.append(f"{path}: not a JSON array, skipped")
        return
    position, count = 1, 0
    while True:
        position = SEPARATORS.match(buffer, position).end()
        if buffer.startswith("]", position):
            return
        try:
            element, end = DECODER.raw_decode(buffer, position)
        except RecursionError:  # its end cannot be found without decoding it: the rest goes too
            problems.append(f"{path}: conversation {count + 1} is JSON nested too deeply; it and the rest skipped")
            return
        except ValueError:
            if eof:
                if buffer[position:].strip():
                    problems.append(f"{path}: truncated after {count} complete conversations; the rest skipped")
                return
            more = handle.read(max(BLOCK, len(buffer) - position))  # doubling: linear overall
            eof = not more
            buffer, position = buffer[position:] + more, 0
            continue
        count += 1
        yield element
        position = end


def parse_time(value: Any) -> float | None:
    """Unix seconds from epoch numbers, ISO 8601 strings (with Z) or LoCoMo's '1:56 pm on 8 May, 2023'."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) if value > 0 else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        moment = None
        for pattern in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%d %B %Y", "%Y-%m-%d"):
            try:
                moment = datetime.strptime(text, pattern)
                break
            except ValueError:
                continue
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
