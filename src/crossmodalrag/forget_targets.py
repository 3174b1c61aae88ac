"""What a forget names: the stored sources a uri, id or path reaches, with the sub-agent transcripts of a
session and the earlier paths and deleted versions the change log still holds (forget must reach them
too). Apart from forget.py, which erases what these find; `mem forget` shows them first to confirm."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store
from crossmodalrag.versioning.history import MEM_URI, resolve_source
from crossmodalrag.versioning.lineage import earlier_paths, live_copies
from crossmodalrag.versioning.log import has_log, load_state

LAST_CHAR = "\U0010ffff"  # sorts after every character: [prefix, prefix + LAST_CHAR) is "starts with"


@dataclass(frozen=True)
class StoredSource:
    id: int | None  # None: gone from memory (deleted, moved, history rewritten), its versions still in the log
    uri: str
    source_type: str
    chunks: int
    earlier_path_of: str | None = None  # a path this source had before a move or rename (versioning/lineage.py)
    sub_agent_of: str | None = None  # the Claude Code session whose sub-agent transcript this is


def find_sources(store: Store, uri: str | None = None, path: Path | None = None) -> list[StoredSource]:
    """The stored sources with this uri (or id, `mem://source/ID`, commit label: whatever `mem history`
    takes), or read from this file, folder or repository. Raises CMRAGError if none match."""
    if uri is not None:
        resolved = resolve_source(store.conn, uri)
        rows = _select(store, "s.uri = ?", (resolved,)) or _in_history(store, "target = ?", (resolved,))
        if not rows:
            raise _nothing_named(uri)
        return with_earlier_paths(store, rows + _sub_agents(store, rows))
    if path is None:
        raise CMRAGError("nothing to forget was named", "give a SOURCE_URI or --path PATH")
    found: dict[str, StoredSource] = {}
    for candidate in path_candidates(path):
        prefix = candidate.rstrip("/")
        for clause, params in (
            ("uri = ?", (candidate,)),
            ("uri >= ? AND uri < ?", (prefix + "/", prefix + "/" + LAST_CHAR)),  # under a folder
            ("uri >= ? AND uri < ?", (prefix + "@", prefix + "@" + LAST_CHAR)),  # a repository's commits
        ):
            found.update((row.uri, row) for row in _select(store, f"s.{clause}", params))
            history = _in_history(store, clause.replace("uri", "target"), params)
            found.update((row.uri, row) for row in history if row.uri not in found)
    if not found:
        raise CMRAGError(
            f"nothing stored was read from {path}",
            "give the path as it was ingested (a note, PDF or image file, a folder, or a repository root)",
        )
    return with_earlier_paths(store, sorted(found.values(), key=lambda s: s.uri))


def _sub_agents(store: Store, sessions: list[StoredSource]) -> list[StoredSource]:
    """The sub-agent transcripts of a Claude Code session (uris `<file>@<session>/agent-<id>`): the
    session's own work, read from its file, so forgetting the session forgets them too (`--path` of
    the file reaches them already)."""
    found: dict[str, StoredSource] = {}
    for session in sessions:
        if session.source_type != "conversation" or "@" not in session.uri:
            continue
        prefix = session.uri + "/agent-"
        clause, params = "uri >= ? AND uri < ?", (prefix, prefix + LAST_CHAR)
        rows = _select(store, f"s.{clause}", params) + _in_history(store, clause.replace("uri", "target"), params)
        for row in rows:
            if row.source_type == "conversation":
                found.setdefault(row.uri, replace(row, sub_agent_of=session.uri))
    return sorted(found.values(), key=lambda s: s.uri)


def _nothing_named(given: str) -> CMRAGError:
    """What forget says when `given` names no source: an id (`99999`, `mem://source/99999`) as an id,
    not as a uri nobody would have stored."""
    number = MEM_URI.fullmatch(given).group(1) if MEM_URI.fullmatch(given) else given
    if number.isascii() and number.isdigit():
        return CMRAGError(
            f"no source with id {int(number)}",
            "see `mem sources` for the ids (given as N or mem://source/ID); for a file or folder named so use --path",
        )
    return CMRAGError(
        f"no stored source has the uri {given!r}",
        "give a uri, a source id or mem://source/ID (see `mem sources`); a commit is <repo>@<sha> or a unique"
        " sha prefix of it; for a file or folder use --path",
    )


def with_earlier_paths(store: Store, sources: list[StoredSource]) -> list[StoredSource]:
    """The sources, then the paths they had before a move or rename: the log keeps those versions'
    text under the old uri, where `--as-of` and rollback would find it again."""
    named = {source.uri for source in sources}
    earlier = earlier_paths(store.conn, sorted(named))
    return sources + [
        StoredSource(None, uri, _stored_type(store, uri), 0, earlier_path_of=lineage)
        for uri, lineage in sorted(earlier.items())
        if uri not in named
    ]


def still_in_memory(store: Store, sources: list[StoredSource]) -> list[str]:
    """Sources not being forgotten that hold the text a forgotten one held (the note moved there since
    its old path, named here, was left; or a copy): they keep it. Call before forgetting."""
    forgotten = sorted({source.uri for source in sources})
    return [uri for uri in live_copies(store.conn, forgotten) if uri not in forgotten]


def path_candidates(path: Path) -> list[str]:
    """The spellings a path may have in stored uris: as given (absolute) and with symlinks resolved.

    Ingest resolves the vault or folder it is given but not the files inside, so a symlinked note
    is stored under its link's path and a symlinked vault under its target's.
    """
    given = Path(os.path.abspath(Path(path).expanduser()))
    return list(dict.fromkeys([str(given), str(given.resolve())]))


def _select(store: Store, clause: str, params: tuple) -> list[StoredSource]:
    rows = store.conn.execute(
        "SELECT s.id, s.uri, s.source_type, (SELECT COUNT(*) FROM chunks c WHERE c.source_id = s.id) "
        f"FROM sources s WHERE {clause}",
        params,
    ).fetchall()
    return [StoredSource(*row) for row in rows]


def _in_history(store: Store, clause: str, params: tuple) -> list[StoredSource]:
    """Sources no longer in memory whose earlier versions the change log still holds: a note deleted
    or moved, a commit history rewrote. `mem ask --as-of` and `mem rollback` can still read them, so
    forgetting must reach them too."""
    if not has_log(store.conn):
        return []
    rows = store.conn.execute(
        "SELECT l.target, l.content_hash FROM change_log l WHERE l.seq IN (SELECT MAX(seq) FROM change_log"
        " WHERE kind = 'source' AND content_hash IS NOT NULL AND " + clause + " GROUP BY target)"
        " AND NOT EXISTS (SELECT 1 FROM sources s WHERE s.uri = l.target)"
        " AND EXISTS (SELECT 1 FROM change_states c WHERE c.content_hash = l.content_hash)",
        params,
    ).fetchall()
    return [StoredSource(None, target, _type_of(store, digest), 0) for target, digest in rows]


def _type_of(store: Store, digest: str) -> str:
    return (load_state(store.conn, digest) or {}).get("source_type", "source")


def _stored_type(store: Store, uri: str) -> str:
    """The source type of a gone source's last stored version."""
    row = store.conn.execute(
        "SELECT content_hash FROM change_log WHERE kind = 'source' AND target = ? AND content_hash IS NOT NULL"
        " AND content_hash IN (SELECT content_hash FROM change_states) ORDER BY seq DESC LIMIT 1",
        (uri,),
    ).fetchone()
    return _type_of(store, row[0]) if row else "source"
