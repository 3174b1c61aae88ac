"""A source's earlier paths: the uris it had before a move or rename, as the change log holds them.

The log records a move as the new path's insert and the old path's delete (a source is keyed by its
uri, and the uri, locator and fingerprint all change with the path), so the old path's versions stay
in `change_states` and `mem ask --as-of` and `mem rollback` can bring its text back. What ties the two
is the text: each chunk is a crumb (headings, or the title, which a rename changes) then a span of the
document, `char_end - char_start` characters long, and those spans are the same under either path.
So a source gone from memory whose stored version holds exactly the document text of one of these
sources' versions is the same note under an earlier path, and forgetting must erase it too. A note moved
and edited between two ingests holds other text: the log cannot tell it from another note.
"""

from __future__ import annotations

import hashlib
import sqlite3

from crossmodalrag.store.params import MAX_BOUND
from crossmodalrag.versioning.log import State, has_log, load_state
from crossmodalrag.versioning.sources import read_source


def document_text_key(state: State) -> str:
    """A digest of the document text a state holds, without what depends on its path (crumbs, locator)."""
    digest = hashlib.sha256()
    for chunk in state["chunks"]:
        text, span = chunk[0], _span_length(chunk)
        body = text[len(text) - span :] if 0 < span <= len(text) else text
        data = body.encode("utf-8", "surrogatepass")
        digest.update(b"%d:" % len(data))
        digest.update(data)
    return digest.hexdigest()


def _span_length(chunk: list) -> int:
    start, end = chunk[2], chunk[3]
    return end - start if isinstance(start, int) and isinstance(end, int) else 0


def earlier_paths(conn: sqlite3.Connection, uris: list[str]) -> dict[str, str]:
    """Earlier uri → the given uri whose lineage it is: sources gone from memory whose stored versions
    hold the same document text as a version of one of `uris`, followed back through several moves."""
    if not has_log(conn):
        return {}
    gone = _gone_versions(conn, set(uris))
    keys = {key: uri for uri in uris for key in _keys_of(conn, uri)}
    found: dict[str, str] = {}
    while True:
        matched = {uri: keys[key] for uri, own in gone.items() if uri not in found for key in own if key in keys}
        if not matched:
            return found
        for uri, lineage in matched.items():  # a match's own other versions lead further back
            found[uri] = lineage
            keys.update((key, lineage) for key in gone[uri] if key not in keys)


def live_copies(conn: sqlite3.Connection, uris: list[str]) -> list[str]:
    """Sources in memory now holding the document text some logged version of `uris` held: the same
    note under the path it moved to since one of `uris` was left, or a copy. Forgetting erases `uris`
    and their history, not them, so the user must be told the text is still there. Only sources of a
    title those versions had are read."""
    if not has_log(conn):
        return []
    states = [state for uri in uris for state in _states_of(conn, uri)]
    keys, titles = {document_text_key(state) for state in states}, {state.get("title") for state in states}
    forgotten = set(uris)
    found = []
    for uri in _sources_titled(conn, sorted(t for t in titles if t)):
        if uri in forgotten:  # erased anyway: reading its text would only cost time
            continue
        state = read_source(conn, uri)
        if state is not None and state["chunks"] and document_text_key(state) in keys:
            found.append(uri)
    return sorted(set(found))


def _sources_titled(conn: sqlite3.Connection, titles: list[str]) -> list[str]:
    """The uris of sources in memory with one of these titles, in one pass over `sources`: no index is
    on title, so a query per title (or per slice of titles) scans every source again, and forgetting a
    whole vault took minutes. Past one slice, reading every title beats scanning once per slice."""
    if not titles:
        return []
    if len(titles) <= MAX_BOUND:
        marks = ",".join("?" * len(titles))
        return [uri for (uri,) in conn.execute(f"SELECT uri FROM sources WHERE title IN ({marks})", titles)]
    wanted = set(titles)
    return [uri for uri, title in conn.execute("SELECT uri, title FROM sources") if title in wanted]


def _keys_of(conn: sqlite3.Connection, uri: str) -> set[str]:
    """The document-text keys of a source's live row and every version the log still holds."""
    return {document_text_key(state) for state in _states_of(conn, uri)}


def _states_of(conn: sqlite3.Connection, uri: str) -> list[State]:
    """A source's live row and every version the log still holds, those holding text."""
    states = [read_source(conn, uri)] + [load_state(conn, digest) for digest in _stored_digests(conn, uri)]
    return [state for state in states if state is not None and state["chunks"]]


def _stored_digests(conn: sqlite3.Connection, uri: str) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT content_hash FROM change_log"
        " WHERE kind = 'source' AND target = ? AND content_hash IS NOT NULL",
        (uri,),
    ).fetchall()
    return [row[0] for row in rows]


def _gone_versions(conn: sqlite3.Connection, exclude: set[str]) -> dict[str, set[str]]:
    """uri → document-text keys of the stored versions of sources no longer in memory (one read each)."""
    rows = conn.execute(
        "SELECT DISTINCT l.target, l.content_hash FROM change_log l WHERE l.kind = 'source'"
        " AND l.content_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.uri = l.target)"
        " AND EXISTS (SELECT 1 FROM change_states c WHERE c.content_hash = l.content_hash)"
    ).fetchall()
    versions: dict[str, set[str]] = {}
    for target, digest in rows:
        state = load_state(conn, digest) if target not in exclude else None
        if state is not None and state["chunks"]:  # an empty version holds no text to erase, and matches any
            versions.setdefault(target, set()).add(document_text_key(state))
    return versions
