"""Forgetting a source completely: its row, chunks, FTS entries, vectors and derived caches.

What goes, and why nothing is left behind:
  - `chunk_vectors`, `chunks` and `sources` rows are deleted explicitly (not only through ON DELETE
    CASCADE, which needs `PRAGMA foreign_keys`); any other table that points at a source or chunk
    must declare ON DELETE CASCADE (a test checks every foreign key in the schema);
  - the chunks trigger removes the FTS rows, and an FTS5 'optimize' merges the index segments,
    which otherwise keep the deleted tokens until some later merge;
  - `PRAGMA secure_delete` zeroes the freed space as it is freed; with `vacuum`, the WAL is
    checkpointed and truncated and the file rebuilt, so the bytes are gone from the disk files too;
  - the change log (versioning/) loses every stored state of the sources and keeps a tombstone: their
    uri, the time, the reason and the erased content's hash, so `mem verify` still passes;
  - the vector cache beside the database (`<db>.vectors/`: memory-mapped copies and the ANN file)
    is deleted: it is derived, and it would keep the forgotten vectors on disk until the next query.
Eval queries are kept even when their gold names a forgotten source: they are the user's own
labels, not derived data, and `mem eval` already warns about gold that matches no source.
Backups (`mem backup`) are copies the user chose to keep: forget names them, and leaves them alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from crossmodalrag import versioning
from crossmodalrag.agent.supersession import keep_updates_linked
from crossmodalrag.errors import CMRAGError, StoreError
from crossmodalrag.file_moves import stored_path
from crossmodalrag.memory.stats import forget_derived
from crossmodalrag.store import Store
from crossmodalrag.store.params import in_batches
from crossmodalrag.versioning.history import MEM_URI, resolve_source
from crossmodalrag.versioning.lineage import earlier_paths, live_copies
from crossmodalrag.versioning.log import has_log, load_state
from crossmodalrag.wording import counted

PURGING_TEXT_INDEX = "purging the forgotten words from the text index (it is rewritten whole)"
WIPING_FREE_SPACE = "wiping the freed space from the database files"


def erasing_versions(sources: int) -> str:
    return f"erasing the stored versions of {counted(sources, 'source')}"


def deleting_rows(chunks: int) -> str:
    return f"deleting {counted(chunks, 'chunk')}, their vectors and what was derived from them"


# A checkpoint waits for readers through the busy handler; readers here are short queries, so a
# reader still there after this long is a session (a server, `sync --watch`) that will not end soon.
WIPE_WAIT_SECONDS = 5.0
# How long memory_forget waits for other readers (a `mem serve`, a sync) to leave the write-ahead log:
# an agent's call must not hang on them; the log is emptied on a later checkpoint anyway.
CHECKPOINT_WAIT_SECONDS = 1.0
LAST_CHAR = "\U0010ffff"  # sorts after every character: [prefix, prefix + LAST_CHAR) is "starts with"
Stage = Callable[[str], None]  # told what a forget is doing now: its long steps cannot count their work


def _quiet(stage: str) -> None:
    pass


@dataclass(frozen=True)
class StoredSource:
    id: int | None  # None: gone from memory (deleted, moved, history rewritten), its versions still in the log
    uri: str
    source_type: str
    chunks: int
    earlier_path_of: str | None = None  # a path this source had before a move or rename (versioning/lineage.py)
    sub_agent_of: str | None = None  # the Claude Code session whose sub-agent transcript this is


@dataclass
class ForgetReport:
    """What one `forget` removed, and what the user should know afterwards."""

    sources: list[StoredSource] = field(default_factory=list)
    chunks: int = 0
    vectors: int = 0
    memory_nodes: int = 0  # events, episodes and concepts derived from the forgotten text
    stranded_events: int = 0  # remaining events whose episode or concept went: `mem build-memory` re-derives it
    vacuumed: bool = False
    eval_queries: int = 0  # stored eval queries whose gold names a forgotten source (kept)
    still_on_disk: list[str] = field(default_factory=list)  # files or repositories an ingest would re-read
    backups: list[str] = field(default_factory=list)  # backups made before: they may still hold the text
    unfinished_copies: list[str] = field(default_factory=list)  # a running backup's or restore's copy: likewise
    live_copies: list[str] = field(default_factory=list)  # the same note in memory under its newer path (kept)

    @property
    def named(self) -> list[StoredSource]:
        """The sources asked for, without the earlier paths found for them."""
        return [source for source in self.sources if source.earlier_path_of is None]

    @property
    def earlier_paths(self) -> list[StoredSource]:
        return [source for source in self.sources if source.earlier_path_of is not None]

    @property
    def sub_agents(self) -> list[StoredSource]:
        return [source for source in self.sources if source.sub_agent_of is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "forgotten": [
                {
                    "uri": s.uri,
                    "source_type": s.source_type,
                    "chunks": s.chunks,
                    "earlier_path_of": s.earlier_path_of,
                    "sub_agent_of": s.sub_agent_of,
                }
                for s in self.sources
            ],
            "sources": len(self.named),
            "earlier_paths": [s.uri for s in self.earlier_paths],
            "sub_agent_sessions": [s.uri for s in self.sub_agents],
            "chunks": self.chunks,
            "vectors": self.vectors,
            "memory_nodes": self.memory_nodes,
            "stranded_events": self.stranded_events,
            "vacuumed": self.vacuumed,
            "eval_queries_naming_them": self.eval_queries,
            "still_on_disk": self.still_on_disk,
            "backups": len(self.backups),
            "backup_paths": self.backups,
            "unfinished_copies": self.unfinished_copies,
            "live_copies": self.live_copies,
        }


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


def forget_sources(
    store: Store, sources: list[StoredSource], vacuum: bool = False, stage: Stage = _quiet
) -> ForgetReport:
    """Delete the sources and everything derived from them, in one transaction; with vacuum, also
    wipe the freed space from the database files. `stage` hears each step as it starts. Raises
    StoreError if the database stays locked or the space cannot be wiped (the sources are forgotten by then)."""
    if store.backend == "postgresql":
        from crossmodalrag.store.postgres import erase

        return erase.forget_sources(store, sources, vacuum, stage)
    report = ForgetReport(sources=list(sources))
    conn = store.conn
    secure_before = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = ON")  # zero freed pages and cells as they are freed
    try:
        with store.transaction():
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS forget_ids (id INTEGER PRIMARY KEY)")
            conn.execute("DELETE FROM temp.forget_ids")
            live = [(s.id,) for s in sources if s.id is not None]
            conn.executemany("INSERT OR IGNORE INTO temp.forget_ids VALUES (?)", live)
            stage(erasing_versions(len(sources)))
            for source in sources:  # the change log's copies of the text go too, leaving tombstones
                versioning.forgotten(conn, "source", source.uri, "mem forget")
            chunk_ids = "SELECT id FROM chunks WHERE source_id IN (SELECT id FROM temp.forget_ids)"
            report.vectors = conn.execute(
                f"SELECT COUNT(*) FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})"
            ).fetchone()[0]
            report.chunks = conn.execute(f"SELECT COUNT(*) FROM ({chunk_ids})").fetchone()[0]
            stage(deleting_rows(report.chunks))
            conn.execute(f"DELETE FROM chunk_vectors WHERE chunk_id IN ({chunk_ids})")
            keep_updates_linked(conn, [row[0] for row in live])
            conn.execute("DELETE FROM chunks WHERE source_id IN (SELECT id FROM temp.forget_ids)")  # FTS: trigger
            conn.execute("DELETE FROM sources WHERE id IN (SELECT id FROM temp.forget_ids)")
            # a forgotten source never comes back by rollback: nothing needs to know its id by uri
            conn.executemany("DELETE FROM deleted_source_ids WHERE uri = ?", [(s.uri,) for s in sources])
            report.memory_nodes, report.stranded_events = forget_derived(conn)
            conn.execute("DELETE FROM temp.forget_ids")
            stage(PURGING_TEXT_INDEX)
            _merge_fts(conn)
    except sqlite3.IntegrityError as error:
        raise StoreError(
            f"cannot forget: a table still points at these sources ({error})",
            "a table referencing sources or chunks needs ON DELETE CASCADE; report this",
        ) from error
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(secure_before)}")
    report.eval_queries = _eval_queries_naming(store, {s.uri for s in sources})
    report.still_on_disk = still_on_disk(sources)
    report.backups = existing_backups(store, first_stored(store, [s.uri for s in sources]))
    report.unfinished_copies = unfinished_copies(store)
    drop_vector_cache(store)
    if vacuum:
        stage(WIPING_FREE_SPACE)
        wipe_free_space(store)
        report.vacuumed = True
    return report


def _merge_fts(conn: sqlite3.Connection) -> None:
    """Merge the FTS5 index into one segment: deleted rows' tokens stay in older segments until
    their next merge, which may never come.

    This rewrites the whole index however little was forgotten (at 335k chunks ~10 s and ~450 MB
    written), so the CLI says what it is doing. FTS5's 'secure-delete' option (SQLite 3.42+) would
    purge only the deleted rows, but only of deletes made while it is on: the tokens of a note's
    earlier versions, which ingest deleted before, stay until a merge, and forget promises those
    are gone too. It also makes the index unreadable by an SQLite older than 3.42 (a copy of the
    database opened elsewhere). Merging an index already in one segment costs nothing."""
    conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('optimize')")


def wipe_free_space(store: Store) -> None:
    """Make deleted text unrecoverable from the database files: merge the FTS index, checkpoint and
    truncate the WAL, rebuild the file (VACUUM), truncate the WAL again. Raises StoreError if another
    connection keeps part of the WAL in use."""
    if store.backend == "postgresql":
        from crossmodalrag.store.postgres import erase

        return erase.wipe_free_space(store)
    conn = store.conn
    with store.transaction():
        _merge_fts(conn)
    try:
        with _waiting(conn, WIPE_WAIT_SECONDS):
            _checkpoint(store)
            conn.execute("VACUUM")
            _checkpoint(store)
    except sqlite3.OperationalError as error:
        raise _still_in_use(store, str(error)) from error
    drop_vector_cache(store)


def empty_write_ahead_log(store: Store) -> bool:
    """After one memory's forget (memory_forget): copy the log into the database file and truncate it,
    whether it did. The forget zeroed the memory's bytes (secure_delete) in the pages it wrote, but
    the log still held the pages as they were, text included, until a checkpoint that an always-on
    server may not see for hours. Cheap (the pages written since the last checkpoint), unlike
    wipe_free_space's VACUUM, which rewrites the whole file. PostgreSQL's log is the server's: False."""
    if store.backend != "sqlite":
        return False
    try:
        with _waiting(store.conn, CHECKPOINT_WAIT_SECONDS):
            return _log_truncated(store.conn)
    except sqlite3.OperationalError:  # locked: as busy
        return False


