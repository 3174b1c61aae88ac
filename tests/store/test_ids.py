"""Source and chunk ids are never handed out twice on SQLite: a citation (mem://source/ID), a chunk id
given to memory_feedback or kept by an agent must not open other text once its row is gone. SQLite
alone gives a new row MAX(id) + 1, which after deleting the newest row is that row's id."""

from __future__ import annotations

import sqlite3

import pytest

from crossmodalrag import versioning
from crossmodalrag.agent.memories import remember
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store
from crossmodalrag.store.migrations import migrate
from crossmodalrag.store.transfer import copy_memory
from crossmodalrag.versioning.history import rollback
from crossmodalrag.versioning.verify import verify
from tests.conftest import write_note


def id_at(store, path) -> int:
    """The id of the source stored at `path` (a Path or its uri)."""
    return store.conn.execute("SELECT id FROM sources WHERE uri = ?", (str(path),)).fetchone()[0]


def ids(conn, table: str) -> set[int]:
    return {row[0] for row in conn.execute(f"SELECT id FROM {table}")}


def forget(store, uri: str) -> None:
    forget_sources(store, find_sources(store, uri))


def test_a_memory_stored_after_forgetting_the_newest_gets_a_new_id(db_path) -> None:
    """The repro: 'Bluebird' memories 1 and 2, forget 2, a dentist memory must not become source 2."""
    with open_store(db_path) as store:
        remember(store, "The launch code name is Bluebird", kind="fact")
        second = remember(store, "The Bluebird launch moved to March", kind="fact")
        seen_sources, seen_chunks = ids(store.conn, "sources"), ids(store.conn, "chunks")
        forget(store, f"mem://source/{second.id}")
        dentist = remember(store, "My dentist appointment is on Friday", kind="task")
        assert dentist.id not in seen_sources
        new_chunks = ids(store.conn, "chunks") - seen_chunks
        assert new_chunks and min(new_chunks) > max(seen_chunks)


