"""The PostgreSQL + pgvector backend of the Store (the `postgres` extra; CMRAG_DB_URL selects it).

Same interface as the SQLite Store: `conn` (execute/executemany with the shared SQL),
`transaction()`, `batched()`, `schema_version()`, `close()`. What differs lives here: the
connection and pool (connection.py), the dialect (sql.py), the schema (schema.py), lexical BM25 over
a tsvector (lexical.py), pgvector nearest neighbours (vectors.py) and erasure (erase.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from crossmodalrag.errors import UPGRADE_HINT, StoreError
from crossmodalrag.store.batch import WriteBatch
from crossmodalrag.store.connection import BUSY_TIMEOUT_SECONDS, Store
from crossmodalrag.store.postgres import schema
from crossmodalrag.store.postgres.batch import GroupBatch, UnitBatch
from crossmodalrag.store.postgres.connection import (
    PgConnection,
    checkout,
    pool_for,
    psycopg_modules,
    redact,
    translated_errors,
)


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and url.split(":", 1)[0] in ("postgres", "postgresql")


class PgStore(Store):
    """A Store on PostgreSQL: one pooled connection for this store's lifetime."""

    backend = "postgresql"

    def __init__(self, pool, conn: PgConnection, url: str, patience: float) -> None:
        self.pool = pool
        self.conn = conn  # type: ignore[assignment]
        self.url = url
        self.path = Path(redact(url))  # an identifier for caches keyed by store; never a file here
        self.patience = patience
        self.turns = None  # the server queues writers (an advisory lock), no lock file
        # CMRAG_DB_PATH on this client: backups/ and the record of backups written elsewhere are kept
        # beside it (`mem backup`), where `mem forget` looks for them; None when not opened from settings
        self.local_path: Path | None = None

    @property
    def location(self) -> str:
        return redact(self.url)

    def encode_vector(self, vector) -> str:
        """pgvector's text form (9 digits: a float32 reads back exactly); the server parses it."""
        return "[" + ",".join(f"{float(x):.9g}" for x in vector) + "]"

    def decode_vector(self, stored: str):
        """The float32 array of a stored vector (psycopg hands pgvector's text form over as a str)."""
        import numpy as np

        return np.array(stored[1:-1].split(","), dtype=np.float32)

    @contextmanager
    def snapshot(self) -> Iterator[PgConnection]:
        """One read transaction: every statement inside sees the snapshot its first one took
        (REPEATABLE READ), whatever other clients commit meanwhile; as the SQLite Store's."""
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        try:
            yield self.conn
        finally:
            if not (self.conn.raw.closed or self.conn.raw.broken):  # a lost connection's error says more
                self.conn.execute("ROLLBACK")

    def batched(self, max_seconds: float = 0.25, replayable: bool = False) -> WriteBatch:
        """Units that each commit alone: writers run side by side here, so a transaction holds one
        source's lock only briefly, and a unit the server aborts as colliding is all that is redone.
        `replayable` (every unit runs inside `batch.run(write)`): units committed together every
        `max_seconds`, the batch writing again those a lost transaction took (GroupBatch)."""
        if replayable:
            return GroupBatch(self.conn, max_seconds, self.patience)
        return UnitBatch(self.conn, 0.0, None, self.patience)

    def schema_version(self) -> int:
        return schema.applied_version(self.conn)

    def recover(self) -> bool:
        """A connection the server dropped (a restart, an administrator's kill) is given back to the
        pool, which discards it, and replaced: a long-lived client (`mem chat`) carries on."""
        if self.conn is None or not (self.conn.raw.closed or self.conn.raw.broken):
            return False
        self.pool.putconn(self.conn.raw)
        with translated_errors():
            self.conn.raw = checkout(self.pool, self.url)
        return True

    def close(self) -> None:
        if self.conn is not None:
            self.pool.putconn(self.conn.raw)
            self.conn = None  # type: ignore[assignment]


def open_postgres_store(
    url: str,
    owner: str = "",
    create: bool = True,
    statement_timeout: float = BUSY_TIMEOUT_SECONDS,
    read_only: bool = False,
) -> PgStore:
    """Connect (through the pool), check and migrate the schema. Raises StoreError if the server is
    unreachable, the schema is missing and `create` is off, or it is newer than this program.
    `read_only`: the server refuses every write on this store, and the schema must be current."""
    pool = pool_for(url, owner, statement_timeout, read_only=read_only)
    conn = PgConnection(checkout(pool, url))
    store = PgStore(pool, conn, url, statement_timeout)
    try:
        version = schema.applied_version(conn)
        if read_only and version and version < schema.LATEST_VERSION:
            raise _older_schema(store, version, "a command that only reads never does")
        if read_only and version < schema.LATEST_VERSION:
            raise StoreError(
                f"{store.location} has PostgreSQL schema version {version}, this program's is {schema.LATEST_VERSION}",
                "run `mem init-db` once to create or upgrade it (the server opens it read-only)",
            )
        if version > schema.LATEST_VERSION:
            raise StoreError(
                f"{store.location} has PostgreSQL schema version {version}, newer than this program's "
                f"{schema.LATEST_VERSION}",
                UPGRADE_HINT,
            )
        if version < schema.LATEST_VERSION:
            if not create and version == 0:
                raise StoreError(f"no memory schema in {store.location}", "run `mem init-db` first")
            _upgrade(store, version)
    except BaseException:
        store.close()
        raise
    return store


def _upgrade(store: PgStore, version: int) -> None:
    """Migrate the schema. A memory an older mem made, opened by a role that may not change its tables
    (a team member: only the tables' owner may), is one line saying who upgrades it, not the server's
    "permission denied for schema public". Raises StoreError."""
    psycopg, _ = psycopg_modules()
    try:
        schema.migrate(store.conn)
    except StoreError as error:
        if version and isinstance(error.__cause__, psycopg.errors.InsufficientPrivilege):
            raise _older_schema(store, version) from error
        raise


def _older_schema(store: PgStore, version: int, why: str = "") -> StoreError:
    return StoreError(
        f"the memory schema of {store.location} (version {version}) is older than this mem's ({schema.LATEST_VERSION})",
        f"the database's owner runs `mem init-db` once to upgrade it{f'; {why}' if why else ''}",
    )
