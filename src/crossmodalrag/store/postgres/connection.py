"""A PostgreSQL connection that speaks the sqlite3 surface the shared code uses.

`execute`/`executemany` with `?` placeholders (rewritten by sql.translate), rows that index by
position and by column name (like sqlite3.Row), a cursor with `lastrowid` and `rowcount`, and
`BEGIN IMMEDIATE` opening a write transaction. Unlike SQLite, writers run side by side: each one
locks only the sources it writes (`lock_source`: a transaction-scoped advisory lock on the owner and
uri), so two clients writing different notes never wait for each other, two writing the same note
take turns (bounded by `lock_timeout`), and readers never wait (MVCC). A write the server aborts
because it collided with another one (serialization failure, deadlock) raises WriteConflict, which
`store.writers.retrying` runs again. Connections come from a psycopg_pool pool per (url, owner),
each set up with the statement timeout and the owner that row-level security checks.
"""

from __future__ import annotations

import json
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Iterable, Iterator, Sequence

from crossmodalrag.errors import MissingExtraError, StoreError, WriteConflict
from crossmodalrag.store.postgres.sql import translate
from crossmodalrag.store.writers import retrying
from crossmodalrag.url_secrets import redact  # noqa: F401 - imported from here by the store's other modules

SCHEMA_LOCK = 0x636D7261  # "cmra": the advisory lock key of schema migrations (one at a time)
CHAIN_LOCK = 0x636D6C67  # "cmlg": with the owner's hash, the lock on one owner's change-log head
ID_BLOCK = 1024  # ids drawn from a table's sequence at a time (new_ids)
# A plain INSERT whose VALUES holds only parameters (executemany writes it as multi-row VALUES). Not
# ON CONFLICT DO UPDATE: one statement may not update the same row twice, as consecutive ones may.
MULTI_ROW = re.compile(r"\A(INSERT INTO \S+ \([^()]*\) VALUES )(\((?:%s, )*%s\))( ON CONFLICT DO NOTHING)?\Z")
MAX_PARAMETERS = 65535  # the protocol's limit per statement
INSTALL_HINT = 'pip install -e ".[postgres]"'
OWNER_HINT = "CMRAG_DB_OWNER must name your role or a role you are a member of"


def psycopg_modules():
    """(psycopg, psycopg_pool). Raises MissingExtraError without the postgres extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as error:
        raise MissingExtraError(
            f"CMRAG_DB_URL names PostgreSQL but its driver is not installed ({error.name})", INSTALL_HINT
        ) from error
    return psycopg, psycopg_pool


class Row(tuple):
    """A result row: by position, by column name, and dict(row), like sqlite3.Row. Each result's
    columns are a subclass's class attribute (row_type), so making a row is the bare tuple
    constructor: a per-row Python __new__ was two thirds of fetching a query's 2,000 postings."""

    names: dict[str, int] = {}

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


@lru_cache(maxsize=512)
def row_type(columns: tuple[str, ...]) -> type[Row]:
    """The Row subclass of one result shape (its column names)."""
    return type("Row", (Row,), {"names": {name: i for i, name in enumerate(columns)}, "__slots__": ()})


def _row_factory(cursor):
    return row_type(tuple(column.name for column in cursor.description or ()))


@contextmanager
def translated_errors() -> Iterator[None]:
    """Raise the server's errors as the shared code expects them: a collision with another writer as
    WriteConflict (which `retrying` runs again), a timeout, lock wait or lost connection as StoreError."""
    psycopg, _ = psycopg_modules()
    try:
        yield
    except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as error:
        raise WriteConflict(
            f"PostgreSQL aborted a write that collided with another client's: {str(error).strip().splitlines()[0]}",
            "nothing of it was kept; run the command again",
        ) from error
    except psycopg.errors.ReadOnlySqlTransaction as error:
        raise StoreError(
            f"this PostgreSQL session is read-only: {str(error).strip()}", "the server (mem serve) only reads"
        ) from error
    except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as error:
        raise StoreError(
            f"PostgreSQL gave up waiting: {str(error).strip()}",
            "another mem client writes the same source or the query ran past the statement timeout "
            "(CMRAG_DB_STATEMENT_TIMEOUT); retry",
        ) from error
    except psycopg.errors.InsufficientPrivilege as error:
        refused = str(error).strip().splitlines()[0]
        raise StoreError(f"PostgreSQL refused: {refused}", _grant_hint(refused)) from error
    except psycopg.OperationalError as error:
        raise StoreError(f"lost the PostgreSQL connection: {str(error).strip()}", "check the server") from error


