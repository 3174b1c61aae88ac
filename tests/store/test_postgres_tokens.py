"""PostgreSQL's lexical index keeps up with index/fts.py's FTS_VERSION: a memory indexed under an older
preparation is re-tokenized by a migration (schema 10), every owner's rows keeping their owner, and then
finds what SQLite finds on the same notes."""

from __future__ import annotations

import pytest

from crossmodalrag.index import fts
from crossmodalrag.index.scripts import exact_tokens, segment_cjk, vietnamese_pairs
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import open_store
from crossmodalrag.store.postgres import PgStore, open_postgres_store, schema
from crossmodalrag.store.postgres.connection import PgConnection, pool_for
from tests.postgres import create_role, hand_database_to
from tests.retrieval.helpers import add_docs, note

NOTES = {
    "alice": (
        note("athens", "# Ταξίδι\nΤο καλοκαίρι πήγαμε στην Αθήνα με το τρένο."),
        note("cat", "# 周末\n我和小王去公园看了猫"),
        note("wide", "# メモ\nＡＢＣ 社との会議は来週です。"),
        note("plain", "# Plain\nAn English note about the ABC company and a train."),
    ),
    "bob": (
        note("athens", "# Αθήνα\nΗ Αθήνα είναι η πρωτεύουσα."),
        note("dog", "# 日記\n公园里有一只狗和猫"),
    ),
}
# Each depends on FTS_VERSION 4 or 5: a Greek word typed without its accent, a one-character CJK word
# at the end of a run, full-width Latin typed as usual (and the other way round).
QUERIES = ("Αθηνα", "Αθήνα", "猫", "ABC", "ＡＢＣ", "τρένο")


def _fts3_body(text: str) -> str:
    """index_body as FTS_VERSION 3 had it, near enough: no folded forms, no NFKC forms, no lone last
    character of a CJK run."""
    extra = fts.identifier_variants(text) + exact_tokens(text) + vietnamese_pairs(text)
    body = segment_cjk(text)
    return f"{body}\n{' '.join(extra)}" if extra else body


def _results(store) -> dict:
    found = {}
    for query in QUERIES:
        for match in ("any", "all"):
            hits = search(store, query, SearchOptions(top_k=10, match=match)).hits
            found[query, match] = {hit.source_uri: round(hit.components["bm25"], 6) for hit in hits}
    return found


def test_the_index_is_prepared_as_index_fts_prepares_it_today():
    assert schema.INDEX_FTS_VERSION == fts.FTS_VERSION, (
        "index/fts.py's FTS_VERSION changed: add a PostgreSQL migration (N, RETOKENIZE, retokenize) to "
        "store/postgres/schema.py MIGRATIONS and raise INDEX_FTS_VERSION with it"
    )
    assert any(schema.retokenize in step for _, _, *step in schema.MIGRATIONS)


@pytest.fixture
def old_memory(postgres_url, tmp_path, monkeypatch):
    """{user: url} of a memory at schema 9 whose owners' notes were indexed the FTS_VERSION 3 way; the
    database's owner is a plain role (a managed server), which makes the schema and then migrates."""

    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    pool = pool_for(admin, "", 30.0)
    conn = PgConnection(pool.getconn())
    schema.migrate(conn, target=9)
    PgStore(pool, conn, admin, 30.0).close()
    users = {"admin": admin}  # and each user's url
    with monkeypatch.context() as old:
        old.setattr(fts, "index_body", _fts3_body)
        old.setattr(fts, "index_title", segment_cjk)
        for who, notes in NOTES.items():
            users[who] = create_role(postgres_url, f"{who}_{suffix}")
            pool = pool_for(users[who], "", 30.0)
            with PgStore(pool, PgConnection(pool.getconn()), users[who], 30.0) as store:
                add_docs(store, *notes)
    return users


def test_an_old_memory_is_re_tokenized_and_finds_what_sqlite_finds(old_memory, tmp_path):
    expected, before = {}, {}
    for who, notes in NOTES.items():
        with open_store(tmp_path / f"{who}.db") as sqlite_store:
            add_docs(sqlite_store, *notes)
            expected[who] = _results(sqlite_store)
        pool = pool_for(old_memory[who], "", 30.0)
        with PgStore(pool, PgConnection(pool.getconn()), old_memory[who], 30.0) as old:
            before[who] = _results(old)
    # The old tokens miss what today's find (or score it otherwise): the migration has work to do.
    assert all(before["alice"][q, "any"] != expected["alice"][q, "any"] for q in ("Αθηνα", "猫", "ＡＢＣ"))
    with open_postgres_store(old_memory["admin"]) as store:  # the database's owner migrates, as `mem init-db`
        assert store.schema_version() == schema.LATEST_VERSION
    for who in NOTES:
        with open_postgres_store(old_memory[who]) as store:
            after = _results(store)
        assert after == expected[who] and after["Αθηνα", "any"] and after["猫", "any"]


def test_re_tokenizing_keeps_every_rows_owner_and_each_owners_statistics(old_memory, postgres_url, monkeypatch):
    import psycopg

    from crossmodalrag.store.postgres import lexical

    monkeypatch.setattr(lexical, "REINDEX_BATCH", 2)  # several batches, as in a big memory
    with open_postgres_store(old_memory["admin"]):
        pass
    with psycopg.connect(postgres_url) as conn:  # the superuser sees every owner's rows
        mismatched = conn.execute(
            "SELECT (SELECT COUNT(*) FROM chunk_terms t JOIN chunks c ON c.id = t.chunk_id WHERE t.owner <> c.owner),"
            " (SELECT COUNT(*) FROM chunk_postings p JOIN chunks c ON c.id = p.chunk_id WHERE p.owner <> c.owner),"
            " (SELECT COUNT(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunk_terms t WHERE t.chunk_id = c.id))"
        ).fetchone()
        stats = conn.execute("SELECT owner, chunks, length FROM chunk_stats").fetchall()  # one row per owner
        scan = conn.execute("SELECT owner, COUNT(*), SUM(length) FROM chunk_terms GROUP BY owner").fetchall()
        forced = conn.execute(
            "SELECT relname FROM pg_class WHERE relname IN ('sources', 'chunks', 'chunk_terms', 'chunk_postings',"
            " 'chunk_stats') AND relforcerowsecurity"
        ).fetchall()
        roles = {row[0] for row in conn.execute("SELECT DISTINCT owner FROM chunks")}
    assert mismatched == (0, 0, 0)
    assert sorted(stats) == sorted(scan) and len(scan) == 2
    assert {role.split("_")[0] for role in roles} == set(NOTES)  # the users', not the migrating role's
    assert len(forced) == 5


def test_several_pending_re_tokenizes_run_once(old_memory, monkeypatch):
    from crossmodalrag.store.postgres import lexical

    calls = []
    reindex = lexical.reindex
    monkeypatch.setattr(lexical, "reindex", lambda conn: calls.append(1) or reindex(conn))
    with open_postgres_store(old_memory["admin"]) as store:  # from schema 9: versions 10 and 11 re-tokenize
        assert store.schema_version() == schema.LATEST_VERSION
    assert len(calls) == 1
    with open_postgres_store(old_memory["alice"]) as store:  # and the index is whole
        assert search(store, "Αθηνα", SearchOptions()).hits
