"""A chunk's vectors belong to the chunk's owner on a shared PostgreSQL memory (schema version 15).
Embedding covers every chunk the user sees that lacks a vector, and each vector took the configured
owner: under CMRAG_DB_OWNER=team a member's private chunks got team vectors, readable by every member,
and a team chunk embedded by a member's own run got a vector the rest of the team could not see."""

from __future__ import annotations

import psycopg

from crossmodalrag.index.embeddings import embed_missing, vector_status
from crossmodalrag.store.postgres import open_postgres_store, schema
from crossmodalrag.store.postgres.connection import PgConnection, pool_for
from tests.fakes import HashingEmbedder
from tests.postgres import create_role, hand_database_to
from tests.retrieval.helpers import add_docs, note


def _team(postgres_url, tmp_path, target=schema.LATEST_VERSION) -> tuple[str, str, str, str]:
    """(the tables' owner's url, alice's, bob's, the team role): alice and bob are members of the team;
    the schema at `target`."""
    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    pool = pool_for(admin, "", 30.0)
    schema.migrate(PgConnection(raw := pool.getconn()), target=target)
    pool.putconn(raw)
    team = f"team_{suffix}"
    create_role(postgres_url, team)
    alice, bob = (create_role(postgres_url, f"{who}_{suffix}", member_of=(team,)) for who in ("alice", "bob"))
    return admin, alice, bob, team


def _owners(postgres_url) -> set[tuple[str, str]]:
    """(chunk owner, vector owner) of every vector, as the superuser sees them."""
    with psycopg.connect(postgres_url) as conn:
        return set(conn.execute("SELECT c.owner, v.owner FROM chunk_vectors v JOIN chunks c ON c.id = v.chunk_id"))


def test_vectors_take_their_chunks_owner_whoever_embeds_them(postgres_url, tmp_path):
    _, alice, bob, team = _team(postgres_url, tmp_path)
    embedder = HashingEmbedder()
    with open_postgres_store(alice) as store:  # stored while no model was at hand
        add_docs(store, note("health", "# Health\nalice's private diagnosis"))
    with open_postgres_store(alice, owner=team) as store:
        add_docs(store, note("deploys", "# Deploys\nThe team deploys on Fridays"))
        assert embed_missing(store, embedder).chunks == 2  # her private chunk too: what she sees
    owner_alice = alice.split("//")[1].split("@")[0]
    assert _owners(postgres_url) == {(owner_alice, owner_alice), (team, team)}
    with open_postgres_store(bob) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 1  # the team's only
        assert vector_status(store, embedder.identity)["missing"] == 0  # was -1
    with open_postgres_store(alice, owner=team) as store:  # a team note left without a vector ...
        add_docs(store, note("runbook", "# Runbook\nrotate keys quarterly"))
    with open_postgres_store(alice) as store:  # ... embedded by alice's own run stays the team's
        assert embed_missing(store, embedder).chunks == 1
    with open_postgres_store(bob) as store:
        assert vector_status(store, embedder.identity) == {
            "chunks": 2,
            "embedded": 2,
            "missing": 0,
            "other_model_vectors": 0,
        }


def test_vectors_given_the_wrong_owner_before_get_their_chunks(postgres_url, tmp_path):
    admin, alice, bob, team = _team(postgres_url, tmp_path, target=14)
    owner_alice = alice.split("//")[1].split("@")[0]
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as version 14 left one: alice's chunk, team's vector
        source = conn.execute(
            "INSERT INTO sources (source_type, uri, fingerprint, ingested_at, owner)"
            " VALUES ('note', 'n.md', 'f', 0, %s) RETURNING id",
            (owner_alice,),
        ).fetchone()[0]
        chunk = conn.execute(
            "INSERT INTO chunks (source_id, chunk_index, text, char_start, char_end, owner)"
            " VALUES (%s, 0, 'x', 0, 1, %s) RETURNING id",
            (source, owner_alice),
        ).fetchone()[0]
        model = conn.execute(
            "INSERT INTO embedding_models (name, sha256, dim, max_tokens, created_at) VALUES ('m', 's', 2, 8, 0)"
            " RETURNING id"
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector, owner)"
            " VALUES (%s, %s, 0, 1, '[1,0]', %s)",
            (chunk, model, team),
        )
    with open_postgres_store(admin):  # the tables' owner upgrades it
        pass
    assert _owners(postgres_url) == {(owner_alice, owner_alice)}
    with open_postgres_store(bob) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM chunk_vectors").fetchone()[0] == 0
