"""PostgreSQL schema versions 4-13 (schema.py runs them): the change log, the BM25 statistics and covering
postings, chunk times, the owners' visibility rules, and the re-tokenizing of the lexical index.
Each is a change to versions 1-3 (schema_base.py), kept with the comment saying why it was made."""

from __future__ import annotations

from crossmodalrag.store.postgres.schema_base import OWNER, VISIBLE

# Version 4: versioning (SQLite's migration 7) with one hash chain per owner. The shared code reads
# and appends `change_log`, `change_states` and `checkpoints`; here they are views of the configured
# owner's rows (cmrag_owner()) in tables holding every owner's, so each owner's seq runs 1, 2, 3 ...
# and writers of different owners never wait on one chain head (the head is read under a per-owner
# advisory lock: PgConnection.lock_chain). Row-level security keeps other owners' records unreadable,
# and clients may only append to the log (no UPDATE or DELETE is granted; forget erases states; since
# version 13 it also rewrites erased hashes and re-chains: ERASED_HASHES).
CHANGE_LOG = f"""
CREATE TABLE owner_change_log (
    {OWNER},
    seq BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL, op TEXT NOT NULL, kind TEXT NOT NULL,
    target TEXT NOT NULL, actor TEXT NOT NULL, content_hash TEXT, reason TEXT NOT NULL DEFAULT '',
    hash TEXT NOT NULL,
    PRIMARY KEY (owner, seq)
);
CREATE INDEX owner_change_log_target ON owner_change_log(owner, kind, target, seq);
CREATE INDEX owner_change_log_at ON owner_change_log(owner, at);
CREATE TABLE owner_change_states ({OWNER}, content_hash TEXT NOT NULL, state BYTEA NOT NULL,
    PRIMARY KEY (owner, content_hash));
CREATE TABLE owner_checkpoints ({OWNER}, name TEXT NOT NULL, seq BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (owner, name));
CREATE VIEW change_log WITH (security_invoker = true) AS SELECT seq, at, op, kind, target, actor, content_hash,
    reason, hash FROM owner_change_log WHERE owner = cmrag_owner() WITH CHECK OPTION;
CREATE VIEW change_states WITH (security_invoker = true) AS SELECT content_hash, state
    FROM owner_change_states WHERE owner = cmrag_owner() WITH CHECK OPTION;
CREATE VIEW checkpoints WITH (security_invoker = true) AS SELECT name, seq, at
    FROM owner_checkpoints WHERE owner = cmrag_owner() WITH CHECK OPTION;
GRANT SELECT, INSERT ON owner_change_log, change_log, owner_checkpoints, checkpoints TO PUBLIC;
GRANT SELECT, INSERT, DELETE ON owner_change_states, change_states TO PUBLIC;
""" + "\n".join(
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY; ALTER TABLE {table} FORCE ROW LEVEL SECURITY;"
    f" CREATE POLICY {table}_owner ON {table} USING ({VISIBLE}) WITH CHECK ({VISIBLE});"
    for table in ("owner_change_log", "owner_change_states", "owner_checkpoints")
)


def versioning_genesis(conn) -> None:
    """History starts here: one genesis record per existing row of the migrating owner (other owners'
    rows, which this role may not even see, are recorded by their own `mem verify --accept`)."""
    from crossmodalrag import versioning

    versioning.genesis(conn)


# Version 5: postings without a foreign key. Its per-row check (an index probe and a row lock on the
# chunk) was half of what inserting a note's ~80 postings cost; the cascade it gave is one statement
# per delete of chunks instead, reading the deleted ids from the transition table. (As an array: the
# planner then probes the chunk_id index; a join with the transition table could scan the whole
# table, which under SERIALIZABLE reads every other writer's rows and aborts them.)
POSTINGS_CASCADE = """
ALTER TABLE chunk_postings DROP CONSTRAINT chunk_postings_chunk_id_fkey;
CREATE FUNCTION cmrag_drop_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM chunk_postings WHERE chunk_id = ANY (ARRAY(SELECT id FROM gone));
  RETURN NULL;
END $$;
CREATE TRIGGER chunks_drop_postings AFTER DELETE ON chunks REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION cmrag_drop_postings();
"""

