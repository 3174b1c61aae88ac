"""The highest source and chunk ids a memory ever handed out, carried to where its rows go next.

A citation (mem://source/ID) or a chunk id an agent kept must never open other text (docs/schema.md
"Ids"). Within one memory store/documents.py new_ids sees to that; a copy (`mem migrate`, a PostgreSQL
export restored) and a PostgreSQL restore move rows, or the memory, elsewhere, and the place they land
must then go on above every id the memory used, forgotten ones included. On SQLite that is the larger
of MAX(id) and the table's id_marks row (migration 13); on PostgreSQL the table's sequence.
"""

from __future__ import annotations

import sqlite3

from crossmodalrag.index import fts

TABLES = ("sources", "chunks")
# A sequence's last value, NULL while it never gave one (pg_sequence_last_value: what pg_sequences reads).
PG_SEQUENCE = "pg_get_serial_sequence(?, 'id')::regclass"


def highest_ids(conn: sqlite3.Connection) -> dict[str, int]:
    """table -> the highest id ever handed out there (0: none). On PostgreSQL the sequence is shared by
    every owner, so it bounds this owner's ids from above: generous, never too low."""
    if fts.on_postgres(conn):
        sql = (
            f"SELECT GREATEST(COALESCE(pg_sequence_last_value({PG_SEQUENCE}), 0),"
            " COALESCE((SELECT MAX(id) FROM {table}), 0))"
        )
        return {table: conn.execute(sql.format(table=table), (table,)).fetchone()[0] for table in TABLES}
    sql = (
        "SELECT MAX(COALESCE((SELECT MAX(id) FROM {table}), 0),"
        " COALESCE((SELECT high FROM id_marks WHERE name = ?), 0))"
    )
    return {table: conn.execute(sql.format(table=table), (table,)).fetchone()[0] for table in TABLES}


def raise_marks(conn: sqlite3.Connection, highs: dict[str, int]) -> bool:
    """Make `conn`'s memory hand out only ids above `highs` from now on (marks only ever go up); returns
    whether it had handed out none before (its ids were all free: a copy may keep its source's). Call
    inside a transaction on SQLite (the check and the raise under one write lock)."""
    if fts.on_postgres(conn):
        return all([_raise_sequence(conn, table, high) for table, high in highs.items()])
    fresh = not any(highest_ids(conn).values())
    for table, high in highs.items():
        conn.execute("UPDATE id_marks SET high = MAX(high, ?) WHERE name = ?", (high, table))
    return fresh


def _raise_sequence(conn, table: str, high: int) -> bool:
    """Set the table's sequence to at least `high`; was it unused before? Read and set in one statement:
    another owner's writer may draw from the same sequence at any moment."""
    sql = (
        f"WITH seq AS (SELECT {PG_SEQUENCE} AS name), last AS (SELECT name, pg_sequence_last_value(name) AS value"
        " FROM seq) SELECT value IS NULL, CASE WHEN GREATEST(value, ?) > 0"
        " THEN setval(name, GREATEST(COALESCE(value, 0), ?)) END FROM last"
    )
    return conn.execute(sql, (table, high, high)).fetchone()[0]


def reset_marks(conn: sqlite3.Connection, highs: dict[str, int]) -> None:
    """Undo raise_marks on a memory that had handed out no id (a copy into it failed and its rows were
    taken out again), so the next try keeps its source's ids. On PostgreSQL a sequence is reset only
    while it still stands where raise_marks left it (no other owner drew from it since)."""
    if not fts.on_postgres(conn):
        conn.execute("UPDATE id_marks SET high = 0")  # the undo's deletes raised them again
        conn.execute("DELETE FROM deleted_source_ids")
        return
    for table, high in highs.items():
        conn.execute(
            f"SELECT setval({PG_SEQUENCE}, 1, false) WHERE pg_sequence_last_value({PG_SEQUENCE}) = ?",
            (table, table, high),
        )
