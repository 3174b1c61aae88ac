"""Numbered schema migrations. Append, never edit: a database records the versions it has applied.

The FTS table is derived data (rebuildable from `chunks`); its rows are written by the ingest code,
because the indexed text is normalized in Python (see index/fts.py), and a trigger removes them
whenever a chunk goes, so no delete path can leave a stale, still-citable entry behind.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Callable

from crossmodalrag.index import fts

# (chunks done, chunks in all): how a long data migration reports where it is.
Progress = Callable[[int, int], None]


def retokenize(conn: sqlite3.Connection, progress: Progress | None) -> None:
    """Rebuild chunks_fts from the stored chunks with today's text preparation (index/fts.py,
    FTS_VERSION): no re-ingest, no re-embedding."""
    fts.rebuild(conn, progress)


def versioning_genesis(conn: sqlite3.Connection, progress: Progress | None) -> None:
    """One genesis record per existing source (and other versioned row): history starts here."""
    from crossmodalrag import versioning

    versioning.genesis(conn)


# (version, SQL) or (version, SQL, a Python step run after the SQL in the same transaction).
MIGRATIONS: list[tuple] = [
    (
        1,
        """
        CREATE TABLE sources (
            id INTEGER PRIMARY KEY,
            source_type TEXT NOT NULL,
            uri TEXT NOT NULL UNIQUE,
            fingerprint TEXT NOT NULL,
            timestamp REAL,
            title TEXT NOT NULL DEFAULT '',
            metadata TEXT NOT NULL DEFAULT '{}',
            ingested_at REAL NOT NULL
        );
        CREATE INDEX sources_type ON sources(source_type);
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            chunk_index INTEGER NOT NULL,
            text TEXT NOT NULL,
            locator TEXT NOT NULL DEFAULT '',
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            UNIQUE (source_id, chunk_index)
        );
        CREATE VIRTUAL TABLE chunks_fts USING fts5(
            title, body, tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
            DELETE FROM chunks_fts WHERE rowid = old.id;
        END;
        CREATE TABLE queries_eval (
            id INTEGER PRIMARY KEY,
            query_text TEXT NOT NULL UNIQUE,
            expected_source_uris TEXT NOT NULL DEFAULT '[]',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
    ),
    (
        2,
        """
        ALTER TABLE chunks ADD COLUMN modality TEXT NOT NULL DEFAULT 'text';
        UPDATE chunks SET modality = 'code'
            WHERE source_id IN (SELECT id FROM sources WHERE source_type = 'commit');
        CREATE INDEX sources_timestamp ON sources(timestamp);
        """,
    ),
    (
        3,
        """
        CREATE TABLE embedding_models (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            dim INTEGER NOT NULL,
            max_tokens INTEGER NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (name, sha256, dim)
        );
        CREATE TABLE chunk_vectors (
            -- AUTOINCREMENT: ids are never reused, so (count, max id) changes on every write and
            -- tells a derived vector index that it is stale.
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            model_id INTEGER NOT NULL REFERENCES embedding_models(id) ON DELETE CASCADE,
            piece INTEGER NOT NULL,
            pieces INTEGER NOT NULL,
            vector BLOB NOT NULL,
            UNIQUE (model_id, chunk_id, piece)
        );
        CREATE INDEX chunk_vectors_chunk ON chunk_vectors(chunk_id);
        """,
    ),
    (
        4,
        """
        -- UTF-8 byte offsets of a chunk's body in its source text, beside the character offsets;
        -- NULL for chunks stored before this version, until their source changes.
        ALTER TABLE chunks ADD COLUMN byte_start INTEGER;
        ALTER TABLE chunks ADD COLUMN byte_end INTEGER;
        """,
        retokenize,
    ),
    (
        5,
        """
        -- The memory hierarchy (issue 11; memory/): L1 events, L2 episodes, L3 concepts as nodes
        -- with stable text ids, each linked to the exact chunks that support it.
        CREATE TABLE memory_nodes (
            id TEXT PRIMARY KEY,  -- ev_/ep_/co_ + a hash: stable across rebuilds
            level TEXT NOT NULL CHECK (level IN ('event', 'episode', 'concept')),
            kind TEXT NOT NULL DEFAULT '',  -- an event's type (decision, fix, ...); '' above events
            title TEXT NOT NULL,
            statement TEXT NOT NULL DEFAULT '',  -- an event's sentence, a node's summary
            project TEXT NOT NULL DEFAULT '',
            people TEXT NOT NULL DEFAULT '[]',
            first_time REAL,
            last_time REAL,
            confidence REAL NOT NULL DEFAULT 1.0,
            supported INTEGER NOT NULL DEFAULT 1,  -- 0: provenance check failed, kept out of retrieval
            -- An event's source; NULL once the source is forgotten, so the build can report it.
            source_id INTEGER REFERENCES sources(id) ON DELETE SET NULL,
            source_uri TEXT NOT NULL DEFAULT '',
            fingerprint TEXT NOT NULL,  -- content hash: what cached cards and rebuilds compare
            centrality REAL NOT NULL DEFAULT 0.0,
            vector BLOB,  -- float32, normalized, of the statement (or members' centroid)
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX memory_nodes_level ON memory_nodes(level, first_time);
        CREATE INDEX memory_nodes_source ON memory_nodes(source_id);
        CREATE TABLE memory_evidence (
            node_id TEXT NOT NULL REFERENCES memory_nodes(id) ON DELETE CASCADE,
            chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
            role TEXT NOT NULL,  -- cited | nearest | subject | member | distill
            score REAL,
            PRIMARY KEY (node_id, chunk_id, role)
        ) WITHOUT ROWID;
        CREATE INDEX memory_evidence_chunk ON memory_evidence(chunk_id);
        CREATE TABLE memory_edges (
            src TEXT NOT NULL REFERENCES memory_nodes(id) ON DELETE CASCADE,
            dst TEXT NOT NULL REFERENCES memory_nodes(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,  -- in_episode | in_concept | co_occurs
            weight REAL NOT NULL DEFAULT 1.0,
            PRIMARY KEY (src, dst, kind)
        ) WITHOUT ROWID;
        CREATE INDEX memory_edges_dst ON memory_edges(dst, kind);
        CREATE TABLE memory_extractions (
            source_id INTEGER PRIMARY KEY REFERENCES sources(id) ON DELETE CASCADE,
            source_fingerprint TEXT NOT NULL,  -- sources.fingerprint when extracted (the cheap check)
            text_hash TEXT NOT NULL,  -- the source text alone: a re-chunk keeps it, so no new LLM call
            model TEXT NOT NULL,
            prompt_version TEXT NOT NULL,
            status TEXT NOT NULL,  -- done | failed
            reason TEXT NOT NULL DEFAULT '',
            events INTEGER NOT NULL DEFAULT 0,
            llm_calls INTEGER NOT NULL DEFAULT 0,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            seconds REAL NOT NULL DEFAULT 0.0,
            updated_at REAL NOT NULL
        );
        CREATE TABLE memory_usage (
            id INTEGER PRIMARY KEY,
            target_id TEXT NOT NULL,  -- a node id, or chunk:<id>; never the query text
            event TEXT NOT NULL,  -- retrieved | accepted | feedback_up | feedback_down | opened
            at REAL NOT NULL
        );
        CREATE INDEX memory_usage_target ON memory_usage(target_id, at);
        CREATE TABLE memory_cards (
            node_id TEXT PRIMARY KEY REFERENCES memory_nodes(id) ON DELETE CASCADE,
            node_fingerprint TEXT NOT NULL,
            question TEXT NOT NULL,
            answer TEXT NOT NULL,
            citations TEXT NOT NULL DEFAULT '[]',
            generator TEXT NOT NULL,  -- "template" or provider/model
            created_at REAL NOT NULL
        );
        """,
    ),
    (
        6,
        """
        -- Agent-written memories (issue 13): sources of type 'memory' with their agent attributes.
        CREATE TABLE agent_memories (
            source_id INTEGER PRIMARY KEY REFERENCES sources(id) ON DELETE CASCADE,
            kind TEXT NOT NULL DEFAULT 'note',  -- fact | decision | preference | task | note | ...
            importance REAL NOT NULL DEFAULT 0.5,
            tags TEXT NOT NULL DEFAULT '[]',
            session_id TEXT NOT NULL DEFAULT '',
            agent_id TEXT NOT NULL DEFAULT '',
            content_hash TEXT NOT NULL,  -- of the normalized text: exact duplicates return this memory
            times TEXT NOT NULL DEFAULT '[]',  -- every time it was stored (a merged duplicate adds its time)
            -- The newer memory that restated this fact with another value; kept, shown with --history.
            superseded_by INTEGER REFERENCES sources(id) ON DELETE SET NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX agent_memories_hash ON agent_memories(content_hash);
        CREATE INDEX agent_memories_session ON agent_memories(session_id);
        CREATE TABLE agent_memory_links (
            source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            target_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            relation TEXT NOT NULL,  -- similar | supersedes
            similarity REAL NOT NULL,
            PRIMARY KEY (source_id, target_id, relation)
        ) WITHOUT ROWID;
        CREATE INDEX agent_memory_links_target ON agent_memory_links(target_id);
        """,
    ),
    (
        7,
        """
        -- Versioning (issue 14; versioning/): an append-only, hash-chained log of every change of a
        -- versioned row (sources with their chunks, ...); hash = sha256(prev hash || record).
        CREATE TABLE change_log (
            seq INTEGER PRIMARY KEY,  -- 1, 2, 3, ... never reused: records are never deleted
            at REAL NOT NULL,
            op TEXT NOT NULL,  -- genesis | insert | update | delete | forget | checkpoint
            kind TEXT NOT NULL,  -- source, ... (versioning.KINDS)
            target TEXT NOT NULL,  -- the row's stable key: a source's uri
            actor TEXT NOT NULL,  -- cli, sync, migration, mcp:<agent id>, ...
            content_hash TEXT,  -- sha256 of the new state; NULL after a delete; a forget keeps the erased one
            reason TEXT NOT NULL DEFAULT '',
            hash TEXT NOT NULL
        );
        CREATE INDEX change_log_target ON change_log(kind, target, seq);
        CREATE INDEX change_log_at ON change_log(at);
        -- The states themselves, apart from the chain so that forget can erase them (zlib'd canonical JSON).
        CREATE TABLE change_states (content_hash TEXT PRIMARY KEY, state BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE checkpoints (
            name TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,  -- the log's head when it was made
            at REAL NOT NULL
        );
        """,
        versioning_genesis,
    ),
    (
        8,
        """
        -- FTS_VERSION 3 (issue 15): Vietnamese syllable pairs and Spanish/German Snowball stem tokens
        -- join the index; chunks_fts is rebuilt from the stored chunks (no re-ingest, no re-embedding).
        """,
        retokenize,
    ),
    (
        9,
        """
        -- A chunk's usage rows ("chunk:<id>") leave with the chunk (forgotten, removed, re-chunked): a
        -- forgotten chunk leaves no trace, and SQLite reuses the highest ids, so a later chunk would
        -- inherit its ratings. Rows that already point at no chunk go now.
        CREATE TRIGGER chunks_usage_cleanup AFTER DELETE ON chunks BEGIN
            DELETE FROM memory_usage WHERE target_id = 'chunk:' || old.id;
        END;
        DELETE FROM memory_usage
        WHERE target_id LIKE 'chunk:%' AND CAST(substr(target_id, 7) AS INTEGER) NOT IN (SELECT id FROM chunks);
        """,
    ),
    (
        10,
        """
        -- FTS_VERSION 4: Greek, Cyrillic, Hebrew and Arabic words with marks are also indexed folded
        -- (index/scripts.py); chunks_fts is rebuilt from the stored chunks.
        """,
        retokenize,
    ),
    (
        11,
        """
        -- FTS_VERSION 5: a CJK run's last character is also indexed alone (index/scripts.py), so a
        -- one-character word is found at the end of a run too; Cyrillic words get Russian Snowball
        -- stem tokens (index/stems.py); words NFKC changes (full-width Latin, half-width kana) are also
        -- indexed in their NFKC form. chunks_fts is rebuilt from the stored chunks.
        """,
        retokenize,
    ),
    (
        12,
        """
        -- A chunk's own time when it is not its source's: a chat turn is dated when it was said, and a
        -- conversation continued months later (or a resumed agent session) has turns long after the
        -- source's date, its start. NULL: the source's timestamp. Written from the chunk metadata's
        -- `time` (chunking/turns.py), which existing turns carry already.
        ALTER TABLE chunks ADD COLUMN said_at REAL;
        UPDATE chunks SET said_at = json_extract(metadata, '$.time')
            WHERE json_type(metadata, '$.time') IN ('integer', 'real');
        -- A date filter reads COALESCE(c.said_at, s.timestamp) (retrieval/filters.py): the first index
        -- finds the sources with a turn in the window (turns only: small), the second reads each
        -- chunk's own time without fetching its row (a chunk's row holds its text).
        CREATE INDEX chunks_said_at ON chunks(said_at, source_id) WHERE said_at IS NOT NULL;
        CREATE INDEX chunks_source_said_at ON chunks(source_id, said_at);
        """,
    ),
    (
        13,
        """
        -- Ids a user or an agent may have seen (mem://source/ID, a chunk id in feedback) are never handed
        -- out again: SQLite gives a new row MAX(id) + 1, so forgetting the newest source gave its id to
        -- the next one, and an old citation opened unrelated text. Each table's highest deleted id is
        -- kept here; store/documents.py takes new ids above both it and MAX(id). One row per table, so a
        -- delete pays one tiny update per row, never a scan.
        CREATE TABLE id_marks (name TEXT PRIMARY KEY, high INTEGER NOT NULL) WITHOUT ROWID;
        -- A deleted source's last id by uri: a rollback that brings the source back gives it that id
        -- again (no other row can have it), so its old citations work again. `mem forget` removes the row.
        CREATE TABLE deleted_source_ids (uri TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TRIGGER sources_id_mark AFTER DELETE ON sources BEGIN
            UPDATE id_marks SET high = old.id WHERE name = 'sources' AND high < old.id;
            INSERT OR REPLACE INTO deleted_source_ids VALUES (old.uri, old.id);
        END;
        CREATE TRIGGER chunks_id_mark AFTER DELETE ON chunks BEGIN
            UPDATE id_marks SET high = old.id WHERE name = 'chunks' AND high < old.id;
        END;
        -- Seeds. Ids were handed out one above the highest then alive, so every id between today's
        -- highest and the highest ever given was given and then deleted: the log's deletions of sources
        -- bound how far above MAX(id) a forgotten one can have been (a generous bound: ids may skip).
        -- Chunks are not logged one by one: their mark starts at MAX(id).
        INSERT INTO id_marks VALUES ('sources', COALESCE((SELECT MAX(id) FROM sources), 0)
            + (SELECT COUNT(*) FROM change_log WHERE kind = 'source' AND op IN ('delete', 'forget')));
        INSERT INTO id_marks VALUES ('chunks', COALESCE((SELECT MAX(id) FROM chunks), 0));
        """,
    ),
    (
        14,
        """
        -- FTS_VERSION 6: vocalised Arabic and Hebrew words are also indexed folded whole (FTS5 splits them
        -- at each mark), German words with ß also with ss, Thai and Lao runs as letter bigrams, Indic
        -- words with vowel signs also whole (index/scripts.py); chunks_fts is rebuilt from the stored chunks.
        """,
        retokenize,
    ),
    (
        15,
        """
        -- FTS_VERSION 7: the text is composed (NFC) before it is indexed, as queries are: a Vietnamese
        -- note saved decomposed (macOS) had no exact-form or pair tokens; chunks_fts is rebuilt.
        """,
        retokenize,
    ),
]

