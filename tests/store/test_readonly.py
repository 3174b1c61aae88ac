"""The read-only opener `mem stats`, `sources`, `source` and `serve` use."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import crossmodalrag
from crossmodalrag.errors import StoreError
from crossmodalrag.store import open_store
from crossmodalrag.store.readonly import open_reader

IGNORED = shutil.ignore_patterns("__pycache__")


def test_a_database_another_process_holds_exclusively_is_locked_not_foreign(tmp_path):
    db = tmp_path / "m.db"
    open_store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute(
        "INSERT INTO queries_eval (query_text, expected_source_uris, created_at, updated_at) VALUES ('q', '[]', 0, 0)"
    )
    try:
        with pytest.raises(StoreError, match="stayed locked by another process"):  # not "run `mem init-db`"
            open_reader(db, busy_timeout=0.1)
    finally:
        holder.close()


@pytest.fixture
def read_only_folder(tmp_path):
    """A memory in a folder nothing may write, as on read-only media: `chattr +i` stops root too
    (a mode bit would not), so the test runs where it can set that attribute."""
    from crossmodalrag.cli.main import main

    folder = tmp_path / "media"
    folder.mkdir()
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "note.md").write_text("# Parser\n\nThe parser cache is warm.\n")
    assert main(["ingest-notes", str(tmp_path / "vault"), "--db-path", str(folder / "memory.db")]) == 0
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root on a filesystem with the immutable attribute)")
    try:
        yield folder / "memory.db"
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_memory_on_read_only_media_is_read_and_a_write_says_it_is_read_only(read_only_folder, capsys):
    from crossmodalrag.cli.main import main

    db = ["--db-path", str(read_only_folder)]
    assert main(["stats", *db]) == 0 and "sources: note 1" in capsys.readouterr().out
    assert main(["ask", "parser cache", "--no-llm", *db]) == 0 and "parser cache" in capsys.readouterr().out
    assert main(["forget", "--path", str(read_only_folder.parent.parent / "vault"), "--yes", *db]) == 1
    error = capsys.readouterr().err
    assert "read-only" in error and "restore a backup" not in error and "init-db" not in error


def test_a_new_database_in_a_folder_that_may_not_be_written_names_the_folder(read_only_folder, capsys):
    from crossmodalrag.cli.main import main

    assert main(["init-db", "--db-path", str(read_only_folder.parent / "new.db")]) == 1
    error = capsys.readouterr().err
    assert f"its folder {read_only_folder.parent} is not writable" in error  # not "check that it is readable"
    assert "in a folder you can write to" in error and not (read_only_folder.parent / "new.db").exists()


def test_usage_tracking_on_read_only_media_still_answers_and_says_the_log_waits(read_only_folder, capsys, monkeypatch):
    from crossmodalrag.cli.main import main

    monkeypatch.setenv("CMRAG_USAGE_TRACKING", "on")
    assert main(["ask", "parser cache", "--no-llm", "--db-path", str(read_only_folder)]) == 0
    captured = capsys.readouterr()
    assert "parser cache" in captured.out
    assert "usage not logged: the database is read-only" in captured.out + captured.err


@pytest.fixture
def folder_the_user_may_not_write(tmp_path):
    """A memory (WAL) in a folder of mode 555, and a way to run `mem` as a user who may not write it: the
    test's own user, or `nobody` when the tests run as root (whom no mode bit stops). The folder lives in
    the shared temp dir, since `nobody` cannot reach into root's private pytest folder."""
    from crossmodalrag.cli.main import main

    place = Path(tempfile.mkdtemp(prefix="cmrag-ro-"))
    try:
        os.chmod(place, 0o755)
        folder, home = place / "media", place / "home"
        folder.mkdir()
        home.mkdir(mode=0o777)
        os.chmod(home, 0o777)
        (tmp_path / "vault").mkdir()
        (tmp_path / "vault" / "note.md").write_text("# Parser\n\nThe parser cache is warm.\n")
        db = folder / "memory.db"
        assert main(["ingest-notes", str(tmp_path / "vault"), "--db-path", str(db)]) == 0
        os.chmod(db, 0o644)
        os.chmod(folder, 0o555)

        # `nobody` may not reach this checkout either (CI clones into a private temp dir): a copy of
        # the package beside the folder is imported instead.
        copy = place / "package"
        shutil.copytree(Path(crossmodalrag.__file__).parent, copy / "crossmodalrag", ignore=IGNORED)
        for folder_path, _, _ in os.walk(copy):
            os.chmod(folder_path, 0o755)

        def mem(*args: str) -> subprocess.CompletedProcess:
            user = "nobody" if os.geteuid() == 0 else None
            env = {**os.environ, "HOME": str(home), "PYTHONPATH": os.pathsep.join([str(copy), *sys.path])}
            command = [sys.executable, "-m", "crossmodalrag", *args, "--db-path", str(db)]
            return subprocess.run(command, capture_output=True, text=True, env=env, user=user, cwd=home)

        yield mem
    finally:
        os.chmod(place / "media", 0o755)
        shutil.rmtree(place)