# Version 6: what BM25 reads, kept where a query reads it cheaply. (1) The corpus statistics (chunks
# indexed, their total length), kept by the writers instead of a full scan of chunk_terms per query
# (32 ms of a 110 ms hybrid ask at 30k chunks; ~1 s at 10M). Each statement writing chunk_terms
# appends a delta row for its owner (appending, not updating one row per owner: writers never wait on
# each other for it); a reader sums the rows it may see, so the statistics stay per owner under
# row-level security. A writer folds its owner's deltas into one row now and then (1 write in 64),
# which keeps the sum a few dozen rows long. (2) Each posting carries its chunk's length, so a query
# in mode `any` reads lengths with the postings instead of fetching every matching chunk_terms row
# (wide rows: 11-19 ms per ask at 30k chunks).
CORPUS_STATS = f"""
ALTER TABLE chunk_postings ADD COLUMN length INTEGER;
ALTER TABLE chunk_postings NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_terms NO FORCE ROW LEVEL SECURITY;
UPDATE chunk_postings p SET length = t.length FROM chunk_terms t WHERE t.chunk_id = p.chunk_id;
ALTER TABLE chunk_postings ALTER COLUMN length SET NOT NULL;
CREATE TABLE chunk_stats ({OWNER}, chunks BIGINT NOT NULL, length BIGINT NOT NULL);
CREATE INDEX chunk_stats_owner ON chunk_stats(owner);
GRANT SELECT, INSERT, DELETE ON chunk_stats TO PUBLIC;
ALTER TABLE chunk_stats ENABLE ROW LEVEL SECURITY; ALTER TABLE chunk_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY chunk_stats_owner ON chunk_stats USING ({VISIBLE}) WITH CHECK ({VISIBLE});
CREATE FUNCTION cmrag_count_terms() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO chunk_stats (owner, chunks, length) SELECT owner, COUNT(*), SUM(length) FROM added GROUP BY owner;
  ELSE
    INSERT INTO chunk_stats (owner, chunks, length) SELECT owner, -COUNT(*), -SUM(length) FROM gone GROUP BY owner;
  END IF;
  IF random() < 1.0 / 64 THEN
    WITH folded AS (DELETE FROM chunk_stats WHERE owner = cmrag_owner() RETURNING chunks, length)
    INSERT INTO chunk_stats (chunks, length) SELECT SUM(chunks), SUM(length) FROM folded HAVING COUNT(*) > 0;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER chunk_terms_count_added AFTER INSERT ON chunk_terms REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION cmrag_count_terms();
CREATE TRIGGER chunk_terms_count_gone AFTER DELETE ON chunk_terms REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION cmrag_count_terms();
-- Every owner's rows counted once (the migrating role owns the tables: NO FORCE lets it see them all).
INSERT INTO chunk_stats (owner, chunks, length) SELECT owner, COUNT(*), SUM(length) FROM chunk_terms GROUP BY owner;
ALTER TABLE chunk_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_postings FORCE ROW LEVEL SECURITY;
"""

# Version 7: the postings' primary key carries what BM25 reads (body_tf, length, and owner for the
# row-level security policy), so a query reads postings index-only. A common word's postings lie
# scattered over as many heap pages as it has postings: at 530k chunks one question's BM25 statement
# read 86k heap pages, and BM25's server CPU fell from 177 to 71 ms per question with this key.
# Rebuilt in place of the old key, not added beside it: no second index to write; the key grows by
# about half (2.5 GB at 530k chunks; the rebuild took 178 s there). Index-only scans need the
# visibility map: autovacuum sets it; after a bulk load run VACUUM.
COVERING_POSTINGS = """
ALTER TABLE chunk_postings DROP CONSTRAINT chunk_postings_pkey,
    ADD CONSTRAINT chunk_postings_pkey PRIMARY KEY (lexeme, chunk_id) INCLUDE (body_tf, length, owner);
"""

