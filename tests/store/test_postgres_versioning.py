"""Versioning on PostgreSQL (issue 16): one hash chain per owner, private to it, append-only for clients,
and history that starts with genesis records when a memory is upgraded. The behaviour shared with SQLite
(log, verify, history, checkpoints, diff, rollback, as-of, forget) is tested on both backends in
tests/test_versioning.py and tests/test_versioning_writes.py."""

from __future__ import annotations

import pytest

from crossmodalrag.store.postgres import PgStore, open_postgres_store, schema
from crossmodalrag.store.postgres.connection import PgConnection, pool_for
from crossmodalrag.versioning.history import checkpoint, recent_changes, rollback
from crossmodalrag.versioning.verify import verify
from tests.postgres import create_role
from tests.retrieval.helpers import add_docs, note


@pytest.fixture
def two_users(postgres_url, tmp_path):
    """{name: url connecting as that ordinary role}; each wrote the same uri with their own text."""
    with open_postgres_store(postgres_url):
        pass  # the schema, made by the administrator
    suffix = tmp_path.name.replace("-", "_")[-12:]
    users = {}
    for who in ("alice", "bob"):
        users[who] = create_role(postgres_url, f"{who}_{suffix}")
        with open_postgres_store(users[who]) as store:
            add_docs(store, note("plan", f"# Plan\n{who} plans the launch"), note(f"{who}-diary", f"# Diary\n{who}"))
    return users


def test_each_owner_has_a_chain_of_its_own_that_no_one_else_reads(two_users):
    for who, url in two_users.items():
        with open_postgres_store(url) as store:
            report = verify(store.conn)
            assert report.ok and (report.records, report.head_seq, report.rows_checked) == (2, 2, 2)
            targets = [change.target for change in recent_changes(store.conn)]
            assert sorted(targets) == sorted(["/vault/plan.md", f"/vault/{who}-diary.md"])
            owners = store.conn.execute("SELECT DISTINCT owner FROM owner_change_log").fetchall()
            assert [row[0] for row in owners] == [store.conn.execute("SELECT current_user").fetchone()[0]]


def test_clients_may_append_to_their_log_but_not_rewrite_it(two_users):
    from crossmodalrag.errors import StoreError

    with open_postgres_store(two_users["alice"]) as store:
        for statement in ("UPDATE change_log SET actor = 'x'", "DELETE FROM change_log"):
            with pytest.raises(StoreError, match="PostgreSQL refused: permission denied"):
                store.conn.execute(statement)
        assert verify(store.conn).ok


def test_a_client_may_erase_a_forgotten_sources_hashes_in_its_own_chain_only(two_users):
    """`mem forget` puts markers in place of the erased hashes and re-chains (schema 13's grant)."""
    from crossmodalrag.forget import find_sources, forget_sources

    with open_postgres_store(two_users["bob"]) as bob:
        bobs = bob.conn.execute("SELECT seq, content_hash, hash FROM change_log ORDER BY seq").fetchall()
    with open_postgres_store(two_users["alice"]) as store:
        forget_sources(store, find_sources(store, uri="/vault/plan.md"))
        hashes = [row[0] for row in store.conn.execute("SELECT content_hash FROM change_log ORDER BY seq")]
        assert hashes[0].startswith("erased:") and hashes[-1] == hashes[0]  # the tombstone names the marker
        assert verify(store.conn).ok
    with open_postgres_store(two_users["bob"]) as bob:
        assert bob.conn.execute("SELECT seq, content_hash, hash FROM change_log ORDER BY seq").fetchall() == bobs
        assert verify(bob.conn).ok


def test_checkpoints_and_rollback_stay_within_one_owner(two_users):
    with open_postgres_store(two_users["alice"]) as alice, open_postgres_store(two_users["bob"]) as bob:
        assert checkpoint(alice, "before") == 3 and checkpoint(bob, "before") == 3  # the same name, two chains
        add_docs(alice, note("plan", "# Plan\nalice cancels the launch"))
        add_docs(bob, note("plan", "# Plan\nbob moves the launch"))
        plan = rollback(alice, "before")
        assert plan.restore == [("source", "/vault/plan.md")]
        texts = {who: s.conn.execute("SELECT text FROM chunks").fetchall() for who, s in (("a", alice), ("b", bob))}
        assert "alice plans" in " ".join(r[0] for r in texts["a"]) and "bob moves" in " ".join(r[0] for r in texts["b"])
        assert verify(alice.conn).ok and verify(bob.conn).ok


def test_an_upgraded_memory_starts_its_history_with_genesis_records(postgres_url):
    pool = pool_for(postgres_url, "", 30.0)
    conn = PgConnection(pool.getconn())
    schema.migrate(conn, target=3)  # a memory made before versioning came to PostgreSQL (rows as then written)
    with PgStore(pool, conn, postgres_url, 30.0) as old:
        for uri in ("/vault/a.md", "/vault/b.md"):
            source = conn.execute(
                "INSERT INTO sources (source_type, uri, fingerprint, ingested_at) VALUES ('note', ?, 'f', 0)", (uri,)
            ).lastrowid
            conn.execute(
                "INSERT INTO chunks (source_id, chunk_index, text, char_start, char_end) VALUES (?, 0, ?, 0, 5)",
                (source, f"text of {uri}"),
            )
        assert old.schema_version() == 3
    with open_postgres_store(postgres_url) as store:  # migrates to 4 and on without re-ingesting
        rows = store.conn.execute("SELECT op, actor FROM change_log ORDER BY seq").fetchall()
        assert [tuple(r) for r in rows] == [("genesis", "migration")] * 2
        assert verify(store.conn).ok


def test_an_upgraded_memorys_chat_turns_gain_their_own_time(postgres_url):
    """Schema 9 (SQLite's 11): each stored chat turn is dated by its metadata's `time`, every owner's."""
    pool = pool_for(postgres_url, "", 30.0)
    conn = PgConnection(pool.getconn())
    schema.migrate(conn, target=8)
    with PgStore(pool, conn, postgres_url, 30.0):
        source = conn.execute(
            "INSERT INTO sources (source_type, uri, fingerprint, timestamp, ingested_at, owner)"
            " VALUES ('conversation', '/c.json@1', 'f', 1680000000, 0, 'someone_else') RETURNING id"
        ).fetchone()[0]
        for index, metadata in enumerate(('{"time": 1690000000.5}', '{"time": "soon"}', "{}")):
            conn.execute(
                "INSERT INTO chunks (source_id, chunk_index, text, char_start, char_end, metadata, owner)"
                " VALUES (?, ?, 'turn', 0, 4, ?, 'someone_else')",
                (source, index, metadata),
            )
    with open_postgres_store(postgres_url) as store:
        times = [
            r[0] for r in store.conn.execute("SELECT said_at FROM chunks ORDER BY chunk_index")
        ]  # a superuser's view
    assert times == [1690000000.5, None, None]
