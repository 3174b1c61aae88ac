"""`mem migrate` into a new SQLite file: the file appears only once the copy is whole."""

from __future__ import annotations

import json

from crossmodalrag.agent.memories import remember
from crossmodalrag.cli.main import main
from crossmodalrag.store import open_store, transfer
from tests.retrieval.helpers import add_docs, note


def test_a_copy_that_fails_midway_leaves_no_file_and_the_next_try_succeeds(db_path, tmp_path, monkeypatch, capsys):
    with open_store(db_path) as store:
        add_docs(store, note("a", "# A\nalpha"), note("b", "# B\nbeta"))
    target = tmp_path / "copy.db"

    def broken(source, target):
        raise OSError("disk full")

    with monkeypatch.context() as patched:
        patched.setattr(transfer, "_copy_vectors", broken)
        assert main(["migrate", "--to", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "disk full" in err  # no progress redrawn into a log (not a TTY)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".copy", "copy"))) == []
    assert main(["migrate", "--to", str(target)]) == 0
    with open_store(target) as copy:
        assert copy.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2


def test_a_copy_whose_checksums_differ_is_not_written(db_path, tmp_path, monkeypatch, capsys):
    with open_store(db_path) as store:
        add_docs(store, note("a", "# A\nalpha"))
    monkeypatch.setattr(transfer.TransferReport, "identical", property(lambda self: False))
    assert main(["migrate", "--to", str(tmp_path / "copy.db")]) == 1
    assert "copy.db was not written" in capsys.readouterr().err and not (tmp_path / "copy.db").exists()


def test_a_copy_into_an_existing_empty_memory_that_fails_leaves_it_empty(db_path, tmp_path, monkeypatch, capsys):
    with open_store(db_path) as store:
        add_docs(store, note("a", "# A\nalpha"), note("b", "# B\nbeta"))
    target = tmp_path / "empty.db"
    open_store(target).close()  # as `mem init-db` leaves it (a PostgreSQL database takes the same path)
    with monkeypatch.context() as patched:
        patched.setattr(transfer, "_copy_vectors", lambda source, target: (_ for _ in ()).throw(OSError("gone")))
        assert main(["migrate", "--to", str(target)]) == 1
    with open_store(target) as copy:
        assert copy.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0
        assert copy.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 0
    capsys.readouterr()
    assert main(["migrate", "--to", str(target), "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["ids_kept"]  # the undone try left no id handed out


def test_a_copy_into_a_folder_that_does_not_exist_makes_it(db_path, tmp_path, capsys):
    with open_store(db_path) as store:
        add_docs(store, note("a", "# A\nalpha"))
    target = tmp_path / "out" / "deeper" / "copy.db"
    assert main(["migrate", "--to", str(target)]) == 0, capsys.readouterr().err
    with open_store(target) as copy:
        assert [tuple(row) for row in copy.conn.execute("SELECT uri FROM sources")] == [("/vault/a.md",)]


def test_a_copy_while_an_agent_stores_copies_one_snapshot_and_matches_it(db_path, tmp_path, monkeypatch, capsys):
    # An always-on MCP server stores between the copy's reads: the sources were read before its memory
    # was, whose source the copy then lacked (KeyError), or the checksums read the live memory (DIFFERENT).
    with open_store(db_path) as store:
        remember(store, "The emu pen is behind the barn")
    copy_sources = transfer._copy_sources

    def copy_then_an_agent_stores(source, target, progress, keep_ids):
        copy_sources(source, target, progress, keep_ids)
        with open_store(db_path) as agent:  # another connection, as the MCP server's
            remember(agent, "The emu pen gate sticks in the rain")
            add_docs(agent, note("c", "# C\ngamma"))

    monkeypatch.setattr(transfer, "_copy_sources", copy_then_an_agent_stores)
    target = tmp_path / "copy.db"
    assert main(["migrate", "--to", str(target), "--json"]) == 0, capsys.readouterr().err
    assert all(
        t["source_rows"] == 1 for t in json.loads(capsys.readouterr().out)["tables"].values() if t["source_rows"]
    )
    with open_store(target) as copy:
        assert copy.conn.execute("SELECT COUNT(*) FROM agent_memories").fetchone()[0] == 1
    with open_store(db_path) as store:  # the memory kept what was stored meanwhile
        assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 3


def test_a_copy_that_differs_is_one_error_line_with_a_hint(db_path, tmp_path, monkeypatch, capsys):
    with open_store(db_path) as store:
        add_docs(store, note("a", "# A\nalpha"))
    real = transfer.checksum
    monkeypatch.setattr(
        transfer,
        "checksum",
        lambda store, table, ids=False: (
            (0, "x") if table == "sources" and store.path == db_path else real(store, table, ids)
        ),
    )
    assert main(["migrate", "--to", str(tmp_path / "copy.db")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the copy differs from the memory in sources: ") and "(hint: " in err
    assert err.count("\n") == 1
