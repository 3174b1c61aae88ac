"""YAML frontmatter of a note, with a fast path for the simple shape most vaults use.

Nearly every note's frontmatter is a few `key: word`, `key: 2025-03-12` or `key: [a, b]` lines.
Parsing those by hand gives exactly what YAML gives, at a fraction of the cost (PyYAML took a
third of the ingest time at 10,000 notes); anything else (quotes, nesting, block lists, numbers,
YAML's yes/no/null words) goes to the real YAML parser, behind limits that hostile frontmatter
cannot get past: nesting deeper than MAX_DEPTH (libyaml's composer recurses in C and crashes the
process, not with an exception, at ~30,000 levels) and alias expansion past MAX_NODES (a
"billion laughs" document is a few hundred bytes) make the frontmatter count as malformed.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any

# A greedy value, its trailing blanks stripped in Python: a lazy `(\S.*?)[ \t]*` is quadratic
# in the length of a line full of spaces.
LINE = re.compile(r"([A-Za-z_][\w-]*):[ \t]+(\S.*)")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9 _./-]*")
FLOW_LIST = re.compile(r"\[([^\[\]{}\"'#&*!|>%@`:]*)\]")
YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null"}
MAX_DEPTH = 32  # real frontmatter nests two or three levels
MAX_NODES = 10_000  # values after alias expansion; real frontmatter has tens


def parse_frontmatter(raw: str | None) -> dict[str, Any]:
    """The frontmatter as a dict; {} when absent, malformed or not a mapping (never raises)."""
    if not raw or not raw.strip():
        return {}
    fast = _simple(raw)
    if fast is not None:
        return fast
    import yaml  # imported here: only notes with unusual frontmatter pay for it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~20x faster when present
    try:
        if _too_deep(yaml, raw, loader):
            return {}
        loaded = yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader either way
    except (ValueError, TypeError):
        # A value YAML resolves and cannot build (`date: 2023-02-30`) must not lose the other
        # fields: read again with every value a string (the date is then judged by the note's reader).
        try:
            loaded = yaml.load(raw, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))  # noqa: S506
        except (yaml.YAMLError, ValueError, TypeError, RecursionError):
            return {}
    except (yaml.YAMLError, RecursionError):
        # Malformed frontmatter stays out of the chunks and out of the metadata; the note still ingests.
        return {}
    return loaded if isinstance(loaded, dict) and _bounded(loaded) else {}


def _too_deep(yaml, raw: str, loader) -> bool:
    """Does the YAML nest deeper than MAX_DEPTH? Read from the parser's event stream, which (unlike
    composing the document) needs no recursion, and stops at the first level too deep."""
    depth = 0
    for event in yaml.parse(raw, Loader=loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
    return False


def _bounded(value: Any) -> bool:
    """Is the loaded value small, acyclic and storable? Aliases can make a tiny document expand
    exponentially or refer to itself; pure-Python YAML lets lone surrogates (`"\\ud800"`) through,
    which SQLite cannot store."""
    stack, seen = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES or depth > MAX_DEPTH:
            return False
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((part, depth + 1) for part in item)
    return True


def _simple(raw: str) -> dict[str, Any] | None:
    """Parse the simple shape, or None if any line is outside it."""
    result: dict[str, Any] = {}
    for line in raw.splitlines():
        if not line.strip():
            continue
        match = LINE.fullmatch(line)
        if not match or match.group(1).lower() in YAML_WORDS:
            return None  # `on:` or `null:` is a boolean or null key to YAML, not a string
        value = _scalar_or_list(match.group(2).rstrip(" \t"))
        if value is None:
            return None
        result[match.group(1)] = value
    return result


def _scalar_or_list(text: str) -> Any:
    if ISO_DATE.fullmatch(text):
        try:
            return date.fromisoformat(text)
        except ValueError:
            return None
    listed = FLOW_LIST.fullmatch(text)
    if listed:
        items = [item.strip() for item in listed.group(1).split(",")] if listed.group(1).strip() else []
        return items if all(_is_word(item) for item in items) else None
    return text if _is_word(text) else None


def _is_word(text: str) -> bool:
    return bool(WORD.fullmatch(text)) and text.lower() not in YAML_WORDS and " #" not in text and not text.endswith(" ")