@contextmanager
def _waiting(conn: sqlite3.Connection, seconds: float) -> Iterator[None]:
    """The connection's busy timeout set to `seconds` while inside, then as it was."""
    waited = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    conn.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(waited)}")


def _log_truncated(conn: sqlite3.Connection) -> bool:
    """Checkpoint the write-ahead log and truncate it; False when a reader kept part of it in use."""
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy


def _checkpoint(store: Store) -> None:
    if not _log_truncated(store.conn):
        raise _still_in_use(store, "a reader kept the write-ahead log in use")


def _still_in_use(store: Store, why: str) -> StoreError:
    return StoreError(
        f"could not wipe the freed space of {store.path}: {why}; forgotten data is no longer searchable,"
        " but its bytes may remain in the database files",
        "stop other mem processes (sync --watch, servers) and run `mem forget --vacuum`",
    )


def drop_vector_cache(store: Store) -> None:
    """Delete `<db>.vectors/`: derived copies of the vectors, rebuilt from SQLite on the next query."""
    shutil.rmtree(store.path.with_name(store.path.name + ".vectors"), ignore_errors=True)


def _eval_queries_naming(store: Store, uris: set[str]) -> int:
    rows = store.conn.execute("SELECT expected_source_uris FROM queries_eval").fetchall()
    return sum(1 for (gold,) in rows if uris.intersection(json.loads(gold)))