def _grant_hint(message: str) -> str:
    """Who must do what about a refused privilege (docs/scaling.md, "Several users")."""
    if "extension" in message:
        return "a superuser runs CREATE EXTENSION vector in this database once; then `mem init-db`"
    if "row-level security" in message:
        return OWNER_HINT
    if "schema public" in message:
        return "the database's owner runs `mem init-db` first (it creates the tables every user shares)"
    return "the database's owner grants it, or runs this command"


class Cursor:
    """The part of sqlite3.Cursor the shared code reads."""

    def __init__(self, cursor, returns_id: bool, pipeline=None) -> None:
        self._cursor = cursor
        self._pipeline = pipeline  # psycopg's open pipeline, whose results arrive when asked for
        self._consumed = returns_id  # the RETURNING id row is the lastrowid, not a result
        self._lastrowid: list = []  # read when first asked for: in a pipeline, reading waits

    @property
    def lastrowid(self):
        if self._consumed and not self._lastrowid:
            self._settle()
            with translated_errors():
                row = self._cursor.fetchone()
            self._lastrowid.append(row[0] if row else None)
        return self._lastrowid[0] if self._lastrowid else None

    def _settle(self) -> None:
        """In a pipeline, wait for this statement's result (one round trip for every statement sent)."""
        if self._pipeline is not None and self._cursor.pgresult is None:
            with translated_errors():
                self._pipeline.sync()

    @property
    def rowcount(self) -> int:
        self._settle()
        return self._cursor.rowcount

    @property
    def description(self):
        return self._cursor.description

    def fetchone(self):
        if self._consumed:
            return None
        self._settle()
        with translated_errors():
            return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self) -> list:
        if self._consumed:
            return []
        self._settle()
        with translated_errors():
            return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self) -> Iterator:
        return iter(self.fetchall())


def _as_json(params: Sequence[Any], positions: tuple[int, ...]) -> tuple:
    """The parameters, those at `positions` as JSON text (see sql.Statement)."""
    values = tuple(params)
    if not positions:
        return values
    return tuple(json.dumps(v, ensure_ascii=False) if i in positions else v for i, v in enumerate(values))


