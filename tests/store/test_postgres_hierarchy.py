"""The memory hierarchy on a PostgreSQL memory shared by several owners: each owner's nodes are their
own (schema version 14). Node ids are hashes of what a node says, so two owners who ingested one
repository make the same ids; the second one's `mem build-memory` failed on the first one's node."""

from __future__ import annotations

import json

from crossmodalrag.cli.main import main
from crossmodalrag.store.postgres import open_postgres_store, schema
from crossmodalrag.store.postgres.connection import PgConnection, pool_for
from tests.conftest import commit_files
from tests.postgres import create_role, hand_database_to


def _events(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["events", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["events"]


def test_two_owners_who_ingested_one_repository_each_build_their_own_hierarchy(
    postgres_url, repo, tmp_path, capsys, monkeypatch
):
    commit_files(repo, {"parser.py": "def parse(s):\n    return s.split()\n"}, "Add naive parser")
    suffix = tmp_path.name.replace("-", "_")[-12:]
    with open_postgres_store(hand_database_to(postgres_url, f"admin_{suffix}")):
        pass
    team = f"team_{suffix}"
    create_role(postgres_url, team)
    seen = {}
    for who in ("alice", "bob"):
        monkeypatch.setenv("CMRAG_DB_URL", create_role(postgres_url, f"{who}_{suffix}", member_of=(team,)))
        assert main(["ingest-git", str(repo)]) == 0
        assert main(["build-memory"]) == 0, capsys.readouterr().err
        seen[who] = _events(capsys)
    assert [e["statement"] for e in seen["alice"]] == [e["statement"] for e in seen["bob"]] == ["Add naive parser"]
    assert seen["alice"][0]["id"] == seen["bob"][0]["id"]  # the same id, each owner's own node
    assert seen["alice"][0]["evidence"][0]["source_id"] != seen["bob"][0]["evidence"][0]["source_id"]
    monkeypatch.setenv("CMRAG_DB_OWNER", team)  # bob builds the team's hierarchy from what he sees
    assert main(["build-memory"]) == 0, capsys.readouterr().err
    assert [e["id"] for e in _events(capsys)] == [seen["bob"][0]["id"]]  # the team's node, beside his own
    monkeypatch.delenv("CMRAG_DB_OWNER")
    assert _events(capsys) == seen["bob"]  # his own hierarchy is still only his


def test_an_older_memory_keeps_its_hierarchy_with_its_owner(postgres_url, tmp_path):
    """Version 14 gives the nodes' evidence, edges, cards and extraction states their node's owner."""
    import psycopg

    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    pool = pool_for(admin, "", 30.0)
    schema.migrate(PgConnection(raw := pool.getconn()), target=13)
    pool.putconn(raw)
    alice, bob = (create_role(postgres_url, f"{who}_{suffix}") for who in ("alice", "bob"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # version 13's rows, alice's (the superuser writes)
        owner = f"alice_{suffix}"
        source = conn.execute(
            "INSERT INTO sources (source_type, uri, fingerprint, ingested_at, owner)"
            " VALUES ('note', 'n.md', 'f', 0, %s) RETURNING id",
            (owner,),
        ).fetchone()[0]
        chunk = conn.execute(
            "INSERT INTO chunks (source_id, chunk_index, text, char_start, char_end, owner)"
            " VALUES (%s, 0, 'x', 0, 1, %s) RETURNING id",
            (source, owner),
        ).fetchone()[0]
        for node in ("ev_1", "ep_1"):
            conn.execute(
                "INSERT INTO memory_nodes (id, level, title, fingerprint, created_at, updated_at, source_id, owner)"
                " VALUES (%s, 'event', 't', 'f', 0, 0, %s, %s)",
                (node, source, owner),
            )
        conn.execute("INSERT INTO memory_evidence (node_id, chunk_id, role) VALUES ('ev_1', %s, 'cited')", (chunk,))
        conn.execute("INSERT INTO memory_edges (src, dst, kind) VALUES ('ev_1', 'ep_1', 'in_episode')")
        conn.execute(
            "INSERT INTO memory_cards (node_id, node_fingerprint, question, answer, generator, created_at)"
            " VALUES ('ev_1', 'f', 'q', 'a', 'test', 0)"
        )
        conn.execute(
            "INSERT INTO memory_extractions (source_id, source_fingerprint, text_hash, model, prompt_version,"
            " status, updated_at) VALUES (%s, 'f', 'h', 'm', 'p', 'done', 0)",
            (source,),
        )
    with open_postgres_store(admin):  # the tables' owner upgrades the memory
        pass
    tables = ("memory_nodes", "memory_evidence", "memory_edges", "memory_cards", "memory_extractions")
    with open_postgres_store(alice) as store:
        counts = [store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in tables]
        assert counts == [2, 1, 1, 1, 1]
    with open_postgres_store(bob) as store, store.transaction() as conn:  # the same id is bob's own node now
        conn.execute(
            "INSERT INTO memory_nodes (id, level, title, fingerprint, created_at, updated_at)"
            " VALUES ('ev_1', 'event', 'mine', 'f', 0, 0)"
        )
        assert [row[0] for row in conn.execute("SELECT title FROM memory_nodes")] == ["mine"]
