"""Writers side by side (PostgreSQL): a lock per source and per change-log chain, and running again a
write the server aborted.

On SQLite a write transaction already excludes every other writer, so both are no-ops there.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from crossmodalrag.errors import WriteConflict

# Tries of a write the server aborted as colliding (PostgreSQL): ~25 s of jittered backoff in all. Under
# SERIALIZABLE, four writers on a loaded machine still collided after 12 tries (~5 s), and a write that
# waits its turn beats one that fails.
CONFLICT_ATTEMPTS = 40
T = TypeVar("T")


def retrying(write: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run `write` (one whole transaction or write-batch unit) again, with jittered backoff, while the
    server aborts it as colliding with a concurrent writer (WriteConflict: PostgreSQL only; nothing of
    the aborted try was kept). Raises the last WriteConflict after `attempts` tries."""
    delay = 0.01
    for attempt in range(attempts):
        try:
            return write()
        except WriteConflict:
            if attempt == attempts - 1:
                raise
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def retried_transaction(store, body: Callable[..., T]) -> T:
    """Run `body(conn)` inside one write transaction of `store`, and the whole transaction again (as
    `retrying`) when the server aborts it as colliding: for commands whose one transaction does all
    their writing (rollback, checkpoint, verify --accept)."""

    def once() -> T:
        with store.transaction() as conn:
            return body(conn)

    return retrying(once)


def lock_source(conn, uri: str) -> None:
    """Inside a write transaction: wait until no other writer holds source `uri` (PostgreSQL, where
    writers run side by side). On SQLite the transaction's write lock already excludes every writer."""
    lock = getattr(conn, "lock_source", None)
    if lock is not None:
        lock(uri)


def lock_chain(conn) -> None:
    """Inside a write transaction, before reading the change log's head: wait until no other writer
    appends to the same chain (PostgreSQL: one chain per owner). A no-op on SQLite, as lock_source."""
    lock = getattr(conn, "lock_chain", None)
    if lock is not None:
        lock()
