"""Chat and agent-session transcripts: detect the format of a file, read it into Sessions of Turns.

Formats: Claude Code session JSONL, Codex rollout JSONL, ChatGPT and Claude.ai `conversations.json`
exports, LoCoMo-style JSON. Every reader streams (a line or an array element at a time), reports a
malformed part in `problems` and keeps going, and masks secrets in every turn it yields. A Session
becomes one Document (`session_document`); each turn keeps the format's own id for citations.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from crossmodalrag.chunking.turns import TURNS_VERSION
from crossmodalrag.connectors.chats.jsonio import MAX_LINE, check_encoding, clip, encoding_of
from crossmodalrag.connectors.chats.secrets import mask_secrets
from crossmodalrag.connectors.files import check_regular
from crossmodalrag.errors import ConnectorError
from crossmodalrag.privacy import has_private, strip_private
from crossmodalrag.types import Document

# "empty": an export whose conversations were all deleted (`[]`), read so the sessions stored from it leave.
FORMATS = ("claude-code", "codex", "chatgpt", "claude-ai", "locomo", "empty")
SUFFIXES = (".jsonl", ".json")
SNIFF_BYTES = 64 * 1024
# Part of every chat file's stamp (conversations.py): a file unchanged on disk is not read again, so
# bump this when a reader, the secret patterns or the `<private>` stripping change what a file reads as.
# 2: a byte order mark keeps the first record; mysql -pSECRET masked. 3: artifacts, canvases and
# voice transcriptions kept whole; identifiers named after "key"/"token" no longer masked.
READER_VERSION = "3"


@dataclass
class Turn:
    speaker: str  # "user", "assistant", "tool", "agent" (a sub-agent's prompter), or a person's name (LoCoMo)
    text: str
    turn_id: str  # the format's own id: Claude Code uuid, ChatGPT message id, LoCoMo dia_id, Codex line
    timestamp: float | None = None


TITLE_CHARS = 80  # a session's title when it is made of its first message


def title_from(text: str) -> str:
    """A title made of a message: cleaned as a turn is, then clipped (clipped first, a key cut short
    by the clip no longer looks like one, and its first characters would stay)."""
    return clip(mask_secrets(strip_private(text).strip())[0], TITLE_CHARS)


@dataclass
class Session:
    key: str  # unique within its file: the session or conversation id
    title: str
    format: str
    turns: list[Turn] = field(default_factory=list)
    timestamp: float | None = None  # when it started: what recency and the timeline read
    metadata: dict[str, Any] = field(default_factory=dict)
    # The digest of the session as read (`raw_sha256`): None when a secret or a private span was cut
    # out of it. `unchanged`: the digest is the one stored, its turns were not cleaned (none given).
    raw_sha256: str | None = None
    unchanged: bool = False


@dataclass
class ChatRead:
    """What reading one file gave: its sessions (a generator) and, as they happen, its problems."""

    path: Path
    format: str
    problems: list[str] = field(default_factory=list)
    secrets_masked: int = 0
    withheld_text: bool = False  # a `<private>` span or a secret was cut out: no hash of the file is stored
    # session key → the `raw_sha256` stored for it, and what is hashed with the text (the reader's version:
    # a new reader, or new secret patterns, read every session again). A session whose digest is the
    # one stored is yielded `unchanged`, not cleaned: masking every turn of a 45 MB export to update
    # one conversation took 90% of the time.
    stored_digests: dict[str, str] = field(default_factory=dict)
    digest_salt: str = ""

    def sessions(self) -> Iterator[Session]:
        from crossmodalrag.connectors.chats import claude_code, codex, exports

        reader = {
            "claude-code": claude_code.read_sessions,
            "codex": codex.read_sessions,
            "chatgpt": exports.read_chatgpt,
            "claude-ai": exports.read_claude_ai,
            "locomo": exports.read_locomo,
            "empty": exports.read_empty,
        }[self.format]
        for session in reader(self.path, self.problems):
            digest = raw_sha256(session, self.digest_salt)
            if self.stored_digests.get(session.key) == digest:
                session.turns, session.unchanged, session.raw_sha256 = [], True, digest
                yield session
                continue
            withheld_before, self.withheld_text = self.withheld_text, False
            session.turns = [self._clean(turn) for turn in session.turns]
            session.turns = [turn for turn in session.turns if turn.text]
            # A title the format names (a summary, an export's conversation name) is cleaned as the turns
            # are (not counted again): a pasted key or a private span would be every chunk's breadcrumb.
            session.title = self._withheld(session.title)[0] or session.key
            # Kept only when nothing was cut out: the text hashed is then the text stored, and the digest
            # confirms nothing a reader of the memory could not read there (a masked key, a private span).
            session.raw_sha256 = None if self.withheld_text else digest
            self.withheld_text = self.withheld_text or withheld_before
            yield session

    def _clean(self, turn: Turn) -> Turn:
        turn.text, masked = self._withheld(turn.text)
        self.secrets_masked += masked
        return turn

    def _withheld(self, text: str) -> tuple[str, int]:
        """The text without its private spans and secrets, and how many secrets were masked."""
        cleaned, masked = mask_secrets(strip_private(text).strip())
        self.withheld_text = self.withheld_text or bool(masked) or has_private(text)
        return cleaned, masked


def raw_sha256(session: Session, salt: str) -> str:
    """A digest of a session as its reader gave it, before secrets are masked and private spans cut."""
    turns = [[turn.speaker, turn.text, turn.turn_id, turn.timestamp] for turn in session.turns]
    parts = [salt, session.format, session.key, session.title, session.timestamp, session.metadata, turns]
    encoded = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def find_chat_files(path: Path) -> Iterator[Path]:
    """A file as given, or every .jsonl/.json file under a folder (sorted, hidden folders skipped)."""
    if not path.is_dir():
        yield path
        return
    for folder, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(SUFFIXES) and not name.startswith("."):
                yield Path(folder, name)


def open_chat(path: Path) -> ChatRead:
    """The reader for a file. Raises ConnectorError when it is unreadable or no known chat format."""
    check_regular(path)  # reading a FIFO would wait forever
    chat_format = detect_format(path)
    if chat_format is None and is_zip(path):
        raise ConnectorError(f"{path}: a zip archive, not a chat transcript", UNZIP_FIRST)
    if chat_format is None:
        raise ConnectorError(
            f"{path}: not a chat transcript this version reads",
            "give a Claude Code or Codex session (.jsonl), a ChatGPT or Claude.ai conversations.json, or LoCoMo JSON",
        )
    if chat_format in EXPORT_FORMATS:
        # Written whole by the service in UTF-8: undecodable bytes mean the file was re-saved in another
        # encoding, and every accented letter would be stored replaced. A session file (.jsonl) keeps
        # its lines' odd bytes replaced instead: a tool's output in Latin-1 spoils only that line.
        check_encoding(path)
    return ChatRead(path, chat_format)


EXPORT_FORMATS = {"chatgpt", "claude-ai", "locomo", "empty"}
UNZIP_FIRST = "unzip it first: a ChatGPT or Claude.ai export holds conversations.json, which ingest-chat reads"


def is_zip(path: Path) -> bool:
    """Whether a file is a zip archive (a ChatGPT or Claude.ai export as downloaded), by its first bytes."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def blank_file(path: Path) -> bool:
    """Whether a regular file holds nothing but white space (an agent's session file before its first
    record). An unreadable file, or no regular file (a FIFO would block), is not blank: reading it says why."""
    try:
        found = path.stat()
        if not stat.S_ISREG(found.st_mode) or found.st_size > BLANK_BYTES:
            return False
        head = path.read_bytes()
    except OSError:
        return False
    return not head.removeprefix(codecs.BOM_UTF8).strip()


