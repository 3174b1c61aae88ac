"""Include/exclude globs over source-relative POSIX paths.

`*` and `?` stay inside one folder, `**` spans folders (`work/**`, `**/draft-*.md`), `[...]` is one
character of a set or range (`daily/2019-0[1-3]*`, `[!_]*`). As in .gitignore, a pattern that
matches a folder matches everything inside it; one without a slash (`private`, `*.tmp.md`) matches a
file or folder name at any depth, one with a slash at its start or middle (`/private`, `work/old`)
from the top of the vault or repository, and one ending in a slash (`private/`) folders only. A `[`
without its `]` is the character itself.

Both sides are compared in NFC: macOS and many sync tools write file names decomposed (NFD: `e` plus a
combining accent) while a typed glob is composed, and the two forms of `Privé/**` must exclude the
same folder.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# In a stored commit's stamp when its globs hold a `[` (repositories._commit_stamp): `[12]` was the two
# characters before sets were read, so a commit they kept or left out then is looked at again.
SYNTAX = "sets"
# Likewise for a glob that matched file names and whole paths only, before a folder it names meant
# everything inside it (see read_otherwise_before).
FOLDER_SYNTAX = "folders"


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif (
            pattern[i] == "[" and (end := _set_end(pattern, i)) > 0 and (chars := _character_set(pattern[i + 1 : end]))
        ):
            out.append(chars)
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def _set_end(pattern: str, start: int) -> int:
    """Where the `]` closing the set opened at `start` is (a `]` first in the set is one of its
    characters, as in fnmatch), or -1."""
    first = start + 1 + (pattern[start + 1 : start + 2] in ("!", "^"))
    return pattern.find("]", first + 1)


def _character_set(body: str) -> str | None:
    """A regex class for a glob set's body (`!` or `^` first negates it; it never matches `/`), or
    None for one no class can be (a range backwards, `[z-a]`): its `[` is then the character."""
    negated = body[:1] in ("!", "^")
    members = body[1:] if negated else body
    escaped = "".join("\\" + c if c in "\\^[]" else c for c in members)
    regex = f"[^/{escaped}]" if negated else f"(?!/)[{escaped}]"
    try:
        re.compile(regex)
    except re.error:
        return None
    return regex


def matches(path: str, pattern: str) -> bool:
    """Does a relative POSIX path match one glob, itself or through a folder it lies in?"""
    path = unicodedata.normalize("NFC", path)
    pattern = unicodedata.normalize("NFC", pattern.strip())
    folders_only = pattern.endswith("/")
    core = pattern.strip("/")
    if not core:
        return False
    anchored = pattern.startswith("/") or "/" in core  # else: a name at any depth
    regex = _compile(core if anchored else "**/" + core)
    parts = path.split("/")
    candidates = ["/".join(parts[:end]) for end in range(1, len(parts))]  # the folders it lies in
    if not folders_only:
        candidates.append(path)
    return any(regex.match(candidate) for candidate in candidates)


def read_otherwise_before(pattern: str) -> bool:
    """Did the pattern select other paths before a folder it names meant everything inside it? Only
    those ending in `/` or `/**` read the same."""
    pattern = pattern.strip()
    return bool(pattern) and not (pattern.endswith("/") or pattern.endswith("/**"))


def selected(path: str, include: list[str], exclude: list[str]) -> bool:
    """Kept when it matches some include (or none are given) and no exclude."""
    if include and not any(matches(path, p) for p in include):
        return False
    return not any(matches(path, p) for p in exclude)