class PgConnection:
    """One pooled psycopg connection in autocommit mode: transactions are explicit, as on SQLite."""

    backend = "postgresql"
    actor: str = "cli"
    versioning: bool | None = None  # None: ask the settings on first write (versioning/log.py)
    has_change_log: bool = False  # known to exist (schema 4); versioning/log.py looks it up once
    batch = None  # the write batch whose transaction is open on this connection (store/connection.py)

    def __init__(self, raw) -> None:
        self.raw = raw
        self.row_factory = None  # accepted for compatibility; rows are always Row
        self.open_pipeline = None  # inside `pipeline()`: psycopg's Pipeline
        self.free_ids: dict[str, list[int]] = {}  # drawn from a sequence, not used yet (new_ids)
        self.id_blocks: dict[str, int] = {}  # how many ids the next draw takes

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        if sql.strip().upper() == "BEGIN IMMEDIATE":  # SQLite's writer lock; here locks are per source
            sql = "BEGIN"
        statement = translate(sql)
        values = _as_json(params or (), statement.json_params)
        cursor = self._run(lambda cur: cur.execute(statement.text, values))
        return Cursor(cursor, statement.returns_id, self.open_pipeline)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Cursor:
        statement = translate(sql)
        query = statement.text.removesuffix(" RETURNING id")
        values = [_as_json(row, statement.json_params) for row in rows]
        insert = MULTI_ROW.match(query)
        if insert and len(values) > 1:
            return self._insert_many(insert, values)
        return Cursor(self._run(lambda cur: cur.executemany(query, values)), False, self.open_pipeline)

    def _insert_many(self, insert: re.Match, values: list[tuple]) -> Cursor:
        """A plain INSERT of many rows as multi-row VALUES statements: one statement for the server
        to parse, plan and run instead of one per row (a note's chunks, an ingest's change log).
        Returns the last statement's cursor."""
        head, row, tail = insert.groups()
        per_statement = max(1, MAX_PARAMETERS // len(values[0]))
        for start in range(0, len(values), per_statement):
            part = values[start : start + per_statement]
            text = head + ", ".join([row] * len(part)) + (tail or "")
            flat = [v for value in part for v in value]
            cursor = self._run(lambda cur, text=text, flat=flat: cur.execute(text, flat))
        return Cursor(cursor, False, self.open_pipeline)

    def new_ids(self, table: str, count: int) -> list[int]:
        """`count` new ids for `table`, increasing, from its sequence; drawn in blocks growing to
        ID_BLOCK (one round trip per block, not per note; a one-off write draws just what it uses). A
        sequence never gives a value twice, whatever the transactions do, and ids left unused when the
        store closes are gaps, as a rolled-back insert leaves."""
        free = self.free_ids.setdefault(table, [])
        if len(free) < count:
            block = self.id_blocks.get(table, 1)
            self.id_blocks[table] = min(block * 4, ID_BLOCK)
            rows = self.execute(
                "SELECT nextval(pg_get_serial_sequence(?, 'id')) FROM generate_series(1, ?)",
                (table, max(count - len(free), block)),
            )
            free.extend(sorted(row[0] for row in rows))
        ids = free[:count]
        del free[:count]
        return ids

    def lock_source(self, uri: str) -> None:
        """Wait (at most lock_timeout) until no other transaction writes this owner's source `uri`;
        held until this transaction ends. Raises StoreError if it stays taken."""
        key = "SELECT pg_advisory_xact_lock(hashtextextended(cmrag_owner() || chr(1) || %s, 0))"
        self._run(lambda cur: cur.execute(key, (uri,)))

    def in_failed_transaction(self) -> bool:
        """Has the server aborted this connection's open transaction (only ROLLBACK runs now)?"""
        psycopg, _ = psycopg_modules()
        return self.raw.info.transaction_status == psycopg.pq.TransactionStatus.INERROR

    def lock_chain(self) -> None:
        """Wait until no other transaction appends to this owner's change log; held until this one
        ends, so the chain head read next is the one this transaction's records follow. (A two-key
        advisory lock: a key space apart from the sources' one-key locks.)"""
        self._run(lambda cur: cur.execute("SELECT pg_advisory_xact_lock(%s, hashtext(cmrag_owner()))", (CHAIN_LOCK,)))

    def lock_schema(self) -> None:
        """Wait until no other client migrates the schema; held until this transaction ends."""
        self._run(lambda cur: cur.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,)))

    def _run(self, action):
        """Run one statement. Outside a transaction it is a transaction of its own (a reader's query),
        so one the server aborts as colliding (serializable isolation) is simply run again here."""
        psycopg, _ = psycopg_modules()
        if self.raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return retrying(lambda: self._run_once(action))
        return self._run_once(action)

    def _run_once(self, action):
        with translated_errors():  # a closed connection fails at the cursor already
            cursor = self.raw.cursor(row_factory=_row_factory)
            action(cursor)
        return cursor

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Send the statements of the block without waiting for each one's reply: they go out together
        and the block's end (or the first result read inside it) waits once (psycopg's pipeline mode).
        An error of any of them is raised there, as StoreError/WriteConflict; the server then aborted
        the transaction."""
        outer, threshold = self.open_pipeline, self.raw.prepare_threshold
        # No server-side prepared statements in a pipeline: one sent after a statement that failed is
        # skipped by the server, yet psycopg counts it as prepared ("prepared statement does not exist"
        # when the batch writes its units again).
        self.raw.prepare_threshold = None
        try:
            with translated_errors(), self.raw.pipeline() as pipeline:
                self.open_pipeline = pipeline
                yield
        finally:
            self.open_pipeline, self.raw.prepare_threshold = outer, threshold

    def close(self) -> None:
        """Closing a pooled connection is the pool's job (PgStore.close returns it)."""


_POOLS: dict[tuple[str, str, bool], Any] = {}
_POOLS_LOCK = threading.Lock()