def existing_backups(store: Store, since: float = 0.0) -> list[str]:
    """Backup files in the default backups folder, and those `mem backup` wrote elsewhere (its record
    beside the database), written since `since` (unix seconds): made before this forget, and not
    before the forgotten text was stored (an older one cannot hold it)."""
    from crossmodalrag.store.backup import backups_dir
    from crossmodalrag.store.backup_places import remembered_backups

    beside = backups_beside(store)
    if beside is None:
        return []
    folder = backups_dir(beside)
    found = [p for p in folder.iterdir() if p.suffix != ".sha256" and p.name[0] != "."] if folder.is_dir() else []
    found += remembered_backups(beside)
    return sorted({str(p) for p in found if p.is_file() and p.stat().st_mtime >= since})


def backups_beside(store: Store) -> Path | None:
    """The path `mem backup` keeps backups/ and its record of other places beside: the SQLite file, or
    on PostgreSQL this client's CMRAG_DB_PATH (store/postgres/dump.py); None when unknown."""
    return store.path if store.backend == "sqlite" else getattr(store, "local_path", None)


def first_stored(store: Store, uris: list[str]) -> float:
    """When the change log first recorded any of these sources; 0 (any backup may hold them) when it
    lacks one of them (stored with versioning off), or has them only since versioning began (a
    genesis record: stored before that)."""
    first = None
    for part in in_batches(uris):
        at, genesis, recorded = store.conn.execute(
            # CASE, not MAX(op = 'genesis'): PostgreSQL has no MAX of a boolean
            "SELECT MIN(at), MAX(CASE WHEN op = 'genesis' THEN 1 ELSE 0 END), COUNT(DISTINCT target) FROM change_log"
            " WHERE kind = 'source'"
            f" AND target IN ({','.join('?' * len(part))})",
            part,
        ).fetchone()
        if genesis or recorded < len(set(part)):  # one stored unrecorded (versioning off): whenever
            return 0.0
        first = at if first is None else min(first, at)
    return first or 0.0


def unfinished_copies(store: Store) -> list[str]:
    """Hidden whole copies of the database that backups and restores write before renaming them into
    place (`backups/.memory-….db.PID.….partial`, `.memory.db.PID.….partial` beside the database, and
    beside each backup `mem backup` wrote elsewhere). A killed one's copy is deleted now (it would hold
    the forgotten text); one a backup or restore still running writes is named instead."""
    from crossmodalrag.store.backup import backups_dir
    from crossmodalrag.store.backup_places import remembered_backups
    from crossmodalrag.store.copies import unfinished_copies as staging_copies

    beside = backups_beside(store)
    if beside is None:
        return []
    elsewhere = [path.parent for path in remembered_backups(beside)]
    folders = dict.fromkeys([backups_dir(beside), beside.parent, *elsewhere])
    return [str(path) for folder in folders for path in staging_copies(folder)]


def still_on_disk(sources: list[StoredSource]) -> list[str]:
    """Files (a chat session's too), and repositories of commits, that still exist: the next ingest or
    sync reads them again."""
    paths = [stored_path(s.uri, s.source_type) for s in sources]
    return [path for path in dict.fromkeys(paths) if os.path.lexists(path)]