def test_a_memory_in_a_folder_the_user_may_not_write_is_read(folder_the_user_may_not_write):
    mem = folder_the_user_may_not_write
    stats = mem("stats")
    assert stats.returncode == 0 and "sources: note 1" in stats.stdout, stats.stderr
    found = mem("ask", "parser cache", "--no-llm")
    assert found.returncode == 0 and "parser cache" in found.stdout, found.stderr
    assert_doctor_finds_it_healthy_and_read_only(json.loads(mem("doctor", "--json").stdout))


def assert_doctor_finds_it_healthy_and_read_only(report: dict) -> None:
    assert report["database"]["integrity"] == "ok" and report["database"]["chunks"] == 1
    assert not any("database" in problem or "index" in problem for problem in report["problems"])
    assert any(line.startswith("the database is read-only") for line in report["explanations"])


def test_doctor_finds_a_memory_on_read_only_media_healthy(read_only_folder, capsys):
    from crossmodalrag.cli.main import main

    main(["doctor", "--json", "--db-path", str(read_only_folder)])
    assert_doctor_finds_it_healthy_and_read_only(json.loads(capsys.readouterr().out))


def test_doctor_checks_the_text_index_of_a_read_only_file_without_writing(tmp_path, capsys):
    """The FTS5 integrity check is an INSERT: on a file that cannot be written it failed, and doctor
    called a healthy index damaged. `chattr +i` makes the file read-only for root too."""
    from crossmodalrag.cli.main import main

    db = tmp_path / "memory.db"
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "note.md").write_text("# Parser\n\nThe parser cache is warm.\n")
    assert main(["ingest-notes", str(tmp_path / "vault"), "--db-path", str(db)]) == 0
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root on a filesystem with the immutable attribute)")
    try:
        capsys.readouterr()
        main(["doctor", "--json", "--db-path", str(db)])
        assert_doctor_finds_it_healthy_and_read_only(json.loads(capsys.readouterr().out))
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


def test_doctor_says_an_older_read_only_memory_cannot_be_upgraded_in_place(tmp_path, capsys):
    from crossmodalrag.cli.main import main
    from crossmodalrag.store.migrations import LATEST_VERSION, migrate

    db = tmp_path / "memory.db"
    conn = sqlite3.connect(db, isolation_level=None)
    migrate(conn, target=LATEST_VERSION - 1)
    conn.close()
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("needs chattr +i (root on a filesystem with the immutable attribute)")
    try:
        assert main(["doctor", "--json", "--db-path", str(db)]) == 1
        report = json.loads(capsys.readouterr().out)
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert any("older than this program's" in p and "upgrade the copy" in p for p in report["problems"])
    assert not any("next command that writes" in line for line in report["explanations"])


def test_a_memory_on_read_only_media_is_backed_up(read_only_folder, tmp_path):
    """Copying a memory off a read-only snapshot: the backup's plain connection wanted to create a -shm there."""
    from crossmodalrag.store.backup import backup_database

    report = backup_database(read_only_folder, tmp_path / "copies" / "memory.db")
    with sqlite3.connect(report.path) as copy:
        assert copy.execute("SELECT COUNT(*) FROM sources").fetchone() == (1,)


def test_another_applications_sqlite_file_is_refused_and_left_as_it_was(tmp_path):
    places = tmp_path / "places.sqlite"
    with sqlite3.connect(places) as browser:
        browser.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    for opener in (open_store, open_reader):
        with pytest.raises(StoreError, match="another application's SQLite database") as caught:
            opener(places)
        assert "new file" in caught.value.hint
    tables = sqlite3.connect(places).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("moz_places",)]


def test_reading_commands_leave_an_empty_file_empty_and_say_it_is_no_memory_yet(tmp_path, capsys):
    from crossmodalrag.cli.main import main

    empty = tmp_path / "memory.db"
    empty.touch()
    for command in (["log"], ["ask", "parser", "--no-llm"], ["sources"]):
        assert main([*command, "--db-path", str(empty)]) == 1
        assert "is not a memory database yet" in capsys.readouterr().err
        assert empty.stat().st_size == 0  # `mem log` wrote a 217 KB schema into it
    assert main(["init-db", "--db-path", str(empty)]) == 0 and empty.stat().st_size > 0
