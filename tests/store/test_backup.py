"""`mem backup` / `mem restore`: consistent single-file copies, verified restores, the old database safe."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from crossmodalrag import versioning
from crossmodalrag.cli.main import main
from crossmodalrag.errors import StoreError
from crossmodalrag.store import open_store
from crossmodalrag.store.backup import backup_database
from crossmodalrag.store.migrations import LATEST_VERSION, migrate
from crossmodalrag.store.restore import restore_database


def add_source(conn: sqlite3.Connection, uri: str) -> None:
    conn.execute("INSERT INTO sources (source_type, uri, fingerprint, ingested_at) VALUES ('note', ?, 'f', 0)", (uri,))
    versioning.changed(conn, "source", uri)  # as mem's own writes do, so a restore verifies


def make_db(path: Path, uris: list[str]) -> None:
    with open_store(path) as store, store.transaction() as conn:
        for uri in uris:
            add_source(conn, uri)


def uris(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute("SELECT uri FROM sources ORDER BY uri")]
    finally:
        conn.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(folder: Path) -> list[str]:
    """Staging files a failed or finished operation must not leave behind."""
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name or "-journal" in p.name)


@pytest.fixture
def backup_file(tmp_path: Path) -> Path:
    """A backup of another database holding /v/a.md and /v/b.md (the active database does not exist yet)."""
    origin = tmp_path / "origin" / "memory.db"
    make_db(origin, ["/v/a.md", "/v/b.md"])
    return backup_database(origin, tmp_path / "saved" / "backup.db").path


def test_backup_is_one_standalone_file_with_a_sha256sum_checksum(db_path, tmp_path):
    make_db(db_path, ["/v/a.md"])
    report = backup_database(db_path, tmp_path / "out.db")
    assert report.path == tmp_path / "out.db" and report.schema_version == LATEST_VERSION
    assert report.bytes == report.path.stat().st_size and report.sha256 == sha256(report.path)
    assert (tmp_path / "out.db.sha256").read_text() == f"{report.sha256}  out.db\n"
    if shutil.which("sha256sum"):
        check = subprocess.run(["sha256sum", "-c", "out.db.sha256"], cwd=tmp_path, capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    # WAL mode, as mem opens it (so reading it changes nothing), and nothing beside it: it is whole alone.
    assert report.path.read_bytes()[18:20] == b"\x02\x02"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("out.db-")]
    alone = tmp_path / "alone" / "copy.db"
    alone.parent.mkdir()
    shutil.copyfile(report.path, alone)
    assert uris(alone) == ["/v/a.md"]
    assert leftovers(tmp_path) == []


def test_reading_a_backup_with_mem_leaves_it_as_it_was(capsys, db_path, tmp_path, monkeypatch):
    make_db(db_path, ["/v/a.md"])
    report = backup_database(db_path, tmp_path / "out.db")
    monkeypatch.setenv("CMRAG_DB_PATH", str(report.path))  # `mem verify` on the backup, as a user checks one
    for command in (["verify"], ["log"], ["ask", "anything", "--no-llm"], ["events"], ["stats"], ["sources"]):
        main(command)
        assert sha256(report.path) == report.sha256, command
        # stats and sources read through a read-only connection, which left an empty -wal and -shm
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out.db")) == [
            "out.db",
            "out.db.sha256",
        ], command
    monkeypatch.delenv("CMRAG_DB_PATH")
    assert main(["restore", str(report.path), "--force", "--db-path", str(db_path)]) == 0


def test_staging_files_of_a_killed_backup_are_removed_by_the_next(db_path, tmp_path):
    make_db(db_path, ["/v/a.md"])
    dead = subprocess.Popen(["true"])  # a process id no process has any more
    dead.wait()
    left = tmp_path / "out" / f".copy.db.{dead.pid}.x1y2.partial"
    left.parent.mkdir()
    left.write_bytes(b"a copy of the memory, half written")
    Path(f"{left}-journal").write_bytes(b"j")
    running = tmp_path / "out" / f".copy.db.{os.getpid()}.a1b2.partial"  # a backup still in progress
    running.write_bytes(b"in progress")
    backup_database(db_path, tmp_path / "out" / "copy.db")
    assert not left.exists() and not Path(f"{left}-journal").exists() and running.exists()


def test_a_full_destination_disk_is_named_as_the_backups_not_the_databases(db_path, tmp_path, monkeypatch):
    make_db(db_path, ["/v/a.md"])
    stick, connect = tmp_path / "stick", sqlite3.connect

    def onto_a_full_disk(path, *args, **kwargs):  # SQLITE_FULL as a full disk gives it, on the copy only
        conn = connect(path, *args, **kwargs)
        if Path(path).parent == stick:
            conn.execute("PRAGMA max_page_count = 1")
        return conn

    monkeypatch.setattr(sqlite3, "connect", onto_a_full_disk)
    with pytest.raises(StoreError) as caught:
        backup_database(db_path, f"{stick}/")
    assert (
        caught.value.message.startswith(f"cannot write the backup {stick}/") and "disk is full" in caught.value.message
    )
    assert "committed so far" not in caught.value.hint and str(stick) in caught.value.hint
    assert list(stick.iterdir()) == []


def test_backup_defaults_to_a_timestamped_file_in_backups_and_never_overwrites(db_path, tmp_path):
    make_db(db_path, ["/v/a.md"])
    first = backup_database(db_path).path
    second = backup_database(db_path).path
    assert first.parent == second.parent == db_path.parent / "backups"
    assert first != second and first.name.startswith("memory-") and first.suffix == ".db"
    into_folder = backup_database(db_path, tmp_path).path
    assert into_folder.parent == tmp_path and into_folder.name.startswith("memory-")
    with pytest.raises(StoreError, match="already exists"):
        backup_database(db_path, first)
    with pytest.raises(StoreError, match="no memory database"):
        backup_database(tmp_path / "missing.db")


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", "-writers", "-embedding"])
def test_a_backup_onto_the_live_databases_own_side_file_is_refused(db_path, suffix):
    make_db(db_path, ["/v/a.md"])  # closed: its -wal and -shm are gone, and SQLite makes them again on the next open
    with pytest.raises(StoreError, match=f"the database's own {suffix} file"):
        backup_database(db_path, Path(f"{db_path}{suffix}"))
    assert not Path(f"{db_path}{suffix}.sha256").exists()


def test_a_path_ending_in_a_slash_is_a_folder_and_an_empty_path_is_refused(capsys, db_path, tmp_path, monkeypatch):
    make_db(db_path, ["/v/a.md"])
    # it wrote a file named bk3 ("backup written to …/bk3"): the slash says a folder
    assert main(["backup", f"{tmp_path}/new/bk3/"]) == 0
    (written,) = (tmp_path / "new" / "bk3").glob("memory-*.db")
    assert f"backup written to {written} " in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert main(["backup", f"{tmp_path}/afile/"]) == 1
    assert "is a file, not a folder" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["backup", ""]) == 1  # it wrote into the current folder
    err = capsys.readouterr().err
    assert err.startswith("error: the backup path is empty (hint: ") and err.count("\n") == 1
    assert not list(tmp_path.glob("memory-*.db"))
    with pytest.raises(StoreError, match="empty"):
        backup_database(db_path, " ")


def test_backup_takes_a_committed_snapshot_without_waiting_for_a_writer(db_path, tmp_path):
    make_db(db_path, ["/v/a.md"])
    with open_store(db_path) as writer:
        writer.conn.execute("BEGIN IMMEDIATE")
        add_source(writer.conn, "/v/uncommitted.md")
        report = backup_database(db_path, tmp_path / "snap.db")  # the writer still holds the lock
        writer.conn.execute("COMMIT")
    assert uris(report.path) == ["/v/a.md"]
    assert uris(db_path) == ["/v/a.md", "/v/uncommitted.md"]


def test_restore_round_trip_keeps_the_replaced_database(db_path, backup_file):
    make_db(db_path, ["/v/later.md"])
    report = restore_database(backup_file, db_path, force=True)
    assert uris(db_path) == ["/v/a.md", "/v/b.md"]
    assert report.sources == 2 and report.schema_version == LATEST_VERSION and report.sha256 == sha256(backup_file)
    assert report.replaced is not None and report.replaced.parent == db_path.parent / "backups"
    assert uris(report.replaced) == ["/v/later.md"]
    with open_store(db_path) as store:  # the restored database is an ordinary live one again
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert leftovers(db_path.parent) == []


def test_restore_through_a_symbolic_link_replaces_the_file_it_points_at(tmp_path, backup_file):
    real = tmp_path / "disk" / "memory.db"
    real.parent.mkdir()
    make_db(real, ["/v/later.md"])
    link = tmp_path / "memory.db"
    link.symlink_to(real)
    report = restore_database(backup_file, link, force=True)
    assert link.is_symlink() and link.resolve() == real, "the link is kept, not replaced by a copy"
    assert uris(real) == ["/v/a.md", "/v/b.md"] and uris(report.replaced) == ["/v/later.md"]


def test_restoring_a_backup_that_holds_what_was_forgotten_since_says_so(db_path, backup_file, capsys):
    make_db(db_path, ["/v/a.md", "/v/b.md"])
    with open_store(db_path) as store, store.transaction() as conn:  # as `mem forget /v/a.md` records it
        conn.execute("DELETE FROM sources WHERE uri = '/v/a.md'")
        versioning.forgotten(conn, "source", "/v/a.md", "mem forget")
    assert main(["restore", str(backup_file), "--force"]) == 0
    assert "note: this backup holds 1 source the replaced memory had forgotten (/v/a.md)" in capsys.readouterr().err
    assert restore_database(backup_file, db_path, force=True).forgotten_since == []  # none forgotten in that one


def test_restore_refuses_to_replace_a_database_without_force(db_path, backup_file):
    make_db(db_path, ["/v/later.md"])
    before = sha256(db_path)
    with pytest.raises(StoreError, match="already exists") as caught:
        restore_database(backup_file, db_path)
    assert "--force" in caught.value.hint and "valid backup" in caught.value.message
    assert sha256(db_path) == before and leftovers(db_path.parent) == []


def test_restore_onto_another_applications_database_says_whose_it_is(db_path, backup_file):
    with sqlite3.connect(db_path) as browser:
        browser.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    with pytest.raises(StoreError, match="another application's SQLite database") as caught:
        restore_database(backup_file, db_path)
    assert "already exists" not in caught.value.message and "new file" in caught.value.hint
    assert sqlite3.connect(db_path).execute("SELECT name FROM sqlite_master").fetchall() == [("moz_places",)]


def test_restore_onto_a_database_path_that_is_a_folder_says_so(tmp_path, backup_file):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(StoreError, match="is a folder, not a database file"):
        restore_database(backup_file, folder, force=True)
    assert list(folder.iterdir()) == []


def test_restore_into_an_empty_place_needs_no_force(tmp_path, backup_file):
    target = tmp_path / "fresh" / "memory.db"
    report = restore_database(backup_file, target)
    assert report.replaced is None and uris(target) == ["/v/a.md", "/v/b.md"]
    assert not (target.parent / "backups").exists()


def corrupt(path: Path, tmp_path: Path) -> Path:
    """A copy whose b-tree pages are damaged (and no checksum file, so SQLite's own check must catch it)."""
    damaged = tmp_path / "damaged.db"
    shutil.copyfile(path, damaged)
    size = damaged.stat().st_size
    with damaged.open("r+b") as handle:
        page = 4096
        for offset in range(page, size, page):
            handle.seek(offset)
            handle.write(b"\x0d\xff\xff\xff\xff\xff\xff\xff")  # a leaf page header with nonsense counts
    return damaged


@pytest.mark.parametrize(
    ("make_source", "message"),
    [
        (lambda tmp, good: tmp / "missing.db", "no backup file"),
        (lambda tmp, good: _write(tmp / "text.db", b"not a database at all" * 300), "not a readable SQLite"),
        (lambda tmp, good: _write(tmp / "empty.db", b""), "not a memory database"),
        (lambda tmp, good: _other_sqlite(tmp / "other.db"), "not a memory database"),
        (lambda tmp, good: _newer(good, tmp / "newer.db"), "schema version 999"),
        (lambda tmp, good: corrupt(good, tmp), "integrity check|not a readable"),
        (lambda tmp, good: _tampered(good, tmp / "tampered.db"), "fails its checksum"),
        (lambda tmp, good: _edited(good, tmp / "edited.db"), "change log does not match its rows"),
    ],
    ids=["missing", "not-sqlite", "empty", "other-sqlite", "too-new", "corrupt", "checksum", "edited"],
)
def test_a_bad_backup_is_refused_and_the_active_database_is_untouched(
    db_path, tmp_path, backup_file, make_source, message
):
    make_db(db_path, ["/v/later.md"])
    before = sha256(db_path)
    with pytest.raises(StoreError, match=message):
        restore_database(make_source(tmp_path, backup_file), db_path, force=True)
    assert sha256(db_path) == before and uris(db_path) == ["/v/later.md"]
    assert leftovers(db_path.parent) == [] and not (db_path.parent / "backups").exists()


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _other_sqlite(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    return path


def _copy_with(good: Path, path: Path, sql: str) -> Path:
    """A copy of a backup changed by one statement run outside mem."""
    shutil.copyfile(good, path)
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def _newer(good: Path, path: Path) -> Path:
    return _copy_with(good, path, "INSERT INTO schema_migrations VALUES (999, 0)")


def _tampered(good: Path, path: Path) -> Path:
    """A valid database whose checksum file does not match it (a bit flipped in a text cell would be the same)."""
    _copy_with(good, path, "UPDATE sources SET title = 'changed'")
    Path(f"{path}.sha256").write_text(Path(f"{good}.sha256").read_text())
    return path


def _edited(good: Path, path: Path) -> Path:
    """A valid database, with no checksum beside it, whose row was changed outside mem."""
    return _copy_with(good, path, "UPDATE sources SET title = 'changed'")


def test_an_unverified_backup_is_restored_only_when_asked(capsys, db_path, tmp_path, backup_file):
    edited = _edited(backup_file, tmp_path / "edited.db")
    make_db(db_path, ["/v/later.md"])
    assert main(["restore", str(edited), "--force"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "nothing was restored" in err and "--unverified" in err
    assert uris(db_path) == ["/v/later.md"]
    assert main(["restore", str(edited), "--force", "--unverified", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["verify"]["ok"] is False and "mem verify --accept" in err
    assert uris(db_path) == ["/v/a.md", "/v/b.md"]


def test_a_backup_with_a_broken_chain_is_not_sent_to_verify_accept(capsys, db_path, tmp_path, backup_file):
    # the hint pointed at `mem verify --accept`, which then refused: "the change log itself was altered"
    broken = _copy_with(backup_file, tmp_path / "broken.db", "UPDATE change_log SET reason = 'x' WHERE seq = 1")
    make_db(db_path, ["/v/later.md"])
    assert main(["restore", str(broken), "--force"]) == 1
    err = capsys.readouterr().err
    assert "altered at seq 1, which `mem verify --accept` cannot accept" in err and "chain head you trust" in err
    assert "then `mem verify --accept`" not in err and err.count("\n") == 1
    assert main(["restore", str(broken), "--force", "--unverified"]) == 0
    err = capsys.readouterr().err
    assert "cannot accept" in err and "restore a backup whose chain head you trust" in err
    assert main(["verify", "--accept"]) == 1
    assert "cannot be accepted" in capsys.readouterr().err  # as the note said


def test_restore_checkpoints_the_old_wal_into_the_kept_copy_and_leaves_none_behind(db_path, backup_file):
    """The old database as a killed writer leaves it: its last commit only in the WAL."""
    make_db(db_path, [])
    checkpointed = db_path.read_bytes()
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    add_source(conn, "/v/only-in-the-wal.md")
    wal = Path(f"{db_path}-wal").read_bytes()
    conn.close()
    db_path.write_bytes(checkpointed)
    Path(f"{db_path}-wal").write_bytes(wal)
    report = restore_database(backup_file, db_path, force=True)
    assert uris(report.replaced) == ["/v/only-in-the-wal.md"]
    assert uris(db_path) == ["/v/a.md", "/v/b.md"]
    assert not Path(f"{report.replaced}-wal").exists()


def test_a_stale_wal_beside_the_target_is_never_replayed_into_the_restored_file(tmp_path, backup_file):
    """A WAL is not tied to its database file: a leftover one would be applied to the new file and corrupt it."""
    target = tmp_path / "place" / "memory.db"
    target.parent.mkdir()
    conn = sqlite3.connect(target, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE junk (x)")
    conn.executemany("INSERT INTO junk VALUES (?)", [("x" * 500,)] * 200)
    stale = Path(f"{target}-wal").read_bytes()  # copied while the connection is open: a crashed process's WAL
    conn.close()
    target.unlink()
    Path(f"{target}-wal").write_bytes(stale)
    assert len(stale) > 4096
    restore_database(backup_file, target)
    assert not Path(f"{target}-wal").exists() or Path(f"{target}-wal").stat().st_size == 0
    with open_store(target) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert [r[0] for r in store.conn.execute("SELECT uri FROM sources ORDER BY uri")] == ["/v/a.md", "/v/b.md"]


def test_restore_refuses_while_another_connection_uses_the_database(db_path, backup_file):
    make_db(db_path, ["/v/later.md"])
    with open_store(db_path) as other:
        other.conn.execute("SELECT COUNT(*) FROM sources").fetchone()
        with pytest.raises(StoreError, match="in use by another process"):
            restore_database(backup_file, db_path, force=True)
    assert uris(db_path) == ["/v/later.md"]


def test_restore_drops_the_vector_cache_derived_from_the_old_database(db_path, backup_file):
    make_db(db_path, [])
    cache = db_path.with_name(db_path.name + ".vectors") / "stamp"
    cache.mkdir(parents=True)
    (cache / "matrix.npy").write_bytes(b"old vectors")
    restore_database(backup_file, db_path, force=True)
    assert not cache.parent.exists()


def test_an_older_backup_is_migrated_on_restore(tmp_path, db_path):
    old = tmp_path / "v1.db"
    conn = sqlite3.connect(old, isolation_level=None)
    migrate(conn, target=1)
    add_source(conn, "/v/old.md")
    conn.close()
    report = restore_database(old, db_path)
    assert report.schema_version == LATEST_VERSION and uris(db_path) == ["/v/old.md"]


def test_a_live_database_with_a_wal_beside_it_is_refused_as_a_source(tmp_path, db_path):
    live = tmp_path / "live" / "memory.db"
    make_db(live, ["/v/a.md"])
    with open_store(live) as store:
        add_source(store.conn, "/v/b.md")
        with pytest.raises(StoreError, match="write-ahead log") as caught:
            restore_database(live, db_path)
    assert "mem backup --db-path" in caught.value.hint and not db_path.exists()


def read_only_leaving_an_empty_wal(path: Path) -> sqlite3.Connection:
    """A read-only connection that has read the file: SQLite made an empty -wal and -shm for it."""
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    reader.execute("SELECT COUNT(*) FROM sources").fetchone()
    assert Path(f"{path}-wal").stat().st_size == 0
    return reader


def test_an_empty_wal_a_closed_reader_left_is_no_reason_to_refuse_a_backup(db_path, backup_file):
    read_only_leaving_an_empty_wal(backup_file).close()  # a reader that cannot checkpoint leaves them
    assert Path(f"{backup_file}-wal").exists()
    restore_database(backup_file, db_path)
    assert uris(db_path) == ["/v/a.md", "/v/b.md"]
    assert not Path(f"{backup_file}-wal").exists() and not Path(f"{backup_file}-shm").exists()


def test_an_empty_wal_of_a_backup_still_open_elsewhere_is_refused(db_path, backup_file):
    reader = read_only_leaving_an_empty_wal(backup_file)
    try:
        with pytest.raises(StoreError, match="write-ahead log"):
            restore_database(backup_file, db_path)
    finally:
        reader.close()
    assert not db_path.exists()


def test_cli_backup_and_restore(capsys, db_path, tmp_path):
    make_db(db_path, ["/v/a.md"])
    assert main(["backup", str(tmp_path / "b.db"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"path", "sha256", "bytes", "schema_version"} and report["bytes"] > 0
    assert main(["backup"]) == 0
    err = capsys.readouterr().err
    assert "backup written to" in err and "KB" in err and ".db.sha256" in err

    assert main(["restore", report["path"]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: a memory database already exists") and "(hint: pass --force" in err
    assert err.count("\n") == 1 and "Traceback" not in err

    make_db(db_path, ["/v/later.md"])
    assert main(["restore", report["path"], "--force", "--json"]) == 0
    restored = json.loads(capsys.readouterr().out)
    assert restored["sources"] == 1 and restored["replaced"] and uris(db_path) == ["/v/a.md"]

    assert main(["restore", str(tmp_path / "nope.db")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no backup file") and err.count("\n") == 1


def test_a_failed_integrity_check_is_one_line(tmp_path):
    """SQLite's report runs over lines ("*** in database main ***", "Page 50: …"): the error did too."""
    from crossmodalrag.store.copies import check_integrity

    class Damaged:
        def execute(self, sql):
            return [
                ("*** in database main ***\nPage 50: btreeInitPage() returns error code 11\nPage 261 is never used",)
            ]

    with pytest.raises(StoreError) as raised:
        check_integrity(Damaged(), tmp_path / "old.db")
    assert "\n" not in str(raised.value) and "fails SQLite's integrity check: Page 50: btreeInitPage()" in str(
        raised.value
    )