# Version 8: a cascade from sources (an edit, a forget) runs as the tables' owner, and its triggers
# with it: when that owner is a plain role (the database's owner on a managed server; a superuser
# bypasses row-level security), their statements on chunk_stats and chunk_postings saw none of the
# user's rows, so the statistics insert failed and an edit or forget stopped. While a statement runs
# as the tables' owner, the login role's memberships count too (only then: behind a pooler that
# logs in as one role and SET ROLEs per user, the login role's would widen every user's view).
# And the shared tables are no longer for clients to change.
SESSION_VISIBLE = """
CREATE OR REPLACE FUNCTION cmrag_visible_owners() RETURNS SETOF text LANGUAGE sql STABLE AS
$$ SELECT rolname::text FROM pg_roles
   WHERE pg_has_role(current_user, oid, 'MEMBER')
      OR (pg_has_role(session_user, oid, 'MEMBER')
          AND current_user = (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'sources'::regclass)) $$;
-- The shared tables: clients add a model, never change or remove one (deleting a model cascaded to
-- every owner's vectors, past row-level security) nor the record of migrations.
REVOKE UPDATE, DELETE ON embedding_models, schema_migrations FROM PUBLIC;
"""

# Version 9: SQLite's migration 12, a chunk's own time (a chat turn's: when it was said; NULL: its
# source's), filled from the metadata's `time` of every owner's chunks (NO FORCE while it runs, as in
# version 6), with the same two indexes for the date filters.
CHUNK_TIMES = """
ALTER TABLE chunks ADD COLUMN said_at DOUBLE PRECISION;
ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY;
UPDATE chunks SET said_at = (metadata::jsonb ->> 'time')::float8
    WHERE jsonb_typeof(metadata::jsonb -> 'time') = 'number';
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;
CREATE INDEX chunks_said_at ON chunks(said_at, source_id) WHERE said_at IS NOT NULL;
CREATE INDEX chunks_source_said_at ON chunks(source_id, said_at);
"""

# Version 10: the lexical index re-tokenized with today's preparation (index/fts.py FTS_VERSION 5;
# SQLite's migrations 10 and 11). The tokens are written when a chunk is, so a memory made before
# FTS_VERSION 4 and 5 kept the old ones: a folded Greek or Cyrillic query, a one-character CJK word at
# the end of a run, full-width Latin were found on SQLite and not here. The index is emptied and
# written again from the stored chunks (`retokenize`), every owner's, each row keeping its chunk's
# owner: the migrating role owns the tables (or is a superuser), so NO FORCE lets it read and write
# every owner's rows, as in version 6. TRUNCATE, not DELETE: no dead copy of the whole index left for
# VACUUM, and the migration holds these tables' locks anyway (ALTER TABLE). Version 11 does it again
# for FTS_VERSION 6 (SQLite's 14: vocalised Arabic and Hebrew, ß as ss, Thai bigrams, whole Indic words);
# a memory that has both pending does it once.
RETOKENIZE = """
ALTER TABLE sources NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_terms NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_postings NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_stats NO FORCE ROW LEVEL SECURITY;
TRUNCATE chunk_terms, chunk_postings, chunk_stats;
"""

# Version 12: the policies' function names its table with its schema. pg_dump and pg_restore empty
# the search_path, so an unqualified 'sources' was no relation there: every dump by a role under
# row-level security (everyone but a superuser or a role with BYPASSRLS) failed on the first policy.
QUALIFIED_VISIBLE = """
CREATE OR REPLACE FUNCTION cmrag_visible_owners() RETURNS SETOF text LANGUAGE sql STABLE AS
$$ SELECT rolname::text FROM pg_catalog.pg_roles
   WHERE pg_catalog.pg_has_role(current_user, oid, 'MEMBER')
      OR (pg_catalog.pg_has_role(session_user, oid, 'MEMBER')
          AND current_user = (SELECT pg_catalog.pg_get_userbyid(relowner) FROM pg_catalog.pg_class
                              WHERE oid = 'public.sources'::regclass)) $$;
"""