BLANK_BYTES = 4096


def detect_format(path: Path) -> str | None:
    """Which format a file is in, from its first 64 KB, or its whole first line when that is longer
    (a session opening with a pasted log). Raises ConnectorError if it cannot be read."""
    try:
        with path.open("rb") as handle:
            raw = _head(handle)
            head = raw.decode(encoding_of(raw), "replace").lstrip("\ufeff \t\r\n")
    except OSError as error:
        raise ConnectorError(f"{path}: cannot be read ({error.strerror})", "check the path and permissions") from error
    if EMPTY_ARRAY.fullmatch(head):
        return "empty"
    if head.startswith(("[", "{")) and not _first_line_is_record(head):
        # An export cut short may end before its first "current_node": "mapping" with "create_time" is enough.
        if '"mapping"' in head and ('"current_node"' in head or '"create_time"' in head):
            return "chatgpt"
        if '"chat_messages"' in head:
            return "claude-ai"
        if '"conversation"' in head and '"speaker_a"' in head:
            return "locomo"
    for line in head.splitlines()[:20]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(record, dict) and "payload" in record and record.get("type") in CODEX_TYPES:
            return "codex"
        if isinstance(record, dict) and ("sessionId" in record or record.get("type") in CLAUDE_CODE_TYPES):
            return "claude-code"
    return None


