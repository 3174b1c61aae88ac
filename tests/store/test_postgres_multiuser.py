"""Two users of one PostgreSQL memory (issue 16): each reads only their own chunks, whatever the way
in: `mem ask` (tests/store/test_postgres.py), the HTTP API (`mem serve`) and MCP (the SDK's own client).
Row-level security in the server does it; the API and MCP run the same library code as on SQLite."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.config import load_settings
from crossmodalrag.errors import StoreError
from crossmodalrag.store.postgres import open_postgres_store
from tests.postgres import create_role, hand_database_to
from tests.retrieval.helpers import add_docs, note

SECRETS = {"alice": "the launch code is tangerine", "bob": "the launch code is walnut"}
WORDS = {"alice": "tangerine", "bob": "walnut"}


@pytest.fixture
def two_users(postgres_url, tmp_path):
    """{name: (connection url as that role, the id of their secret note)}; the schema made by the administrator."""
    with open_postgres_store(postgres_url):
        pass
    suffix = tmp_path.name.replace("-", "_")[-12:]
    users = {}
    for who, secret in SECRETS.items():
        url = create_role(postgres_url, f"{who}_{suffix}")
        with open_postgres_store(url) as store:  # the same uri for both: each owns theirs
            add_docs(store, note("secret", f"# Secret\n{secret}"), note(f"{who}-diary", f"# Diary\n{who} met {who}"))
            source_id = store.conn.execute("SELECT id FROM sources WHERE uri = '/vault/secret.md'").fetchone()[0]
        users[who] = (url, source_id)
    return users


def _settings(url: str):
    return load_settings({"db_url": url, "llm_provider": "none"})


def test_the_api_shows_each_user_only_their_own_chunks(two_users):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from crossmodalrag.api.app import create_app
    from tests.api.helpers import BASE

    for who, other in (("alice", "bob"), ("bob", "alice")):
        url, mine = two_users[who]
        with TestClient(create_app(_settings(url)), base_url=BASE) as client:
            for question in ("what is the launch code?", f"is it {WORDS[other]}?", f"{other} met"):
                answered = client.get("/ask", params={"q": question, "no_llm": True})
                assert answered.status_code == 200, answered.text
                shown = json.dumps([answered.json()[k] for k in ("answer", "evidence")])  # not the echoed query
                assert WORDS[other] not in shown and f"{other} met" not in shown
            assert WORDS[who] in client.get("/ask", params={"q": "launch code", "no_llm": True}).text
            listed = client.get("/sources").json()
            assert listed["total"] == 2 and {s["id"] for s in listed["sources"]} >= {mine}
            assert client.get(f"/sources/{mine}").status_code == 200
            assert client.get(f"/sources/{two_users[other][1]}").status_code == 404  # another's id: not found
            assert client.get("/stats").json()["sources"] == {"note": 2}
            health = client.get("/health").json()
            assert health["database"].startswith("postgresql://") and health["sources"] == {"note": 2}


def test_the_api_reads_postgresql_through_a_read_only_session(two_users):
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.retrieval.semantic import semantic_index
    from crossmodalrag.store.readonly import open_configured_reader
    from tests.fakes import HashingEmbedder

    settings, embedder = _settings(two_users["alice"][0]), HashingEmbedder()
    with open_postgres_store(two_users["alice"][0]) as store:
        embed_missing(store, embedder, 8)
        semantic_index(store, embedder, settings).nearest(embedder.embed(["launch"])[0], 2)  # the HNSW index
    with open_configured_reader(settings) as store:
        assert store.backend == "postgresql"
        nearest = semantic_index(store, embedder, settings).nearest(embedder.embed(["launch code"])[0], 2)
        assert two_users["alice"][1] in {  # vector search runs in the read-only session, own chunks only
            store.conn.execute("SELECT source_id FROM chunks WHERE id = ?", (chunk,)).fetchone()[0] for chunk in nearest
        }
        with pytest.raises(StoreError, match="read-only"):
            store.conn.execute("DELETE FROM sources")


def test_mcp_shows_each_user_only_their_own_chunks(two_users):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import Client

    from crossmodalrag.mcp_server.server import build_server
    from tests.agent.mcp_calls import answer, call, run_async

    async def scenario(who: str, other: str) -> None:
        server = build_server(_settings(two_users[who][0]))
        try:
            async with Client(server) as client:
                for query in ("launch code", WORDS[other], f"{other} met"):
                    found = json.dumps(
                        (await call(client, "memory_search", {"query": query, "compact": False}))["results"]
                    )
                    assert WORDS[other] not in found and f"{other} met" not in found
                found = await call(client, "memory_search", {"query": "launch code", "compact": False})
                assert WORDS[who] in json.dumps(found)
                got = await call(client, "memory_get", {"ids": [two_users[who][1], two_users[other][1]]})
                assert got["missing"] == [two_users[other][1]] and WORDS[who] in json.dumps(got["sources"])
                answered = await answer(client, {"question": "What is the launch code?", "use_llm": False})
                shown = json.dumps([answered[k] for k in ("answer", "evidence")])
                assert WORDS[who] in shown and WORDS[other] not in shown
                stats = await call(client, "memory_stats", {})
                assert stats["sources"] == {"note": 2}
                for tool in ("memory_timeline", "memory_context", "memory_browse"):
                    shown = json.dumps(await call(client, tool, {}))
                    assert WORDS[other] not in shown and f"{other} met" not in shown
        finally:
            server.service.close()

    for who, other in (("alice", "bob"), ("bob", "alice")):
        run_async(scenario(who, other))


def test_tables_beside_sources_and_chunks_are_private_too(two_users):
    """Eval queries, memory nodes, their evidence, edges and cards, extractions, usage and agent memories."""
    from crossmodalrag.evals.queries import EvalQuery, upsert_queries

    url, secret = two_users["alice"]
    with open_postgres_store(url) as store:
        chunk = store.conn.execute("SELECT id FROM chunks WHERE source_id = ?", (secret,)).fetchone()[0]
        upsert_queries(store, [EvalQuery("what is the launch code?", ["/vault/secret.md"])])
        with store.transaction() as conn:
            for node in ("ev_1", "ep_1"):
                conn.execute(
                    "INSERT INTO memory_nodes (id, level, title, statement, fingerprint, created_at, updated_at)"
                    " VALUES (?, 'event', 'launch', 'the launch code is tangerine', 'f', 0, 0)",
                    (node,),
                )
            conn.execute("INSERT INTO memory_evidence (node_id, chunk_id, role) VALUES ('ev_1', ?, 'cited')", (chunk,))
            conn.execute("INSERT INTO memory_edges (src, dst, kind) VALUES ('ev_1', 'ep_1', 'in_episode')")
            conn.execute(
                "INSERT INTO memory_cards (node_id, node_fingerprint, question, answer, generator, created_at)"
                " VALUES ('ev_1', 'f', 'launch code?', 'tangerine', 'test', 0)"
            )
            conn.execute(
                "INSERT INTO memory_extractions (source_id, source_fingerprint, text_hash, model, prompt_version,"
                " status, updated_at) VALUES (?, 'f', 'h', 'm', 'p', 'done', 0)",
                (secret,),
            )
            conn.execute("INSERT INTO memory_usage (target_id, event, at) VALUES ('ev_1', 'retrieved', 0)")
            conn.execute(
                "INSERT INTO agent_memories (source_id, tags, content_hash, created_at, updated_at)"
                " VALUES (?, '[\"tangerine\"]', 'h', 0, 0)",
                (secret,),
            )
            conn.execute(
                "INSERT INTO agent_memory_links (source_id, target_id, relation, similarity) VALUES (?, ?, 'near', 1)",
                (secret, secret),
            )
    tables = ["queries_eval", "memory_nodes", "memory_evidence", "memory_edges", "memory_cards"]
    tables += ["memory_extractions", "memory_usage", "agent_memories", "agent_memory_links"]
    with open_postgres_store(url) as alice, open_postgres_store(two_users["bob"][0]) as bob:
        for table in tables:
            assert alice.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] >= 1, table
            assert bob.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0, table
        upsert_queries(bob, [EvalQuery("what is the launch code?", ["/vault/secret.md"])])  # bob's own copy
        assert bob.conn.execute("SELECT COUNT(*) FROM queries_eval").fetchone()[0] == 1
        with pytest.raises(Exception, match="row-level security"):  # hanging a row on alice's source
            with bob.transaction() as conn:
                conn.execute(
                    "INSERT INTO agent_memories (source_id, content_hash, created_at, updated_at)"
                    " VALUES (?, 'h', 0, 0)",
                    (secret,),
                )


def test_a_user_edits_and_removes_their_notes_when_a_plain_role_owns_the_tables(postgres_url, tmp_path):
    """The documented setup on a managed server: the database's owner (no superuser) runs `mem init-db`.
    A cascade from sources runs as that owner: its triggers must still reach the user's own rows (the
    statistics insert failed, and the postings of removed chunks stayed behind, their words too)."""
    import psycopg

    from crossmodalrag.ingest import remove_sources

    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    with open_postgres_store(admin):
        pass
    bob = create_role(postgres_url, f"bob_{suffix}")
    with open_postgres_store(bob) as store:
        add_docs(store, note("plan", "# Plan\nthe heron granite condition"))
        add_docs(store, note("plan", "# Plan\nthe heron basalt condition"))  # an edit: its old chunks go
        assert remove_sources(store, ["/vault/plan.md"]) == 1
    with psycopg.connect(postgres_url) as conn:  # the superuser sees every owner's rows
        left = conn.execute("SELECT COUNT(*) FROM chunk_postings").fetchone()[0]
        stats = conn.execute("SELECT COALESCE(SUM(chunks), 0) FROM chunk_stats").fetchone()[0]
    assert (left, stats) == (0, 0)
    with psycopg.connect(bob) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DELETE FROM embedding_models")  # it cascaded to every owner's vectors


def test_a_role_without_the_privileges_gets_one_line_saying_who_must_act(postgres_url, tmp_path, capsys, monkeypatch):
    import psycopg

    from crossmodalrag.cli.main import main

    suffix = tmp_path.name.replace("-", "_")[-12:]
    database = psycopg.conninfo.conninfo_to_dict(postgres_url)["dbname"]
    owner = create_role(postgres_url, f"owner_{suffix}")
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # a fresh database, owned, without pgvector
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO "owner_{suffix}"')
    monkeypatch.setenv("CMRAG_DB_URL", owner)
    assert main(["init-db"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: PostgreSQL refused: permission denied to create extension")
    assert "CREATE EXTENSION vector" in error and "\n" not in error and "unexpected" not in error


def test_an_owner_the_user_may_not_use_is_an_error_at_connect(two_users, postgres_url, tmp_path, capsys, monkeypatch):
    """A misspelt CMRAG_DB_OWNER, or another user's role, showed an empty memory with exit 0 (row-level
    security hides every row); a team role the user is a member of still works."""
    from crossmodalrag.cli.main import main

    suffix = tmp_path.name.replace("-", "_")[-12:]
    create_role(postgres_url, f"team_{suffix}")
    monkeypatch.setenv("CMRAG_DB_URL", create_role(postgres_url, f"carol_{suffix}", member_of=(f"team_{suffix}",)))
    for owner, why in ((f"nosuch_{suffix}", "which is no role of this server"), (f"alice_{suffix}", "not a member")):
        monkeypatch.setenv("CMRAG_DB_OWNER", owner)
        assert main(["stats"]) == 1
        shown = capsys.readouterr()
        assert shown.out == "" and why in shown.err and "\n" not in shown.err.strip()
        assert shown.err.startswith(f"error: CMRAG_DB_OWNER is '{owner}'")
        assert "(hint: CMRAG_DB_OWNER must name your role or a role you are a member of)" in shown.err
    monkeypatch.setenv("CMRAG_DB_OWNER", f"team_{suffix}")
    assert main(["remember", "the team meets on Thursdays"]) == 0
    capsys.readouterr()
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sources"] == {"memory": 1}


def test_forget_vacuum_by_a_user_not_owning_the_tables_says_what_happened(two_users, capsys, monkeypatch):
    """Alone, --vacuum deletes nothing, so it is an error (not saying "the forgotten rows are deleted")."""
    from crossmodalrag.cli.main import main

    monkeypatch.setenv("CMRAG_DB_URL", two_users["alice"][0])
    assert main(["forget", "--vacuum"]) == 1
    alone = capsys.readouterr().err
    assert alone.startswith("error: cannot wipe the table files: the bytes of rows forgotten earlier stay there")
    assert "deleted" not in alone and "VACUUM (FULL) sources, chunks" in alone
    # With sources it forgets and reports it (the forget happened: exit 1 and no report made a script
    # retry into "no stored source" and lose still_on_disk), saying what the tables' owner runs.
    assert main(["forget", "/vault/secret.md", "--yes", "--vacuum", "--json"]) == 0
    shown = capsys.readouterr()
    report = json.loads(shown.out)
    assert report["sources"] == 1 and not report["vacuumed"] and report["bytes_may_remain"]
    assert report["vacuum_by_owner"].startswith("VACUUM (FULL) sources, chunks")
    assert f"ask the database owner to run `{report['vacuum_by_owner']}`" in shown.err
    assert "run `mem forget --vacuum`" not in shown.err and "error" not in shown.err
    with open_postgres_store(two_users["alice"][0]) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM sources WHERE uri = '/vault/secret.md'").fetchone()[0] == 0
    assert main(["forget", "/vault/alice-diary.md", "--yes"]) == 0  # without --vacuum: not told to run it either
    assert "ask the database owner to run `VACUUM (FULL)" in capsys.readouterr().err


def test_a_member_on_a_memory_an_older_mem_made_is_told_who_upgrades_it(postgres_url, tmp_path, capsys, monkeypatch):
    """Only the tables' owner may migrate them: a member's command said "permission denied for schema
    public", and a reading one told the member to run `mem init-db` themselves."""

    from crossmodalrag.cli.main import main
    from crossmodalrag.store.postgres import schema
    from crossmodalrag.store.postgres.connection import PgConnection, pool_for

    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    pool = pool_for(admin, "", 30.0)
    old = schema.LATEST_VERSION - 1
    schema.migrate(PgConnection(raw := pool.getconn()), target=old)
    pool.putconn(raw)
    monkeypatch.setenv("CMRAG_DB_URL", create_role(postgres_url, f"bob_{suffix}"))
    for command in (["remember", "bob was here"], ["ask", "zeppelin", "--no-llm"], ["stats"]):
        assert main(command) == 1
        error = capsys.readouterr().err.strip().splitlines()[-1]  # remember may note its embedder first
        assert error.startswith("error: the memory schema of postgresql://") and "permission" not in error
        assert f"(version {old}) is older than this mem's ({schema.LATEST_VERSION})" in error
        assert "(hint: the database's owner runs `mem init-db` once to upgrade it" in error
    monkeypatch.setenv("CMRAG_DB_URL", admin)
    assert main(["init-db"]) == 0
    monkeypatch.setenv("CMRAG_DB_URL", create_role(postgres_url, f"carol_{suffix}"))
    assert main(["remember", "carol was here"]) == 0
