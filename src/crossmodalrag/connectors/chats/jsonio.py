"""Reading chat files without loading them whole: JSON Lines one line at a time, a JSON array one
element at a time, and the timestamp spellings the formats use."""

from __future__ import annotations

import codecs
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Iterator

BLOCK = 1 << 20  # bytes read at a time from a JSON array
MAX_LINE = 64 << 20  # a single JSONL record past this is not a chat turn (a pasted dump): skipped
DECODER = json.JSONDecoder()
SEPARATORS = re.compile(r"[\s,]*")
# A problem that loses nothing (every record was read): see `lost_nothing`.
REPLACED = "not UTF-8, read with its undecodable bytes replaced"


def lost_nothing(problems: list[str]) -> bool:
    """Whether every record of a file was read despite its problems (only odd bytes replaced)."""
    return all(problem.endswith(REPLACED) for problem in problems)


def json_lines(path: Path, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each JSON object line; a malformed line is reported and skipped."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
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


def json_array(path: Path, problems: list[str]) -> Iterator[Any]:
    """Each element of a top-level JSON array (or the one top-level object), read block by block:
    a 1 GB export never sits in memory whole, only its largest element does. A truncated file
    yields its complete elements and reports where it broke off."""
    with path.open("rb") as raw:
        yield from _json_array(path, Utf8Blocks(raw, path, problems), problems)


class Utf8Blocks:
    """A binary file read as UTF-8 text, its undecodable bytes (a tool that wrote Latin-1) replaced
    and said so once, as the JSONL reader does: a replacement character the file really holds is
    told apart by counting its own encoded form in the bytes read."""

    REPLACEMENT = "\ufffd".encode()

    def __init__(self, raw: BinaryIO, path: Path, problems: list[str]) -> None:
        self.raw, self.path, self.problems = raw, path, problems
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.tail, self.replacements_read, self.replacements_decoded, self.said = b"", 0, 0, False

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
