"""PostgreSQL's numbered schema migrations, recorded in its own `schema_migrations` table: the list and
the runner here, the SQL of versions 1-3 in schema_base.py and of the later ones in schema_changes.py.

Version 1 is SQLite's schema 1-6 (the same tables and columns, so the shared SQL runs on both)
plus what only a server has:
  - `chunk_terms`: the lexical index. One tsvector per chunk holding the exact tokens SQLite's FTS5
    tokenizer produces (body positions weight D, title positions weight A) and the token count, so
    BM25 is computed from stored term statistics as FTS5 computes it (postgres/lexical.py). GIN.
  - `chunk_vectors.vector` is a pgvector `vector`; an HNSW index (vector_cosine_ops) per embedding
    model is a partial expression index at the model's dimension, made by
    `cmrag_ensure_vector_index(model, dim)` (SECURITY DEFINER: clients need not own the table).
  - `owner` on sources, chunks, chunk_terms and chunk_vectors: a role name; a row is visible to the
    roles that are members of its owner (a user's own rows, or a team role's rows for its members).
    Row-level security enforces it in the server (FORCE: the tables' owner too; superusers bypass
    RLS, so clients must connect as ordinary roles). `cmrag.owner` (CMRAG_DB_OWNER) picks which of
    the user's roles owns new rows; the policy's WITH CHECK refuses a role the user is not in.
The tables of the hierarchy and agent memory exist (search joins agent_memories); since version 3 every
table holding text or naming what a memory holds is under row-level security too (see FOLLOWERS). Since
version 14 the hierarchy (nodes, evidence, edges, cards, extractions, usage) is the configured owner's
alone, keyed with it (OWNED_HIERARCHY): node ids are hashes of content. Left shared: embedding_models
(model names) and schema_migrations. Version 4 is the change log (SQLite's 7), one hash chain per owner
(CHANGE_LOG). The lexical index's tokens are index/fts.py's preparation of their day: when its
FTS_VERSION changes, a migration re-tokenizes every owner's chunks (RETOKENIZE, version 10 for
FTS_VERSION 5, 11 for 6, 16 for 7; INDEX_FTS_VERSION, tested).
"""

from __future__ import annotations

import time

from crossmodalrag.store.migrations import redone_later
from crossmodalrag.store.postgres.schema_base import (
    FUNCTIONS,
    LATER_TABLES,
    POSTINGS,
    TABLES,
    owners_everywhere,
    security,
)
from crossmodalrag.store.postgres.schema_changes import (
    CHANGE_LOG,
    CHUNK_TIMES,
    CORPUS_STATS,
    COVERING_POSTINGS,
    ERASED_HASHES,
    OWNED_HIERARCHY,
    POSTINGS_CASCADE,
    QUALIFIED_VISIBLE,
    RETOKENIZE,
    SESSION_VISIBLE,
    VECTOR_OWNERS,
    retokenize,
    versioning_genesis,
)

# The FTS_VERSION the lexical index holds once every migration has run. A new FTS_VERSION needs a new
# migration `(N, RETOKENIZE, retokenize)` and this raised with it: tests/store/test_postgres_tokens.py
# fails while the two differ.
INDEX_FTS_VERSION = 7


# (version, SQL) or (version, SQL, a Python step run after the SQL in the same transaction).
MIGRATIONS: list[tuple] = [
    (1, FUNCTIONS + TABLES + LATER_TABLES + security()),
    (2, POSTINGS),
    (3, owners_everywhere()),
    (4, CHANGE_LOG, versioning_genesis),
    (5, POSTINGS_CASCADE),
    (6, CORPUS_STATS),
    (7, COVERING_POSTINGS),
    (8, SESSION_VISIBLE),
    (9, CHUNK_TIMES),
    (10, RETOKENIZE, retokenize),  # FTS_VERSION 5
    (11, RETOKENIZE, retokenize),  # FTS_VERSION 6
    (12, QUALIFIED_VISIBLE),
    (13, ERASED_HASHES),
    (14, OWNED_HIERARCHY),
    (15, VECTOR_OWNERS),
    (16, RETOKENIZE, retokenize),  # FTS_VERSION 7 (INDEX_FTS_VERSION): text composed (NFC) before indexing
]
LATEST_VERSION = MIGRATIONS[-1][0]


def applied_version(conn) -> int:
    """The highest migration recorded (0 for an empty database)."""
    found = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
    if not found:
        return 0
    return conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]


def migrate(conn, target: int = LATEST_VERSION) -> list[int]:
    """Apply the pending migrations up to `target`, each in one transaction under the schema lock (two
    clients initialising one database at once: the second waits, then finds it done)."""
    from crossmodalrag.store.postgres.connection import translated_errors

    done = []
    for version, sql, *step in MIGRATIONS:
        if version > target:
            break
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("SET LOCAL statement_timeout = 0")  # a backfill of a large memory may take minutes
            conn.lock_schema()
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied_at FLOAT8)")
            if version > applied_version(conn):
                # a re-tokenize a later migration does again is only recorded; its SQL goes too:
                # RETOKENIZE only empties the index for the step to write
                if not (retokenize in step and redone_later(MIGRATIONS, retokenize, version, target)):
                    with translated_errors():  # a role without the privileges: one line saying who must act
                        conn.raw.execute(sql)
                    for action in step:
                        action(conn)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, time.time()))
                done.append(version)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return done
