"""Checking what an agent asks to remember before anything is stored: the content and context cleaned
(private spans dropped, secrets masked) and the tags, importance and kind validated, each refusal an
InvalidMemory saying what to give instead. Apart from memories.py, which stores what passes."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from crossmodalrag.chunking.turns import CONTEXT_CHARS, clip
from crossmodalrag.connectors.chats.secrets import mask_secrets
from crossmodalrag.errors import CMRAGError
from crossmodalrag.privacy import strip_private

MAX_CHARS = 20_000
MAX_CONTEXT_CHARS = 2_000  # accepted; its first CONTEXT_CHARS are kept, as a chat turn keeps the one before it
MAX_TAGS = 20
KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
TAG = re.compile(r"^[\w][\w./:-]{0,63}$")


class InvalidMemory(CMRAGError):
    """A memory's content or attributes are unusable (empty, too long, out of range)."""


def clean_content(content: Any) -> tuple[str, int]:
    """The text to store and how many secrets were masked in it: `<private>` spans dropped, API keys,
    tokens and passwords masked as in chat transcripts (agents paste them too). Raises InvalidMemory."""
    if not isinstance(content, str):
        raise InvalidMemory("a memory's content must be text", "pass the memory as a string")
    if len(content) > MAX_CHARS * 2:
        raise InvalidMemory(f"a memory is at most {MAX_CHARS} characters", "store a summary, or ingest the file")
    text, masked = mask_secrets(trim_invisible(strip_private(content)))
    if not text:
        raise InvalidMemory("the memory is empty (or all of it was <private>)", "give the text to remember")
    if len(text) > MAX_CHARS:
        raise InvalidMemory(f"a memory is at most {MAX_CHARS} characters", "store a summary, or ingest the file")
    return text, masked


def trim_invisible(text: str) -> str:
    """The text without the spaces and invisible format characters at its ends (zero-width space,
    word joiner, byte order mark: Unicode's Cf), which `str.strip` keeps: a memory of only those is
    empty, not an invisible title that search returns. Inside, they stay (an emoji's joiner)."""
    start, end = 0, len(text)
    while start < end and _invisible(text[start]):
        start += 1
    while end > start and _invisible(text[end - 1]):
        end -= 1
    return text[start:end]


def _invisible(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) == "Cf"


def clean_context(context: Any) -> tuple[str, int]:
    """The stored context (private spans dropped, secrets masked, one line, clipped) and how many
    secrets were masked. Raises InvalidMemory."""
    if context is None:
        return "", 0
    if not isinstance(context, str) or len(context) > MAX_CONTEXT_CHARS:
        raise InvalidMemory(
            f"context must be text of at most {MAX_CONTEXT_CHARS} characters", "pass what the memory replies to"
        )
    text, masked = mask_secrets(strip_private(context))
    return clip(text, CONTEXT_CHARS), masked


def check_attributes(tags: Any, importance: Any, kind: Any) -> tuple[list[str], float, str]:
    """Validated (tags, importance, kind). Raises InvalidMemory."""
    if isinstance(tags, str):
        tags = [t for t in re.split(r"[,\s]+", tags) if t]
    if not isinstance(tags, list) or len(tags) > MAX_TAGS or not all(isinstance(t, str) and TAG.match(t) for t in tags):
        raise InvalidMemory(f"tags must be up to {MAX_TAGS} words of letters, digits, ./:_-", "e.g. tags ops,deploy")
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 1:
        raise InvalidMemory("importance must be a number from 0 to 1", "e.g. 0.8 for something to keep in mind")
    if not isinstance(kind, str) or not KIND.match(kind):
        raise InvalidMemory("kind must be one short lowercase word", "e.g. fact, decision, preference, task, note")
    return sorted({t.lower() for t in tags}), float(importance), kind
