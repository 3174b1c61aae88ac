"""The change log: one hash-chained record per change of a versioned row, in the writer's transaction.

A record is (seq, at, op, kind, target, actor, content_hash, reason) and `hash = sha256(prev_hash ||
canonical record)`. States are kept apart from the chain, in `change_states` (zlib-compressed
canonical JSON, keyed by content hash), and only once superseded (the live row is the current one):
`mem forget` erases them, puts random markers in place of their hashes and re-chains (erasure.py).

Tables join by registering a Kind (how to read one row's state, every row's state, and how to put a
state back) and wrapping each write in `changing(conn, kind, key)`, inside the same transaction: it
keeps the old state, then reads the new one back from the table (or takes it from a writer that has
it), so what is hashed is exactly what `verify` will recompute. Inside a write batch (an ingest) the
records wait in the batch and are chained and written in one go just before it commits: still the
same transaction as the rows they describe, so a crash keeps both or neither.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from crossmodalrag.errors import CMRAGError
from crossmodalrag.index.fts import on_postgres
from crossmodalrag.store.writers import lock_chain

if TYPE_CHECKING:
    from crossmodalrag.store.batch import WriteBatch

GENESIS_HASH = "0" * 64
# The reasons of a move's two records (store/documents.py move_document): `mem history` follows them back.
MOVED_FROM, MOVED_TO = "moved from ", "moved to "
GENESIS_BATCH = 10_000  # records written per executemany by the upgrade (bounded memory)
State = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """A versioned table: `read` one row's state by key (None if absent), `read_all` every (key, state),
    `restore` writes a state back (None deletes); a kind without it is skipped by rollback."""

    name: str
    read: Callable[[sqlite3.Connection, str], State | None]
    read_all: Callable[[sqlite3.Connection], Iterable[tuple[str, State]]]
    restore: Callable[[sqlite3.Connection, str, State | None], None] | None = None
    # Derived rows (rebuilt from sources, e.g. memory nodes) log only their content hash: verify still
    # sees every change, and their text, derived from sources, never outlives a forgotten source.
    derived: bool = False
    # The content hash of a state; canonical JSON by default (a kind may hash its large texts directly).
    digest: Callable[[State], str] | None = None

    def hash(self, state: State) -> str:
        return (self.digest or content_hash)(state)


KINDS: dict[str, Kind] = {}


def register_kind(kind: Kind) -> None:
    KINDS[kind.name] = kind


def _canonical_encoder() -> Callable[[Any], str]:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"))` with its C encoder made once: dumps
    makes a new one per call, which was half the cost of hashing a source's state on every write."""
    if c_make_encoder is None:  # a Python without json's C accelerator
        return json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
    encode = c_make_encoder(
        None, json.JSONEncoder().default, encode_basestring_ascii, None, ":", ",", True, False, True
    )
    return lambda value: "".join(encode(value, 0))


_encode = _canonical_encoder()


def canonical(value: Any) -> bytes:
    """One byte string per value: sorted keys, no spaces, floats as repr (exact round trip), non-ASCII
    characters escaped (json's ASCII path is twice as fast, and hashing is on every write)."""
    return _encode(value).encode("ascii")


def content_hash(state: State) -> str:
    return hashlib.sha256(canonical(state)).hexdigest()


def chain_hash(prev_hash: str, record: tuple) -> str:
    return hashlib.sha256(prev_hash.encode("ascii") + canonical(list(record))).hexdigest()


def actor_of(conn: sqlite3.Connection) -> str:
    return getattr(conn, "actor", None) or "cli"


@contextmanager
def acting(conn: sqlite3.Connection, actor: str) -> Iterator[None]:
    """Record changes made inside the block as `actor` (a store's connection carries it)."""
    before = getattr(conn, "actor", None)
    conn.actor = actor  # type: ignore[attr-defined]
    try:
        yield
    finally:
        conn.actor = before  # type: ignore[attr-defined]


def enabled(conn: sqlite3.Connection) -> bool:
    """Is versioning on for this connection? Asked once per connection (CMRAG_VERSIONING)."""
    flag = getattr(conn, "versioning", None)
    if flag is None:
        from crossmodalrag.config import load_settings

        flag = load_settings().versioning
        try:
            conn.versioning = flag  # type: ignore[attr-defined]
        except AttributeError:
            pass  # a plain sqlite3 connection: asked again next time
    return flag and has_log(conn)


def has_log(conn: sqlite3.Connection) -> bool:
    if getattr(conn, "has_change_log", False):
        return True
    if on_postgres(conn):  # PostgreSQL schema 4
        found = conn.execute("SELECT to_regclass('change_log') IS NOT NULL").fetchone()[0]
    else:
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'change_log'").fetchone() is not None
    if found:
        try:
            conn.has_change_log = True  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return found


def own_rows(conn: sqlite3.Connection, keyword: str = "WHERE") -> str:
    """The SQL condition (after `keyword`) that keeps a versioned table's rows to those this connection's
    chain records: all of them on SQLite; on PostgreSQL, where each owner has a chain of its own (the
    change_log view) and may also see a team's rows, the configured owner's."""
    return f" {keyword} owner = cmrag_owner()" if on_postgres(conn) else ""


def head(conn: sqlite3.Connection) -> tuple[int, str]:
    """(seq, hash) of the newest record; (0, GENESIS_HASH) for an empty log."""
    row = conn.execute("SELECT seq, hash FROM change_log ORDER BY seq DESC LIMIT 1").fetchone()
    return (row[0], row[1]) if row else (0, GENESIS_HASH)