def owner_refusal(conn, owner: str) -> str | None:
    """Why the connecting role cannot use `owner` (CMRAG_DB_OWNER), or None. Checked once per pool:
    row-level security would otherwise show such a user an empty memory, without a word, and refuse
    only their first write."""
    if not owner:
        return None  # cmrag_owner() is the connecting role itself
    user, exists, member = conn.execute(
        "SELECT current_user, r.oid IS NOT NULL, COALESCE(pg_has_role(current_user, r.oid, 'MEMBER'), false)"
        " FROM (SELECT 1) AS one LEFT JOIN pg_roles r ON r.rolname = %s",
        (owner,),
    ).fetchone()
    if not exists:
        return f"CMRAG_DB_OWNER is {owner!r}, which is no role of this server"
    if not member:
        return f"CMRAG_DB_OWNER is {owner!r}, a role {user} is not a member of"
    return None


def pool_for(url: str, owner: str, statement_timeout: float, connect_timeout: float = 5.0, read_only: bool = False):
    """The process's pool for this server and owner (opened once). Raises StoreError if unreachable
    or if the connecting role may not use the owner (owner_refusal). A read-only pool's sessions
    refuse every write in the server (`mem serve`, as SQLite's mode=ro)."""
    psycopg, psycopg_pool = psycopg_modules()
    key = (url, owner, read_only)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is not None and not pool.closed:
            return pool

        def configure(conn) -> None:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT set_config('statement_timeout', %s, false)", (f"{int(statement_timeout * 1000)}",))
                cur.execute("SELECT set_config('lock_timeout', %s, false)", (f"{int(statement_timeout * 1000)}",))
                cur.execute("SELECT set_config('cmrag.owner', %s, false)", (owner,))
                cur.execute(
                    "SELECT set_config('default_transaction_read_only', %s, false)", ("on" if read_only else "off",)
                )

        try:  # one direct attempt first: a server that is down fails now, not after the pool's timeout
            with psycopg.connect(url, connect_timeout=max(1, int(connect_timeout))) as probe:
                refused = owner_refusal(probe, owner)
        except psycopg.Error as error:
            raise _unreachable(url, error) from error
        if refused:
            raise StoreError(refused, OWNER_HINT)
        pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=8,
            kwargs={"connect_timeout": max(1, int(connect_timeout))},
            configure=configure,
            open=False,
            name="mem",
        )
        try:
            pool.open(wait=True, timeout=connect_timeout)
        except (psycopg_pool.PoolTimeout, psycopg.Error) as error:
            pool.close()
            raise _unreachable(url) from error
        _POOLS[key] = pool
        return pool


def _unreachable(url: str, error: Exception | None = None) -> StoreError:
    why = f": {str(error).strip().splitlines()[0]}" if error is not None and str(error).strip() else ""
    return StoreError(
        f"cannot reach PostgreSQL at {redact(url)}{why}",
        "check CMRAG_DB_URL and that the server is running (unset CMRAG_DB_URL to use the SQLite memory)",
    )


QUICK_CHECKOUT = 1.0  # seconds: a pool whose server is up hands out a connection well within this
POOL_PATIENCE = 30.0  # seconds: how long a request waits for a connection other requests hold


def checkout(pool, url: str, connect_timeout: float = 2.0):
    """A connection from the pool. When none comes at once, the server is asked directly: a pool whose
    server went down kept every request waiting POOL_PATIENCE seconds for a connection that could not
    come, then failed with a traceback (`mem serve`: a plain 500 after 30 s, where the CLI says so within
    a second). Raises StoreError: the server is unreachable, or every connection stayed busy."""
    psycopg, psycopg_pool = psycopg_modules()
    try:
        return pool.getconn(timeout=QUICK_CHECKOUT)
    except psycopg_pool.PoolTimeout:
        pass
    try:
        psycopg.connect(url, connect_timeout=max(1, int(connect_timeout))).close()
    except psycopg.Error as error:
        raise _unreachable(url, error) from error
    try:  # the server is up: the pool is busy with other requests
        return pool.getconn(timeout=POOL_PATIENCE - QUICK_CHECKOUT)
    except psycopg_pool.PoolTimeout as error:
        raise StoreError(
            f"PostgreSQL at {redact(url)} gave no free connection in {POOL_PATIENCE:.0f} s",
            "too many requests at once: try again shortly",
        ) from error


def close_pools() -> None:
    """Close every pool of this process (tests; a server shutting down)."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.close()
        _POOLS.clear()
