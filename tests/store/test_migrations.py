import sqlite3
import unicodedata

import pytest

from crossmodalrag.errors import StoreError
from crossmodalrag.index import fts
from crossmodalrag.store import open_store
from crossmodalrag.store.migrations import INDEX_FTS_VERSION, LATEST_VERSION, migrate


def test_new_database_is_wal_with_busy_timeout_and_latest_schema(db_path):
    with open_store(db_path) as store:
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
        assert store.schema_version() == LATEST_VERSION
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}
    assert {"sources", "chunks", "chunks_fts", "queries_eval", "schema_migrations"} <= tables


def test_a_version_1_database_upgrades_in_place_keeping_its_data(db_path):
    """A database made by the first schema version, with data in it, migrates on open."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute(
        "INSERT INTO sources (id, source_type, uri, fingerprint, title, ingested_at) VALUES "
        "(1, 'note', '/v/a.md', 'f1', 'A', 0), (2, 'commit', '/r@abc', 'f2', 'fix', 0)"
    )
    conn.execute(
        "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end) VALUES "
        "(1, 1, 0, 'A\nalpha', 0, 5), (2, 2, 0, 'fix\nbeta', 0, 4)"
    )
    conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (1, 'A', 'A alpha'), (2, 'fix', 'fix beta')")
    conn.close()

    with open_store(db_path) as store:
        assert store.schema_version() == LATEST_VERSION
        modalities = dict(store.conn.execute("SELECT id, modality FROM chunks"))
        found = store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH 'alpha'").fetchall()
    assert modalities == {1: "text", 2: "code"}
    assert [r[0] for r in found] == [1]


def test_reopening_applies_nothing_twice(db_path):
    open_store(db_path).close()
    with open_store(db_path) as store:
        versions = [r[0] for r in store.conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == list(range(1, LATEST_VERSION + 1))


def test_a_newer_database_is_refused(db_path):
    open_store(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("INSERT INTO schema_migrations VALUES (999, 0)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this program"):
        open_store(db_path)


def test_a_file_that_is_not_a_database_is_a_store_error(db_path):
    db_path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        open_store(db_path)


def test_opening_for_reading_never_creates_a_database(db_path):
    with pytest.raises(StoreError, match="mem init-db"):
        open_store(db_path, create=False)
    assert not db_path.exists()


def test_deleting_a_chunk_removes_its_fts_row(store):
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO sources (id, source_type, uri, fingerprint, ingested_at) VALUES (1,'note','/a','f',0)"
        )
        conn.execute(
            "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end) VALUES (7,1,0,'x',0,1)"
        )
        conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (7, '', 'zebra')")
    with store.transaction() as conn:
        conn.execute("DELETE FROM sources WHERE id = 1")  # cascades to chunks, trigger to FTS
    assert store.conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'zebra'").fetchone()[0] == 0


def test_an_older_index_is_re_tokenized_in_place_with_progress(db_path):
    """A version-3 database indexed words only: Chinese was one token per clause. Opening it
    re-tokenizes the stored chunks (no re-ingest), once, and reports progress."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=3)
    conn.execute(
        "INSERT INTO sources (id, source_type, uri, fingerprint, title, ingested_at)"
        " VALUES (1, 'note', '/v/a.md', 'f', '解析器', 0)"
    )
    for chunk_id in range(1, 6):
        text = f"解析器\n解析器为什么要重写第{chunk_id}次"
        conn.execute(
            "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end) VALUES (?, 1, ?, ?, 0, 9)",
            (chunk_id, chunk_id, text),
        )
        conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (?, '解析器', ?)", (chunk_id, text))
    assert conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH '\"重写\"'").fetchone()[0] == 0
    conn.close()

    calls = []
    with open_store(db_path, progress=lambda done, total: calls.append((done, total))) as store:
        found = store.conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH '\"重写\"'").fetchone()[0]
        rows = store.conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        columns = {r[1] for r in store.conn.execute("PRAGMA table_info(chunks)")}
    assert found == 5 and rows == 5
    assert calls and calls[-1] == (5, 5)
    assert calls.count((5, 5)) == 1, "migrations 8, 10 and 11 each re-tokenize: the last pending one does it once"
    assert {"byte_start", "byte_end"} <= columns


