"""What a SQLite error means for the user: a message and a hint that fit its cause.

"Restore a backup" is advice only for a damaged file. A full disk, a read-only file or a write that
met another command's change leave the memory intact, and restoring would throw away good data.
"""

from __future__ import annotations

import sqlite3

# The search index is damaged far more often than the rest (it is rewritten most), and rebuilding it loses
# nothing: doctor tells the two apart, and only a damaged file needs a backup.
DAMAGED_HINT = (
    "run `mem doctor`: if only the search index is damaged, `mem init-db --rebuild-index` rebuilds it and loses "
    "nothing; else restore a backup (`mem restore`)"
)
READ_ONLY_HINT = "check the permissions of the database file and its folder, or copy it to a writable place"
FULL_HINT = "free disk space, then rerun the command; everything committed so far is kept"
CONFLICT_HINT = "another mem command changed the same data while this one ran; rerun the command"

BUSY_CODES = {5, 6}  # SQLITE_BUSY, SQLITE_LOCKED (their extended codes share the low byte)
DAMAGE_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")  # extended names start with these


def is_busy(error: sqlite3.Error) -> bool:
    """Did SQLite refuse because another connection holds a lock (as opposed to a real error)?"""
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in BUSY_CODES
    text = str(error)
    return "locked" in text or "busy" in text


def is_read_only(error: sqlite3.Error) -> bool:
    name = getattr(error, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_READONLY") or "readonly database" in str(error)


def is_disk_full(error: sqlite3.Error) -> bool:
    return getattr(error, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in str(error)


def explain(error: sqlite3.Error) -> tuple[str, str]:
    """(message, hint) for a SQLite error that reached a command's edge."""
    name = getattr(error, "sqlite_errorname", "") or ""
    if isinstance(error, sqlite3.IntegrityError):
        return f"a write clashed with the memory's current contents (nothing is damaged): {error}", CONFLICT_HINT
    if isinstance(error, sqlite3.OperationalError) and is_busy(error):
        return f"the database stayed locked: {error}", "another mem process is writing; retry when it finishes"
    if is_disk_full(error):
        return f"the disk is full: {error}", FULL_HINT
    if is_read_only(error):
        return f"the database file (or its folder) is read-only: {error}", READ_ONLY_HINT
    if name.startswith("SQLITE_CANTOPEN"):
        return f"cannot open the database file: {error}", "check that the file and its folder exist and are readable"
    if name.startswith(DAMAGE_CODES) or not isinstance(error, sqlite3.OperationalError):
        return f"the database is damaged: {error}", DAMAGED_HINT
    return f"database error: {error}", "run `mem init-db`; if it persists, `mem doctor` says what is wrong"