LATEST_VERSION = MIGRATIONS[-1][0]
# Steps that rebuild from the stored rows alone: when several pending migrations carry one, the last does it.
REBUILDS = (retokenize,)
# The FTS_VERSION chunks_fts holds once every migration has run: a new FTS_VERSION needs a migration
# with the `retokenize` step, and this raised with it (tests/store/test_migrations.py fails meanwhile).
INDEX_FTS_VERSION = 7


def applied_version(conn: sqlite3.Connection) -> int:
    """The highest migration recorded in the database (0 for a new file)."""
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)")
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return row[0] or 0


def migrate(conn: sqlite3.Connection, target: int = LATEST_VERSION, progress: Progress | None = None) -> list[int]:
    """Apply pending migrations up to `target`, each in its own transaction; returns those applied.
    `progress` hears from data migrations that rewrite many rows (re-tokenizing the index)."""
    done = []
    for version, sql, *step in MIGRATIONS:
        if version > target or version <= applied_version(conn):
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version <= applied_version(conn):  # another process applied it while this one waited for the lock
                conn.execute("COMMIT")
                continue
            # executescript would commit early; run statement by statement inside our transaction.
            for statement in _statements(sql):
                conn.execute(statement)
            for action in step:
                if not (action in REBUILDS and redone_later(MIGRATIONS, action, version, target)):
                    action(conn, progress)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, time.time()))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have ended it itself (a full disk): keep that error
                conn.execute("ROLLBACK")
            raise
        done.append(version)
    return done


def redone_later(migrations: list[tuple], step: Callable, version: int, target: int) -> bool:
    """Whether a migration after `version`, up to `target`, runs `step` again (both backends): a step
    that rebuilds from the stored rows is then left to the last of them. An old memory upgraded across
    three FTS_VERSIONs re-tokenized its whole index three times (3x the wait)."""
    return any(step in later[2:] for later in migrations if version < later[0] <= target)


def _statements(sql: str) -> list[str]:
    """Split a migration script into complete statements (triggers contain inner semicolons)."""
    statements, current = [], ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
