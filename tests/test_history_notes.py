"""What history, backup and forget commands tell the user: a hint after a verify mismatch, notes that
are true (no files on disk for agent memories, no `--vacuum` for bytes already gone), backup paths as
one spelling, and nothing written beside a backup that is read."""

from __future__ import annotations

import json
from pathlib import Path

from crossmodalrag.cli.main import main
from crossmodalrag.store import open_store
from tests.conftest import write_note


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_verify_mismatch_says_what_to_do(capsys, tmp_path: Path, db_path: Path) -> None:
    write_note(tmp_path / "vault", "deploy.md", "# Deploy\n\nWe rotate the key every 90 days.\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    with open_store(db_path) as store:
        store.conn.execute("UPDATE chunks SET text = 'We never rotate the key.'")
    code, out, err = run(capsys, "verify")
    assert code == 1 and "MISMATCH" in out
    (hint,) = [line for line in err.splitlines() if line.startswith("hint: ")]
    assert "`mem verify --accept`" in hint and "`mem restore FILE --force`" in hint


def test_a_rollback_of_agent_memories_only_says_nothing_about_files_on_disk(capsys, tmp_path, db_path) -> None:
    write_note(tmp_path / "vault", "n.md", "# N\n\nhello\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    assert main(["checkpoint", "before-mem"]) == 0
    assert main(["remember", "The staging password rotates monthly"]) == 0
    code, out, err = run(capsys, "rollback", "before-mem")
    assert code == 0 and "remove   source memory:" in out
    assert "files on disk" not in err


def test_backup_paths_are_shown_and_recorded_without_dot_dot(capsys, tmp_path, db_path) -> None:
    write_note(tmp_path / "vault", "n.md", "# N\n\nhello\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    (tmp_path / "main").mkdir()
    capsys.readouterr()
    code, out, _ = run(capsys, "backup", str(tmp_path / "main" / ".." / "elsewhere") + "/", "--json")
    written = json.loads(out)["path"]
    assert code == 0 and ".." not in written and Path(written).parent == (tmp_path / "elsewhere").resolve()
    recorded = db_path.with_name(db_path.name + ".backups").read_text(encoding="utf-8")
    assert ".." not in recorded and json.loads(recorded.splitlines()[0]) == written


def test_reading_a_backup_writes_no_vector_cache_beside_it(capsys, tmp_path, db_path) -> None:
    from crossmodalrag.index.embeddings import cached_vectors, embed_missing, vectors_stamp
    from tests.fakes import HashingEmbedder

    write_note(tmp_path / "vault", "n.md", "# N\n\nWe rotate the key every 90 days.\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    embedder = HashingEmbedder()
    with open_store(db_path) as store:
        embed_missing(store, embedder)
    assert main(["backup", str(tmp_path / "usb") + "/"]) == 0
    (backup,) = (tmp_path / "usb").glob("*.db")
    with open_store(backup, create=False) as store:
        ids, _, matrix = cached_vectors(store, embedder.identity, vectors_stamp(store, embedder.identity))
    assert len(ids) == 1 and matrix.shape == (1, embedder.identity.dim)
    assert not backup.with_name(backup.name + ".vectors").exists()
    with open_store(db_path) as store:  # the memory itself keeps its cache
        cached_vectors(store, embedder.identity, vectors_stamp(store, embedder.identity))
    assert db_path.with_name(db_path.name + ".vectors").is_dir()


def test_forget_names_a_vector_cache_an_older_mem_left_beside_a_backup(capsys, tmp_path, db_path) -> None:
    write_note(tmp_path / "vault", "n.md", "# N\n\nsecret words\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    assert main(["backup", str(tmp_path / "usb") + "/"]) == 0
    (backup,) = (tmp_path / "usb").glob("*.db")
    backup.with_name(backup.name + ".vectors").mkdir()
    capsys.readouterr()
    code, out, _ = run(capsys, "forget", str(tmp_path / "vault" / "n.md"), "--yes", "--json")
    assert code == 0 and json.loads(out)["backup_paths"] == [str(backup), str(backup) + ".vectors"]


def test_forget_suggests_vacuum_only_when_bytes_may_remain(capsys, tmp_path, db_path) -> None:
    """Freed space is zeroed as it is freed, and forget empties the write-ahead log: the text was already
    gone from the files, and the note said `--vacuum` would wipe it."""
    write_note(tmp_path / "vault", "n.md", "# N\n\nzebraxylophone words\n")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "forget", str(tmp_path / "vault" / "n.md"), "--yes", "--json")
    assert code == 0 and json.loads(out)["bytes_may_remain"] is False and "--vacuum" not in err
    for path in db_path.parent.glob(db_path.name + "*"):
        if path.is_file():
            assert b"zebraxylophone" not in path.read_bytes(), path