INSERT_RECORDS = (
    "INSERT INTO change_log (seq, at, op, kind, target, actor, content_hash, reason, hash)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def write_records(conn: sqlite3.Connection, records: list[tuple]) -> int:
    """Chain records (at, op, kind, target, actor, content hash, reason) after the log's head and write
    them in one executemany; the caller holds the write transaction. Returns the last one's seq."""
    lock_chain(conn)  # PostgreSQL: writers run side by side, and each owner's chain has one head
    seq, prev = head(conn)
    rows = []
    for record in records:
        seq += 1
        numbered = (seq, *record)
        prev = chain_hash(prev, numbered)
        rows.append((*numbered, prev))
    conn.executemany(INSERT_RECORDS, rows)
    return seq


def append(
    conn: sqlite3.Connection,
    op: str,
    kind: str,
    target: str,
    state_hash: str | None,
    reason: str = "",
    actor: str | None = None,
) -> int | None:
    """Append one chained record; the caller holds the write transaction. Returns its seq, or None inside
    a write batch, which holds its records until it commits and then chains them in one executemany
    (a per-record SELECT of the head and INSERT were a third of what versioning added to an ingest)."""
    record = (time.time(), op, kind, target, actor or actor_of(conn), state_hash, reason)
    batch = open_batch(conn)
    if batch is not None:
        batch.collect(write_records, record)
        return None
    return write_records(conn, [record])


def keep_state(conn: sqlite3.Connection, state: State, digest: str) -> None:
    """Store a state (canonical JSON, compressed) under its content hash, once."""
    data = canonical(state)
    conn.execute(
        "INSERT OR IGNORE INTO change_states (content_hash, state) VALUES (?, ?)", (digest, zlib.compress(data, 6))
    )


def load_state(conn: sqlite3.Connection, digest: str) -> State | None:
    """The state stored under a content hash; None if it was erased (forgotten)."""
    row = conn.execute("SELECT state FROM change_states WHERE content_hash = ?", (digest,)).fetchone()
    return json.loads(zlib.decompress(row[0])) if row else None


def open_batch(conn: sqlite3.Connection) -> WriteBatch | None:
    """The write batch whose transaction is open on this connection, if any (store/connection.py)."""
    return getattr(conn, "batch", None)


def latest_hash(conn: sqlite3.Connection, kind: str, target: str) -> str | None:
    """The content hash the log last recorded for a live row (None: never recorded, deleted or
    forgotten; a forget tombstone holds the erased marker of the last version, not a live state),
    counting the records an open write batch still holds."""
    batch = open_batch(conn)
    pending = batch.collected_items(write_records) if batch is not None else ()
    for _, op, pending_kind, pending_target, _, digest, _ in reversed(pending):
        if pending_kind == kind and pending_target == target:
            return digest if op != "forget" else None
    row = conn.execute(
        "SELECT op, content_hash FROM change_log WHERE kind = ? AND target = ? ORDER BY seq DESC LIMIT 1",
        (kind, target),
    ).fetchone()
    return row[1] if row and row[0] != "forget" else None


def before_change(conn: sqlite3.Connection, kind: str, target: str) -> None:
    """Keep the row's current state before a write replaces or deletes it (inside the transaction).

    The current state of every row is the live row itself; the log stores a state's text only once it
    is superseded, which is when rollback and as-of need it. So a memory's log costs a record per
    change, and text only for what changed."""
    if not enabled(conn) or _kind(kind).derived:
        return
    state = _kind(kind).read(conn, target)
    digest = _kind(kind).hash(state) if state is not None else None
    if digest is not None and digest == latest_hash(conn, kind, target):
        keep_state(conn, state, digest)  # a row edited outside mem is not what the log recorded: not kept


def changed(
    conn: sqlite3.Connection,
    kind: str,
    target: str,
    op: str | None = None,
    reason: str = "",
    state: State | None = None,
    new: bool = False,
) -> None:
    """Record the row's current state if it differs from the last recorded one (inside the write
    transaction, after `before_change`). `op` defaults to insert, update or delete as the states say.
    A writer that has the state it just wrote passes it (exactly as the kind's `read` would return it)
    to save reading it back; one that knows the row is `new` (absent before its write) saves looking up
    its last record."""
    if not enabled(conn):
        return
    state = state if state is not None else _kind(kind).read(conn, target)
    before = None if new else latest_hash(conn, kind, target)
    if state is None:
        if before is not None:
            append(conn, op or "delete", kind, target, None, reason)
        return
    digest = _kind(kind).hash(state)
    if digest != before:
        append(conn, op or ("insert" if before is None else "update"), kind, target, digest, reason)


@contextmanager
def changing(conn: sqlite3.Connection, kind: str, target: str, reason: str = "") -> Iterator[None]:
    """Wrap a write of one row: its old state is kept before, its new one recorded after."""
    before_change(conn, kind, target)
    yield
    changed(conn, kind, target, reason=reason)


def genesis(conn: sqlite3.Connection, progress: Callable[[int, int], None] | None = None) -> int:
    """One genesis record per existing row of every kind (an upgrade: nothing re-ingested)."""
    written, records = 0, []
    for kind in KINDS.values():
        for target, state in kind.read_all(conn):
            records.append((time.time(), "genesis", kind.name, target, "migration", kind.hash(state), ""))
            if len(records) == GENESIS_BATCH:
                write_records(conn, records)
                written, records = written + len(records), []
    if records:
        write_records(conn, records)
    return written + len(records)


def _kind(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise CMRAGError(f"no versioned kind {name!r}", f"known kinds: {', '.join(sorted(KINDS))}") from None
