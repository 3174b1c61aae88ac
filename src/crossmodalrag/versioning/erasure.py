"""Erasing rows' history for `mem forget`: their stored states, and the content hashes that name them.

A content hash of an erased state is an oracle: with the rest of a note stored again, hashing the note
with each guess for a private span (a PIN) confirms the right one. So erasing replaces every record's
hash of an erased state with a random marker (`erased:` and 16 random hex digits, one per distinct
state, so a diff of two erased versions still sees that they differed) and re-chains the log from the
first record it rewrote: the chain covers the content hashes, and a chain hash computed over the old
one would be the same oracle. `mem verify` proves the re-chained log as any other; a head hash noted
before a forget no longer matches (the tombstone names the forget; note the new head).
"""

from __future__ import annotations

import secrets
import sqlite3

from crossmodalrag.store.writers import lock_chain
from crossmodalrag.versioning.log import GENESIS_HASH, append, chain_hash, has_log

ERASED = "erased:"
RECHAIN_BATCH = 10_000  # records re-chained per read (bounded memory on a long log)
UNERASED = f"content_hash IS NOT NULL AND content_hash NOT LIKE '{ERASED}%'"


def is_erased(digest: str | None) -> bool:
    return digest is not None and digest.startswith(ERASED)


class Erasure:
    """One forget's erasures, in its transaction: `forget` and `erase` rewrite records' hashes, and
    `finish` re-chains the log once from the earliest record rewritten (before the commit)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.since: int | None = None  # the earliest seq whose record was rewritten
        self.active = has_log(conn)  # done even with versioning off: forgetting must reach the log too
        if self.active:
            lock_chain(conn)  # PostgreSQL: no writer appends to this chain while it is rewritten

    def forget(self, kind: str, target: str, reason: str = "forgotten") -> None:
        """Erase every stored state of a row and its hashes, and append a tombstone naming the marker
        of its last version."""
        if not self.active:
            return
        digests = self._digests(kind, [target])
        self.conn.executemany("DELETE FROM change_states WHERE content_hash = ?", [(d,) for d in digests])
        markers = self._mark(kind, [target], digests)
        last = self.conn.execute(
            "SELECT content_hash FROM change_log WHERE kind = ? AND target = ? AND content_hash IS NOT NULL"
            " ORDER BY seq DESC LIMIT 1",
            (kind, target),
        ).fetchone()
        last_marker = markers.get(last[0], last[0]) if last else None
        append(self.conn, "forget", kind, target, last_marker, reason)

    def erase(self, kind: str, targets: list[str]) -> None:
        """Replace the hashes and keys of rows already deleted whose states the log never kept (derived
        rows: a memory node's id is itself a hash of its statement, so it goes too, for a marker)."""
        if not (self.active and targets):
            return
        self._mark(kind, targets, self._digests(kind, targets))
        for target in targets:
            row = self.conn.execute("SELECT MIN(seq) FROM change_log WHERE kind = ? AND target = ?", (kind, target))
            first = row.fetchone()[0]
            if first is not None:
                self.since = first if self.since is None else min(self.since, first)
        renamed = [(ERASED + secrets.token_hex(8), kind, target) for target in targets]
        self.conn.executemany("UPDATE change_log SET target = ? WHERE kind = ? AND target = ?", renamed)

    def finish(self) -> int | None:
        """Also erase what a forget made before this version left (plain hashes before a tombstone),
        then re-chain from the earliest rewritten record. Returns that seq (None: nothing rewritten)."""
        if not self.active:
            return None
        earlier = self.conn.execute(
            f"SELECT kind, target, MAX(seq) FROM change_log WHERE op = 'forget' AND {UNERASED} GROUP BY kind, target"
        ).fetchall()
        for kind, target, seq in earlier:
            rows = self.conn.execute(
                "SELECT DISTINCT content_hash FROM change_log"
                f" WHERE kind = ? AND target = ? AND seq <= ? AND {UNERASED}",
                (kind, target, seq),
            ).fetchall()
            self._mark(kind, [target], [row[0] for row in rows], until=seq)
        if self.since is not None:
            rechain(self.conn, self.since)
        return self.since

    def _digests(self, kind: str, targets: list[str]) -> list[str]:
        found: set[str] = set()
        for target in targets:
            rows = self.conn.execute(
                f"SELECT DISTINCT content_hash FROM change_log WHERE kind = ? AND target = ? AND {UNERASED}",
                (kind, target),
            ).fetchall()
            found.update(row[0] for row in rows)
        return sorted(found)

    def _mark(self, kind: str, targets: list[str], digests: list[str], until: int | None = None) -> dict[str, str]:
        """Put a fresh random marker in place of each digest in these rows' records (those up to seq
        `until`, when given); the chain is left for `finish`."""
        markers = {digest: ERASED + secrets.token_hex(8) for digest in digests}
        limit = until if until is not None else 2**63 - 1
        for target in targets:
            rows = self.conn.execute(
                f"SELECT seq, content_hash FROM change_log WHERE kind = ? AND target = ? AND seq <= ? AND {UNERASED}",
                (kind, target, limit),
            ).fetchall()
            rows = [(markers[digest], seq) for seq, digest in rows if digest in markers]
            if rows:
                self.conn.executemany("UPDATE change_log SET content_hash = ? WHERE seq = ?", rows)
                first = min(seq for _, seq in rows)
                self.since = first if self.since is None else min(self.since, first)
        return markers


def forgotten(conn: sqlite3.Connection, kind: str, target: str, reason: str = "forgotten") -> None:
    """Erase one row's history (see Erasure), inside the forget's transaction."""
    erasure = Erasure(conn)
    erasure.forget(kind, target, reason)
    erasure.finish()


def rechain(conn: sqlite3.Connection, since: int) -> None:
    """Recompute the chain hash of every record from seq `since` to the head (the caller holds the
    write transaction and the chain's lock)."""
    row = conn.execute("SELECT hash FROM change_log WHERE seq = ?", (since - 1,)).fetchone()
    prev, start = (row[0] if row else GENESIS_HASH), since
    while True:
        records = conn.execute(
            "SELECT seq, at, op, kind, target, actor, content_hash, reason FROM change_log"
            " WHERE seq >= ? ORDER BY seq LIMIT ?",
            (start, RECHAIN_BATCH),
        ).fetchall()
        if not records:
            return
        updates = []
        for record in records:
            prev = chain_hash(prev, tuple(record))
            updates.append((prev, record[0]))
        conn.executemany("UPDATE change_log SET hash = ? WHERE seq = ?", updates)
        start = records[-1][0] + 1
