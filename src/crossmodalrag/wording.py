"""Small helpers for the sentences mem prints."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """The count with its noun agreeing: "1 problem", "2 problems", "1 source … 3 sources"."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


# Control characters (C0, DEL, C1) as Python writes them: "\r", "\x00", "\x1b". Stored text keeps them
# (--json shows the real strings); on a terminal a title's newline broke a one-line listing, and an
# escape sequence copied into a note recoloured or rewrote the screen.
_CONTROL = {code: repr(chr(code))[1:-1] for code in (*range(0x20), *range(0x7F, 0xA0))}
_CONTROL_BUT_LINES = {code: text for code, text in _CONTROL.items() if chr(code) not in "\n\t"}


def one_line(text: str) -> str:
    """Text for one line of terminal output (a title, a path): every control character escaped."""
    return text.translate(_CONTROL)


def terminal_safe(text: str) -> str:
    """Text of several lines for a terminal: control characters escaped but for newlines and tabs."""
    return text.translate(_CONTROL_BUT_LINES)