# Version 13: `mem forget` puts random markers in place of the erased versions' content hashes (and of a
# forgotten memory node's id, a hash of its statement) and re-chains the owner's log from there
# (versioning/erasure.py): a hash kept would confirm a guessed secret. So clients may update those three
# columns of their own records (row-level security), never delete one nor change its seq, time or op.
ERASED_HASHES = """
GRANT UPDATE (content_hash, target, hash) ON owner_change_log, change_log TO PUBLIC;
"""


def retokenize(conn) -> None:
    """Write the emptied lexical index again from every stored chunk (RETOKENIZE), then count each
    owner's chunks and length once for BM25 (the insert trigger's per-batch deltas, folded) and put
    row-level security back on the owner too."""
    from crossmodalrag.store.postgres import lexical

    lexical.reindex(conn)
    conn.execute("DELETE FROM chunk_stats")
    conn.execute(
        "INSERT INTO chunk_stats (owner, chunks, length) SELECT owner, COUNT(*), SUM(length) FROM chunk_terms"
        " GROUP BY owner"
    )
    for table in ("sources", "chunks", "chunk_terms", "chunk_postings", "chunk_stats"):
        conn.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


# Version 14: the memory hierarchy is the configured owner's (CMRAG_DB_OWNER, else the role), as the
# change log is. A node's id is a hash of what it says (memory/nodes.py stable_id), so two owners who
# ingested one repository make the same `ev_...` ids: with `memory_nodes.id` the key of every owner's
# rows, the second one's build-memory failed on the first one's node (and the error told them someone
# held that commit). The nodes, their evidence, edges, cards and the extraction states are keyed with
# their owner now, and each owner reads and writes only their own (a member of a team role reads the
# team's hierarchy with CMRAG_DB_OWNER set to it): rows of two owners sharing an id must never meet in
# one query. Usage events name node ids too. Existing rows get their node's owner (an extraction: the
# owner of its source's events, else of its source); NO FORCE while they are read, as in version 6.
OWNED_HIERARCHY_TABLES = (
    "memory_nodes",
    "memory_evidence",
    "memory_edges",
    "memory_cards",
    "memory_extractions",
    "memory_usage",
)
OWN = f"owner = cmrag_owner() AND {VISIBLE}"  # VISIBLE too: cmrag.owner is a setting anyone may change
OWNED_HIERARCHY = (
    "".join(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;\n" for table in (*OWNED_HIERARCHY_TABLES, "sources"))
    + """
ALTER TABLE memory_evidence DROP CONSTRAINT memory_evidence_node_id_fkey, ADD COLUMN owner TEXT;
ALTER TABLE memory_edges DROP CONSTRAINT memory_edges_src_fkey, DROP CONSTRAINT memory_edges_dst_fkey,
    ADD COLUMN owner TEXT;
ALTER TABLE memory_cards DROP CONSTRAINT memory_cards_node_id_fkey, ADD COLUMN owner TEXT;
ALTER TABLE memory_extractions ADD COLUMN owner TEXT;
UPDATE memory_evidence e SET owner = n.owner FROM memory_nodes n WHERE n.id = e.node_id;
UPDATE memory_edges e SET owner = n.owner FROM memory_nodes n WHERE n.id = e.src;
UPDATE memory_cards c SET owner = n.owner FROM memory_nodes n WHERE n.id = c.node_id;
UPDATE memory_extractions x SET owner = COALESCE(
    (SELECT MIN(n.owner) FROM memory_nodes n WHERE n.source_id = x.source_id),
    (SELECT s.owner FROM sources s WHERE s.id = x.source_id));
"""
    + "".join(
        f"ALTER TABLE {table} ALTER COLUMN owner SET DEFAULT cmrag_owner(), ALTER COLUMN owner SET NOT NULL;\n"
        for table in ("memory_evidence", "memory_edges", "memory_cards", "memory_extractions")
    )
    + """
ALTER TABLE memory_nodes DROP CONSTRAINT memory_nodes_pkey, ADD PRIMARY KEY (owner, id);
ALTER TABLE memory_evidence DROP CONSTRAINT memory_evidence_pkey, ADD PRIMARY KEY (owner, node_id, chunk_id, role),
    ADD FOREIGN KEY (owner, node_id) REFERENCES memory_nodes(owner, id) ON DELETE CASCADE;
ALTER TABLE memory_edges DROP CONSTRAINT memory_edges_pkey, ADD PRIMARY KEY (owner, src, dst, kind),
    ADD FOREIGN KEY (owner, src) REFERENCES memory_nodes(owner, id) ON DELETE CASCADE,
    ADD FOREIGN KEY (owner, dst) REFERENCES memory_nodes(owner, id) ON DELETE CASCADE;
ALTER TABLE memory_cards DROP CONSTRAINT memory_cards_pkey, ADD PRIMARY KEY (owner, node_id),
    ADD FOREIGN KEY (owner, node_id) REFERENCES memory_nodes(owner, id) ON DELETE CASCADE;
ALTER TABLE memory_extractions DROP CONSTRAINT memory_extractions_pkey, ADD PRIMARY KEY (owner, source_id);
CREATE INDEX memory_evidence_chunk ON memory_evidence(chunk_id);
"""
    + "".join(
        f"DROP POLICY {table}_owner ON {table};"
        f" CREATE POLICY {table}_owner ON {table} USING ({rule}) WITH CHECK ({rule});\n"
        for table, rule in {
            "memory_nodes": OWN,
            "memory_evidence": f"{OWN} AND EXISTS (SELECT 1 FROM chunks c WHERE c.id = chunk_id)",
            "memory_edges": OWN,
            "memory_cards": OWN,
            "memory_extractions": f"{OWN} AND EXISTS (SELECT 1 FROM sources s WHERE s.id = source_id)",
            "memory_usage": OWN,
        }.items()
    )
    + "".join(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n" for table in (*OWNED_HIERARCHY_TABLES, "sources"))
)


# Version 15: a vector belongs to the owner of its chunk. Embedding what still lacks a vector (after an
# ingest, `mem reindex-embeddings`) covers every chunk the user sees, and each vector took the configured
# owner: under CMRAG_DB_OWNER=team a member's private chunks got team vectors, which every member could
# read (an embedding leaks meaning: embed a guessed sentence and compare), and a team chunk embedded by
# a member's own run got a vector the rest of the team could neither see nor replace. Set by the server
# whoever writes (a trigger reading the chunk, as the writer: it sees the chunk it embeds), and the
# vectors written so far get their chunk's owner (NO FORCE while they are read, as in version 6).
VECTOR_OWNERS = """
ALTER TABLE chunks NO FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_vectors NO FORCE ROW LEVEL SECURITY;
UPDATE chunk_vectors v SET owner = c.owner FROM chunks c WHERE c.id = v.chunk_id AND v.owner <> c.owner;
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;
ALTER TABLE chunk_vectors FORCE ROW LEVEL SECURITY;
CREATE FUNCTION cmrag_vector_owner() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.owner := (SELECT owner FROM chunks WHERE id = NEW.chunk_id);
  RETURN NEW;
END $$;
CREATE TRIGGER chunk_vectors_owner BEFORE INSERT OR UPDATE ON chunk_vectors
    FOR EACH ROW EXECUTE FUNCTION cmrag_vector_owner();
"""