def _head(handle: BinaryIO) -> bytes:
    """The first SNIFF_BYTES, completed to the end of the first line when they cut a JSON object line
    short: a cut record does not parse, and its file would read as no chat at all. Bounded by the
    JSONL reader's own limit (a longer line is skipped there anyway); an array export is not
    completed, its first line may be the whole file."""
    raw = handle.read(SNIFF_BYTES)
    start = raw.lstrip(b"\xef\xbb\xbf \t\r\n")
    if len(raw) == SNIFF_BYTES and start.startswith(b"{") and b"\n" not in start:
        raw += handle.readline(max(MAX_LINE - len(raw), 0))
    return raw


EMPTY_ARRAY = re.compile(r"\[\s*\]\s*")  # the whole file (an export is far longer than the head once it holds any)
CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
CLAUDE_CODE_TYPES = {"user", "assistant", "summary", "file-history-snapshot", "queue-operation", "progress"}


def _first_line_is_record(head: str) -> bool:
    """A JSONL file also starts with `{`: its first line is a whole JSON object on its own."""
    first = head.split("\n", 1)[0]
    try:
        return isinstance(json.loads(first), dict) and "\n" in head
    except (ValueError, RecursionError):  # a line nested past json's recursion limit is no record
        return False


def session_document(path: Path, session: Session) -> Document:
    """One session as a Document: the turns' text joined, each turn's span kept for the chunker.

    The uri is `<file>@<session key>`, so `mem forget --path FILE` reaches every session of a file.
    """
    parts, spans, offset = [], [], 0
    for turn in session.turns:
        body = f"{turn.speaker}: {turn.text}"
        spans.append([offset, offset + len(body), turn.speaker, turn.turn_id, turn.timestamp])
        parts.append(body)
        offset += len(body) + 2
    return Document(
        uri=f"{path}@{session.key}",
        source_type="conversation",
        title=session.title,
        text="\n\n".join(parts),
        format="turns",
        timestamp=session.timestamp if session.timestamp is not None else _first_time(session),
        locator=session.title,
        extractor=f"turns {TURNS_VERSION}",
        metadata={
            "chat_format": session.format,
            "session": session.key,
            "turns": len(session.turns),
            **session.metadata,
            **({"raw_sha256": session.raw_sha256} if session.raw_sha256 else {}),
            "_turns": spans,  # read by chunking/turns.py; underscore keys are not stored
        },
    )


def _first_time(session: Session) -> float | None:
    return next((turn.timestamp for turn in session.turns if turn.timestamp is not None), None)