def test_forgetting_many_notes_then_adding_notes_and_a_pdf_gives_ids_never_seen(tmp_path, db_path) -> None:
    vault = tmp_path / "vault"
    for name in "abc":
        write_note(vault, f"{name}.md", f"# {name}\nNote {name}.\n\n## More\nSecond part of {name}.\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        seen_sources, seen_chunks = ids(store.conn, "sources"), ids(store.conn, "chunks")
        forget_sources(store, find_sources(store, path=vault))  # every source at once, the newest too
        assert ids(store.conn, "sources") == set()
        later = write_note(tmp_path / "later", "d.md", "# d\nA later note.\n")
        ingest_notes(store, [later.parent])
        added_sources, added_chunks = ids(store.conn, "sources"), ids(store.conn, "chunks")
        assert min(added_sources) > max(seen_sources) and min(added_chunks) > max(seen_chunks)

        pytest.importorskip("pypdfium2")
        from crossmodalrag.ingest import ingest_pdfs
        from tests.pdfs import write_pdf

        forget(store, str(later))
        pdf = write_pdf(tmp_path / "papers" / "paper.pdf", ["A page about quokkas"])
        ingest_pdfs(store, [pdf.parent])
        assert min(ids(store.conn, "sources")) > max(added_sources)
        assert min(ids(store.conn, "chunks")) > max(added_chunks)


def test_a_note_removed_by_an_ingest_leaves_its_ids_behind(tmp_path, db_path) -> None:
    """`mem sync` removals: the newest note gone from its folder is deleted, and its ids stay retired."""
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# a\nFirst.\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        write_note(vault, "b.md", "# b\nSecond.\n")
        ingest_notes(store, [vault])
        seen_sources, seen_chunks = ids(store.conn, "sources"), ids(store.conn, "chunks")
        (vault / "b.md").unlink()
        ingest_notes(store, [vault])
        write_note(vault, "c.md", "# c\nThird.\n")
        ingest_notes(store, [vault])
        new_sources = ids(store.conn, "sources") - seen_sources
        assert len(ids(store.conn, "sources")) == 2 and min(new_sources) > max(seen_sources)
        assert min(ids(store.conn, "chunks") - seen_chunks) > max(seen_chunks)


def test_a_rolled_back_deletion_never_comes_back_under_an_id_another_source_had(tmp_path, db_path) -> None:
    """b (the newest) is removed, a memory is stored and forgotten, and a rollback brings b back: b must
    not come back under the memory's id, which an agent may have kept."""
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# a\nFirst.\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        write_note(vault, "b.md", "# b\nSecond.\n")
        ingest_notes(store, [vault])
        point = str(versioning.head(store.conn)[0])
        (vault / "b.md").unlink()
        ingest_notes(store, [vault])
        memory = remember(store, "A memory stored meanwhile", kind="fact")
        forget(store, f"mem://source/{memory.id}")
        rollback(store, point)
        restored = id_at(store, vault / "b.md")
        assert restored != memory.id


def test_a_rolled_back_deletion_gets_its_own_id_back_and_a_forgotten_one_leaves_no_record(tmp_path, db_path) -> None:
    """Its old citations open it again: no other source can have taken the id meanwhile."""
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# a\nFirst.\n")
    write_note(vault, "b.md", "# b\nSecond.\n")
    b = str(vault / "b.md")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        point = str(versioning.head(store.conn)[0])
        b_id = id_at(store, b)
        (vault / "b.md").unlink()
        ingest_notes(store, [vault])
        remember(store, "A memory stored meanwhile", kind="fact")
        rollback(store, point)
        assert id_at(store, b) == b_id
        ingest_notes(store, [vault])  # b.md is not on disk: the rollback restored the memory only
        assert [tuple(r) for r in store.conn.execute("SELECT id FROM deleted_source_ids WHERE uri = ?", (b,))] == [
            (b_id,)
        ]
        forget(store, b)
        assert (
            store.conn.execute("SELECT COUNT(*) FROM deleted_source_ids").fetchone()[0] == 1
        )  # the memory the rollback took out


def test_a_rollback_across_a_move_brings_the_note_back_to_its_old_path_under_its_id(tmp_path, db_path) -> None:
    """The repro: plans.md (a citation names its id) renamed to renamed.md, then a rollback to before the
    rename. The log holds the move as a delete and an insert; the source must go back to plans.md still
    under its id, not under a new one with its old id gone for good."""
    vault = tmp_path / "vault"
    write_note(vault, "plans.md", "# Plans\nWe chose the walrus parser.\n")
    write_note(vault, "other.md", "# Other\nother note\n")
    plans, renamed = str(vault / "plans.md"), str(vault / "renamed.md")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        plans_id = id_at(store, plans)
        point = str(versioning.head(store.conn)[0])
        (vault / "plans.md").rename(vault / "renamed.md")
        assert ingest_notes(store, [vault]).moved == 1
        rollback(store, point)
        uris = dict(store.conn.execute("SELECT uri, id FROM sources"))
        assert uris.get(plans) == plans_id and renamed not in uris
        assert ingest_notes(store, [vault]).moved == 1  # renamed.md is still on disk: moved again, same id
        assert id_at(store, renamed) == plans_id


def test_forgetting_the_highest_id_then_reopening_still_skips_it(db_path) -> None:
    with open_store(db_path) as store:
        remember(store, "The first memory", kind="fact")
        newest = remember(store, "The newest memory", kind="fact")
        newest_chunks = ids(store.conn, "chunks")
        forget(store, f"mem://source/{newest.id}")
    with open_store(db_path) as store:
        later = remember(store, "A memory stored after reopening", kind="fact")
        assert later.id > newest.id
        assert min(ids(store.conn, "chunks") - newest_chunks) > max(newest_chunks)


def test_a_copy_into_an_empty_memory_that_held_sources_once_gives_new_ids(tmp_path, db_path) -> None:
    """`mem migrate` into an emptied SQLite memory: ids it handed out before stay retired."""
    target_path = tmp_path / "target.db"
    with open_store(target_path) as target:
        remember(target, "Once held here", kind="fact")
        retired = ids(target.conn, "sources")
        forget(target, f"mem://source/{min(retired)}")
        with open_store(db_path) as source:
            remember(source, "Copied over", kind="fact")
            report = copy_memory(source, target)
            assert report.identical and not report.ids_kept
            copied_from = max(ids(source.conn, "sources"))
        assert min(ids(target.conn, "sources")) > max(retired)
        assert min(ids(target.conn, "sources")) > copied_from  # a citation kept from the source finds nothing here


def _notes_with_one_forgotten(store, folder) -> None:
    """The repro: notes a-d (sources 1-4), a forgotten (1 and its chunk retired), a memory (source 5)."""
    for name in "abcd":
        write_note(folder, f"{name}.md", f"# Note {name}\n\nText of note {name}.")
    ingest_notes(store, [folder])
    forget(store, str(folder / "a.md"))
    remember(store, "The deploy key is in the blue safe", kind="fact")


def test_a_copy_keeps_every_id_and_never_hands_out_a_forgotten_one(tmp_path, db_path) -> None:
    """`mem migrate`: a kept citation opens the same text in the copy, one of a forgotten source nothing."""
    with open_store(db_path) as source:
        _notes_with_one_forgotten(source, tmp_path / "vault")
        rows = {
            table: source.conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall()
            for table in ("sources", "chunks")
        }
        highest = {table: source.conn.execute(f"SELECT MAX(id) FROM {table}").fetchone()[0] for table in rows}
        forgotten_chunks = set(range(1, highest["chunks"] + 1)) - ids(source.conn, "chunks")
        assert min(ids(source.conn, "sources")) == 2 and forgotten_chunks
        target_path = tmp_path / "copy.db"
        with open_store(target_path) as target:
            report = copy_memory(source, target)
            assert report.identical and report.ids_kept
    with open_store(target_path) as copy:
        for table, before in rows.items():
            assert copy.conn.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() == before
        later = remember(copy, "Stored in the copy", kind="fact")
        assert later.id > highest["sources"] and min(ids(copy.conn, "chunks") - ids_of(rows["chunks"])) > max(
            forgotten_chunks | ids_of(rows["chunks"])
        )
        forget(copy, f"mem://source/{later.id}")
        forget(copy, "mem://source/5")  # the newest copied source: neither its id is handed out again
        assert remember(copy, "Stored after forgetting", kind="fact").id > later.id


def ids_of(rows: list[tuple]) -> set[int]:
    return {row[0] for row in rows}


def test_the_copy_checks_ids_too(tmp_path, db_path, monkeypatch) -> None:
    """Equal content under other ids is not "identical" once the copy is meant to keep them."""
    from crossmodalrag.store import transfer

    with open_store(db_path) as source:
        _notes_with_one_forgotten(source, tmp_path / "vault")
        monkeypatch.setattr(transfer, "raise_marks", lambda conn, highs: True)  # claims to keep ids ...
        monkeypatch.setattr(transfer, "_copy_sources", _renumbering(transfer._copy_sources))  # ... and does not
        with open_store(tmp_path / "copy.db") as target:
            report = copy_memory(source, target)
    assert not report.identical
    assert {name for name, t in report.tables.items() if t["source_checksum"] != t["target_checksum"]} == {
        "sources",
        "chunks",
    }


def _renumbering(copy_sources):
    return lambda source, target, progress, keep_ids: copy_sources(source, target, progress, False)


def test_a_memory_at_schema_12_gets_its_marks_seeded(db_path) -> None:
    """Source 3 was deleted before the upgrade (the log says so) and source 2 is the highest left: the
    mark lies above 3. Chunk 2 is the highest left: chunks continue above it."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    migrate(conn, target=12)
    conn.execute(
        "INSERT INTO sources (id, source_type, uri, fingerprint, title, ingested_at) VALUES "
        "(1, 'note', '/v/a.md', 'f', 'a', 0), (2, 'note', '/v/b.md', 'g', 'b', 0)"
    )
    conn.execute(
        "INSERT INTO chunks (id, source_id, chunk_index, text, char_start, char_end) VALUES "
        "(1, 1, 0, 'a', 0, 1), (2, 2, 0, 'b', 0, 1)"
    )
    conn.execute(
        "INSERT INTO change_log (seq, at, op, kind, target, actor, content_hash, hash) VALUES "
        "(1, 0, 'insert', 'source', '/v/c.md', 'cli', 'h', 'x'),"
        " (2, 0, 'delete', 'source', '/v/c.md', 'cli', NULL, 'y')"
    )
    conn.close()
    with open_store(db_path) as store:
        marks = dict(store.conn.execute("SELECT name, high FROM id_marks"))
        assert marks == {"sources": 3, "chunks": 2}
        memory = remember(store, "Stored after the upgrade", kind="fact")
        assert memory.id == 4 and min(ids(store.conn, "chunks") - {1, 2}) == 3


def test_the_marks_travel_with_a_backup(tmp_path, db_path) -> None:
    from crossmodalrag.store.backup import backup_database

    with open_store(db_path) as store:
        newest = remember(store, "The newest memory", kind="fact")
        forget(store, f"mem://source/{newest.id}")
    copy = backup_database(db_path, tmp_path / "copy.db").path
    with open_store(copy) as restored:
        assert remember(restored, "Stored in the copy", kind="fact").id > newest.id


def test_restoring_an_older_backup_never_hands_out_an_id_the_replaced_memory_gave(tmp_path, db_path) -> None:
    """The repro: a backup, then a note b (a citation names its id), then `mem restore` of the backup
    (b is not in it) and a new note c: c must not open under b's id."""
    from crossmodalrag.store.backup import backup_database
    from crossmodalrag.store.restore import restore_database

    with open_store(db_path) as store:
        remember(store, "The alpha note", kind="fact")
    copy = backup_database(db_path, tmp_path / "copy.db").path
    with open_store(db_path) as store:
        remember(store, "The deploy key lives in vault slot 7", kind="fact")
        seen_sources, seen_chunks = ids(store.conn, "sources"), ids(store.conn, "chunks")
    restore_database(copy, db_path, force=True)
    with open_store(db_path) as store:
        later = remember(store, "An unrelated grocery list", kind="fact")
        assert later.id > max(seen_sources)
        assert min(ids(store.conn, "chunks") - seen_chunks) > max(seen_chunks)


def test_a_headingless_note_rolled_back_across_a_rename_keeps_its_id_at_the_next_sync(tmp_path, db_path) -> None:
    """The repro: a note titled by its file name is found after a rename by its file's size and mtime, but
    a rollback restores its content without that stamp; the next sync, its file still under the new name,
    must take it as moved (its text is the stored one), not remove it and add it under a new id."""
    vault = tmp_path / "vault"
    write_note(vault, "plain.md", "a headingless note about the walrus parser\n")
    write_note(vault, "other.md", "# Other\nother note\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        plain_id = id_at(store, vault / "plain.md")
        point = str(versioning.head(store.conn)[0])
        (vault / "plain.md").rename(vault / "plain2.md")
        assert ingest_notes(store, [vault]).moved == 1
        rollback(store, point)
        report = ingest_notes(store, [vault])
        assert (report.moved, report.added, report.removed) == (1, 0, 0)
        assert store.conn.execute("SELECT uri FROM sources WHERE id = ?", (plain_id,)).fetchone()[0] == str(
            vault / "plain2.md"
        )


@pytest.mark.parametrize("leaves", ["deleted", "renamed"])
def test_a_rollback_never_gives_a_note_the_id_of_the_note_now_at_its_path(tmp_path, db_path, leaves) -> None:
    """The repro: plans.md deleted (or renamed), a new note written at plans.md, then a rollback to before.
    The restored Plans must come back under its own id, and the newer note's id must not open Plans' text."""
    vault = tmp_path / "vault"
    plans = write_note(vault, "plans.md", "# Plans\nWe chose the narwhal scheduler.\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        plans_id = id_at(store, plans)
        point = str(versioning.head(store.conn)[0])
        plans.unlink() if leaves == "deleted" else plans.rename(vault / "old.md")
        ingest_notes(store, [vault])
        write_note(vault, "plans.md", "# New plans\nsomething else\n")
        ingest_notes(store, [vault])
        newer_id = id_at(store, plans)
        rollback(store, point)
        rows = dict(store.conn.execute("SELECT id, title FROM sources"))
        assert rows == {plans_id: "Plans"} and newer_id not in rows
        assert verify(store.conn).ok


def test_a_second_rollback_to_the_same_point_keeps_the_restored_notes_id(tmp_path, db_path) -> None:
    """A note given back its id by a rollback was inserted since the point, yet it is the same note: a
    second rollback restores it in place rather than as another source."""
    vault = tmp_path / "vault"
    plans = write_note(vault, "plans.md", "# Plans\nWe chose the narwhal scheduler.\n")
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        plans_id = id_at(store, plans)
        point = str(versioning.head(store.conn)[0])
        plans.unlink()
        ingest_notes(store, [vault])
        rollback(store, point)
        write_note(vault, "plans.md", "# Plans\nWe chose the walrus scheduler.\n")
        ingest_notes(store, [vault])
        rollback(store, point)
        assert dict(store.conn.execute("SELECT id, title FROM sources")) == {plans_id: "Plans"}
        last = "SELECT op FROM change_log WHERE target = ? ORDER BY seq DESC LIMIT 2"
        assert [row[0] for row in store.conn.execute(last, (str(plans),))] == ["update", "update"]
