"""Memory hierarchy nodes (events, episodes, concepts) as a derived versioned kind, keyed by node id.

Nodes are rebuilt from sources by `mem build-memory`, so the log keeps only their content hashes
(Kind.derived): every change is recorded and verified, none of their text is kept, and a rollback
leaves them to the next build. Scores recomputed on every build (centrality) and the vector are not
content; the metadata is bookkeeping of the builders (drift, anchors).
"""

from __future__ import annotations

import sqlite3
from typing import Iterator

from crossmodalrag.index.fts import on_postgres
from crossmodalrag.versioning.log import Kind, State, own_rows, register_kind

COLUMNS = (
    "id, level, kind, title, statement, project, people, first_time, last_time, supported, source_uri, fingerprint"
)


def _state(row: sqlite3.Row | tuple) -> State:
    names = COLUMNS.split(", ")[1:]
    return dict(zip(names, list(row)[1:], strict=True))


def _has_table(conn: sqlite3.Connection) -> bool:
    if on_postgres(conn):
        return True  # created with the schema
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_nodes'").fetchone() is not None


def read_node(conn: sqlite3.Connection, node_id: str) -> State | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM memory_nodes WHERE id = ?{own_rows(conn, 'AND')}", (node_id,)).fetchone()
    return _state(row) if row else None


def read_all_nodes(conn: sqlite3.Connection) -> Iterator[tuple[str, State]]:
    if not _has_table(conn):
        return
    for row in conn.execute(f"SELECT {COLUMNS} FROM memory_nodes{own_rows(conn)} ORDER BY id"):
        yield row[0], _state(row)


register_kind(Kind("memory_node", read_node, read_all_nodes, None, derived=True))