def test_a_version_7_index_gains_stem_and_syllable_pair_tokens_in_place(db_path):
    """Migration 8 re-tokenizes: a Spanish chunk indexed before it is found by another form of its
    words (stem tokens), with no re-ingest."""
    _one_chunk_indexed_at(db_path, 7, "Las declaraciones del gobierno se publicaron en mayo.").close()
    with open_store(db_path) as store:
        assert store.schema_version() >= 8
        found = store.conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'zqdeclar'").fetchone()[0]
    assert found == 1


def test_a_version_10_index_gains_the_nfkc_forms_of_full_width_words_in_place(db_path):
    """Migration 11 re-tokenizes: a chunk with full-width Latin indexed before it is found by the
    word's usual spelling, with no re-ingest."""
    conn = _one_chunk_indexed_at(db_path, 10, "データベースを ＰｏｓｔｇｒｅＳＱＬ に移行した。")
    assert conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'postgresql'").fetchone()[0] == 0
    conn.close()
    with open_store(db_path) as store:
        assert store.schema_version() >= 11
        found = store.conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH 'postgresql'").fetchone()[0]
    assert found == 1


def test_a_version_11_memorys_chat_turns_gain_their_own_time(db_path):
    """Migration 12 dates each stored chat turn by the `time` its metadata carries (when it was said),
    so a conversation continued after its start is filtered and cited by its turns' dates with no
    re-ingest; chunks without one (a note's, a malformed time) keep their source's date."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=11)
    conn.execute(
        "INSERT INTO sources (id, source_type, uri, fingerprint, title, timestamp, ingested_at) VALUES "
        "(1, 'conversation', '/c.json@1', 'f', 'Logo', 1680000000, 0), (2, 'note', '/v/a.md', 'g', 'a', 1680000000, 0)"
    )
    conn.execute(
        "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end, metadata) VALUES "
        """(1, 1, 0, 'Logo\nuser: orange heart', 0, 5, '{"turn": 0, "time": 1680000000.5}'),"""
        """(2, 1, 1, 'Logo\nuser: magenta heart', 0, 5, '{"turn": 1, "time": 1690000000}'),"""
        """(3, 1, 2, 'Logo\nassistant: ok', 0, 5, '{"turn": 2, "time": "soon"}'),"""
        "(4, 2, 0, 'a\\nnote', 0, 4, '{}')"
    )
    conn.close()
    with open_store(db_path) as store:
        times = dict(store.conn.execute("SELECT id, said_at FROM chunks"))
    assert times == {1: 1680000000.5, 2: 1690000000, 3: None, 4: None}


def test_a_version_14_index_of_a_decomposed_vietnamese_note_gains_its_exact_forms_in_place(db_path):
    """Migration 15 re-tokenizes: a Vietnamese chunk saved decomposed (NFD) is indexed composed, so
    its accented words' exact forms and syllable pairs are found, with no re-ingest."""
    text = unicodedata.normalize("NFD", "Chị Hương phụ trách sao lưu dữ liệu.")
    exact = fts.index_body("phụ").split()[1]  # the exact-form token of "phụ"
    _one_chunk_indexed_at(db_path, 14, text).close()  # as FTS_VERSION 6 indexed it: no exact forms
    with open_store(db_path) as store:
        assert store.schema_version() >= 15
        found = store.conn.execute("SELECT COUNT(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (f'"{exact}"',))
        assert found.fetchone()[0] == 1


def _one_chunk_indexed_at(db_path, version: int, text: str) -> sqlite3.Connection:
    """A memory at schema `version` holding one note chunk of `text`, indexed as that version did."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=version)
    conn.execute(
        "INSERT INTO sources (id, source_type, uri, fingerprint, title, ingested_at) "
        "VALUES (1, 'note', '/v/a.md', 'f', 'a', 0)"
    )
    conn.execute(
        "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end) VALUES (1, 1, 0, ?, 0, 9)", (text,)
    )
    conn.execute("INSERT INTO chunks_fts (rowid, title, body) VALUES (1, 'a', ?)", (text,))
    return conn


def test_the_full_text_index_is_prepared_as_index_fts_prepares_it_today():
    assert INDEX_FTS_VERSION == fts.FTS_VERSION, (
        "index/fts.py's FTS_VERSION changed: add a migration with the `retokenize` step to "
        "store/migrations.py and raise INDEX_FTS_VERSION with it"
    )
