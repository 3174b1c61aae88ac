"""Ingest end to end: connector → chunks → SQLite store → FTS, with fingerprints and deletions."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

import crossmodalrag.connectors.notes as notes_module
from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors import git as git_connector
from crossmodalrag.connectors import git_log
from crossmodalrag.connectors.notes import read_note
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.index.fts import analyze
from crossmodalrag.ingest import IngestReport, ingest_git, ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import Store, open_store
from crossmodalrag.store.documents import fingerprint, move_document, write_document
from crossmodalrag.types import Document
from crossmodalrag.versioning.verify import verify
from tests.conftest import commit_files, git, write_note
from tests.fakes import HashingEmbedder

NOTES = {
    "alpha.md": "# Alpha\n\nThe aardvark eats ants near the river.\n",
    "projects/beta.md": "---\ntags: [work]\n---\n# Beta\n\n## Goals\nBuild a birdhouse.\n\n## Risks\nBees.\n",
    "journal/gamma.md": "Date: 2024-03-05\n\nGardening with geraniums today.\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    for relative, text in NOTES.items():
        write_note(root, relative, text)
    return root


# --- helpers ---------------------------------------------------------------------------------


def sources(store: Store) -> dict[str, int]:
    """uri → source id."""
    return {row["uri"]: row["id"] for row in store.conn.execute("SELECT id, uri FROM sources")}


def chunk_ids(store: Store) -> dict[str, list[int]]:
    """uri → ids of its chunks in order."""
    rows = store.conn.execute(
        "SELECT s.uri, c.id FROM chunks c JOIN sources s ON s.id = c.source_id ORDER BY s.uri, c.chunk_index"
    )
    found: dict[str, list[int]] = {}
    for uri, chunk_id in rows:
        found.setdefault(uri, []).append(chunk_id)
    return found


def fts_rowids(store: Store, word: str) -> set[int]:
    if store.backend == "postgresql":  # the same tokens, as postings (store/postgres/lexical.py)
        (token,) = analyze(store.conn, [word])[0]
        rows = store.conn.execute("SELECT chunk_id FROM chunk_postings WHERE lexeme = ?", (token,))
        return {row[0] for row in rows}
    rows = store.conn.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?", (f'"{word}"',))
    return {row[0] for row in rows}


def searched_uris(store: Store, query: str) -> set[str]:
    return {hit.source_uri for hit in search(store, query, SearchOptions()).hits}


def count(store: Store, table: str) -> int:
    return store.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def assert_consistent(store: Store) -> None:
    """No half-written source: every source has chunks, every chunk one FTS row, and nothing else."""
    conn = store.conn
    empty = conn.execute("SELECT uri FROM sources WHERE id NOT IN (SELECT source_id FROM chunks)").fetchall()
    assert [row[0] for row in empty] == []
    if store.backend == "postgresql":  # foreign keys and page integrity are the server's
        assert conn.execute("SELECT id FROM chunks WHERE id NOT IN (SELECT chunk_id FROM chunk_terms)").fetchall() == []
        assert count(store, "chunk_terms") == count(store, "chunks")
        return
    unindexed = conn.execute("SELECT id FROM chunks WHERE id NOT IN (SELECT rowid FROM chunks_fts)").fetchall()
    assert unindexed == []
    assert count(store, "chunks_fts") == count(store, "chunks")
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")


def uri(root: Path, relative: str) -> str:
    return str(root.resolve() / relative)


def expected_chunk_count(root: Path, relative: str) -> int:
    return len(chunk_document(read_note(root.resolve(), root.resolve() / relative)))


# --- notes -----------------------------------------------------------------------------------


def test_first_ingest_adds_every_note(store: Store, vault: Path) -> None:
    report = ingest_notes(store, [vault])
    assert (report.added, report.updated, report.unchanged, report.removed, report.failures) == (3, 0, 0, 0, [])
    assert set(sources(store)) == {uri(vault, r) for r in NOTES}
    assert report.chunks == count(store, "chunks") == sum(expected_chunk_count(vault, r) for r in NOTES)
    assert searched_uris(store, "birdhouse") == {uri(vault, "projects/beta.md")}
    assert searched_uris(store, "geraniums") == {uri(vault, "journal/gamma.md")}
    assert_consistent(store)


def test_stored_source_fields(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    row = store.conn.execute("SELECT * FROM sources WHERE uri = ?", (uri(vault, "journal/gamma.md"),)).fetchone()
    assert (row["source_type"], row["title"]) == ("note", "gamma")
    assert row["timestamp"] == 1709596800.0  # the Date: line, 2024-03-05 UTC
    locators = [r[0] for r in store.conn.execute("SELECT locator FROM chunks ORDER BY locator")]
    assert "projects/beta.md#Goals" in locators and "projects/beta.md#Risks" in locators


def test_second_ingest_is_all_unchanged_and_writes_nothing(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    before_chunks = chunk_ids(store)
    before_rows = store.conn.execute("SELECT * FROM sources ORDER BY id").fetchall()
    report = ingest_notes(store, [vault])
    assert (report.added, report.updated, report.unchanged, report.removed, report.chunks) == (0, 0, 3, 0, 0)
    assert chunk_ids(store) == before_chunks
    after_rows = store.conn.execute("SELECT * FROM sources ORDER BY id").fetchall()
    assert [tuple(r) for r in after_rows] == [tuple(r) for r in before_rows], "ingested_at must not move"


def test_a_changed_note_is_rechunked_in_place(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    alpha = uri(vault, "alpha.md")
    source_id = sources(store)[alpha]
    assert fts_rowids(store, "aardvark")
    write_note(vault, "alpha.md", "# Alpha\n\nThe zebrafish swims upstream.\n")
    report = ingest_notes(store, [vault])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 2)
    assert sources(store)[alpha] == source_id
    assert fts_rowids(store, "aardvark") == set()
    assert fts_rowids(store, "zebrafish") == set(chunk_ids(store)[alpha])
    assert searched_uris(store, "aardvark") == set()
    assert searched_uris(store, "zebrafish") == {alpha}
    assert_consistent(store)


def test_a_deleted_note_leaves_with_its_chunks_and_index_rows(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    beta = uri(vault, "projects/beta.md")
    beta_chunks = chunk_ids(store)[beta]
    (vault / "projects/beta.md").unlink()
    report = ingest_notes(store, [vault])
    assert report.removed == 1 and report.unchanged == 2
    assert beta not in sources(store)
    placeholders = ",".join("?" * len(beta_chunks))
    assert (
        store.conn.execute(f"SELECT COUNT(*) FROM chunks WHERE id IN ({placeholders})", beta_chunks).fetchone()[0] == 0
    )
    assert fts_rowids(store, "birdhouse") == set()
    assert searched_uris(store, "birdhouse bees") == set()
    assert_consistent(store)


def test_a_renamed_note_moves_to_the_new_path_keeping_its_id(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    old_id = sources(store)[uri(vault, "alpha.md")]
    (vault / "archive").mkdir()
    os.rename(vault / "alpha.md", vault / "archive" / "alpha-renamed.md")
    report = ingest_notes(store, [vault])
    assert (report.added, report.moved, report.removed, report.unchanged) == (0, 1, 0, 2)
    assert uri(vault, "alpha.md") not in sources(store)
    assert sources(store)[uri(vault, "archive/alpha-renamed.md")] == old_id  # mem://source/<id> still resolves
    assert searched_uris(store, "aardvark") == {uri(vault, "archive/alpha-renamed.md")}
    locators = {row[0] for row in store.conn.execute("SELECT locator FROM chunks WHERE source_id = ?", (old_id,))}
    assert locators == {"archive/alpha-renamed.md"}
    assert_consistent(store)


def test_a_renamed_note_titled_by_its_file_name_keeps_its_id(store: Store, vault: Path) -> None:
    """With no heading, a note is titled by its file name (as Obsidian shows it): renaming it changed
    its title, so it was read as deleted and added, its id, history and vectors lost."""
    write_note(vault, "grocery ideas.md", "oat milk, rye bread and aardwolf crackers\n")
    write_note(vault, "other ideas.md", "oat milk, rye bread and aardwolf crackers\n")  # same text, another file
    os.utime(vault / "other ideas.md", (1_700_000_000, 1_700_000_000))
    ingest_notes(store, [vault])
    old_id = sources(store)[uri(vault, "grocery ideas.md")]
    os.rename(vault / "grocery ideas.md", vault / "shopping.md")
    report = ingest_notes(store, [vault])
    assert (report.added, report.moved, report.removed) == (0, 1, 0)
    assert sources(store)[uri(vault, "shopping.md")] == old_id
    title = store.conn.execute("SELECT title FROM sources WHERE id = ?", (old_id,)).fetchone()[0]
    assert title == "shopping" and searched_uris(store, "shopping") == {uri(vault, "shopping.md")}
    assert_consistent(store)


def test_a_note_titled_by_its_file_name_synced_as_it_was_saved_keeps_its_id_when_renamed_later(
    store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mem sync --watch` stores a save within a second of the write: its stamp unsettled, which kept no
    mtime, so a rename once the write had settled was read as a deletion and an addition."""
    ingest_notes(store, [vault])
    monkeypatch.setattr("crossmodalrag.file_moves.UNSETTLED_SECONDS", 10**9)  # the save: moments ago
    write_note(vault, "Todo.md", "Call the plumber about the leak.\n")
    ingest_notes(store, [vault])
    old_id = sources(store)[uri(vault, "Todo.md")]
    stamp = store.conn.execute("SELECT json_extract(metadata, '$.file_stamp') FROM sources WHERE id = ?", (old_id,))
    assert "unsettled" in stamp.fetchone()[0]
    monkeypatch.setattr("crossmodalrag.file_moves.UNSETTLED_SECONDS", 0)  # the rename: long after it
    os.rename(vault / "Todo.md", vault / "Household todo.md")
    report = ingest_notes(store, [vault])
    assert (report.added, report.moved, report.removed) == (0, 1, 0)
    assert sources(store)[uri(vault, "Household todo.md")] == old_id
    assert_consistent(store)


def test_a_moved_note_keeps_its_chunks_and_their_vectors_when_its_text_is_unchanged(store: Store, vault: Path) -> None:
    """A rename rewrote and re-embedded every chunk; only the locator changes with the path."""
    write_note(vault, "projects/beta.md", NOTES["projects/beta.md"] + "\n## Budget\n" + "Birch planks. " * 200)
    ingest_notes(store, [vault])
    before = chunk_ids(store)[uri(vault, "projects/beta.md")]
    embedder = HashingEmbedder()
    embed_missing(store, embedder)
    (vault / "projects").rename(vault / "work")
    report = ingest_notes(store, [vault])
    assert (report.moved, report.chunks) == (1, 0)
    assert len(before) > 2 and chunk_ids(store)[uri(vault, "work/beta.md")] == before
    assert embed_missing(store, embedder).chunks == 0, "nothing to embed again"
    locators = store.conn.execute("SELECT locator FROM chunks WHERE id IN (%s)" % ",".join("?" * len(before)), before)
    assert all(row[0].startswith("work/beta.md") for row in locators)
    assert searched_uris(store, "birdhouse") == {uri(vault, "work/beta.md")}
    assert verify(store.conn).ok
    assert_consistent(store)


def test_a_moved_source_whose_title_changed_is_reindexed_under_the_new_title(store: Store) -> None:
    """The title is in every chunk's index row even where the chunk text leaves it out: the chunks
    stay (ids and vectors), their index rows are rewritten."""
    old = Document(
        uri="/old/scan.txt",
        source_type="pdf",
        title="Quokka",
        text="Budget notes.\n",
        format="plain",
        locator="scan.txt",
        metadata={"_breadcrumb": "scan"},
    )
    with store.batched() as batch:
        write_document(batch, old, fingerprint(old))
    before = chunk_ids(store)["/old/scan.txt"]
    moved = replace(old, uri="/new/scan.txt", title="Wombat")
    with store.batched() as batch:
        assert move_document(batch, old.uri, moved, fingerprint(moved)) == 0
    assert chunk_ids(store)["/new/scan.txt"] == before
    assert fts_rowids(store, "wombat") == set(before) and not fts_rowids(store, "quokka")
    assert verify(store.conn).ok
    assert_consistent(store)


def test_moving_a_folder_of_most_of_a_vault_is_a_move_not_a_mass_delete(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "v"
    for i in range(4):
        write_note(root, f"A/n{i}.md", f"# N{i}\n\nmarker{i} text\n")
    write_note(root, "A/twin.md", "# N0\n\nmarker0 text\n")  # identical to A/n0.md: each keeps its own id
    write_note(root, "top.md", "# Top\n\ntop\n")
    ingest_notes(store, [root])
    before = sources(store)
    (root / "A").rename(root / "B")
    report = ingest_notes(store, [root])
    assert (report.failures, report.added, report.removed, report.moved) == ([], 0, 0, 5)
    after = sources(store)
    assert after == {uri.replace("/A/", "/B/"): source_id for uri, source_id in before.items()}
    assert searched_uris(store, "marker1") == {str(root / "B" / "n1.md")}
    assert_consistent(store)


def test_a_note_moved_to_another_vault_keeps_its_id_but_a_copy_in_another_vault_is_its_own(
    store: Store, vault: Path, tmp_path: Path
) -> None:
    """A vault moved and configured under its new path stored every note twice: the move is found
    whatever vault the note was stored from, as long as its old file is gone."""
    ingest_notes(store, [vault])
    before = sources(store)
    other = tmp_path / "other-vault"
    write_note(other, "alpha.md", NOTES["alpha.md"])  # a copy: alpha.md is still in the first vault
    os.renames(vault / "journal" / "gamma.md", other / "journal" / "gamma.md")  # moved between vaults
    report = ingest_notes(store, [other])
    assert (report.added, report.moved) == (1, 1)
    assert sources(store)[uri(other, "journal/gamma.md")] == before[uri(vault, "journal/gamma.md")]
    assert sources(store)[uri(vault, "alpha.md")] == before[uri(vault, "alpha.md")]
    assert uri(other, "alpha.md") in sources(store) and uri(vault, "journal/gamma.md") not in sources(store)
    vault_of = "SELECT json_extract(metadata, '$.vault') FROM sources WHERE uri = ?"
    assert store.conn.execute(vault_of, (uri(other, "journal/gamma.md"),)).fetchone()[0] == str(other.resolve())
    assert_consistent(store)


def test_notes_and_pdfs_moved_both_ways_between_folders_read_in_one_run_keep_their_ids(
    store: Store, tmp_path: Path
) -> None:
    """QA: of two notes swapping configured vaults, the one leaving the vault read first lost its id:
    that vault's removals ran before the second vault was read, where the move would have been seen."""
    from crossmodalrag.ingest import ingest_pdfs
    from tests.pdfs import write_pdf

    a, b = tmp_path / "A", tmp_path / "B"
    write_note(a, "proj/alpha.md", "# Alpha\n\nAlpha plan: ship the otter release on Friday.\n")
    write_note(b, "beta.md", "# Beta\n\nBeta plan: the badger migration.\n")
    report_pdf = write_pdf(tmp_path / "pdf1" / "report.pdf", ["Page one: the narwhal budget is 12k."])
    other_pdf = write_pdf(tmp_path / "pdf2" / "other.pdf", ["Other: the ibis budget is 3k."])
    ingest_notes(store, [a, b])
    ingest_pdfs(store, [report_pdf.parent, other_pdf.parent])
    before = sources(store)
    os.renames(a / "proj" / "alpha.md", b / "alpha.md")
    os.renames(b / "beta.md", a / "beta.md")
    report = ingest_notes(store, [a, b])
    assert (report.added, report.moved, report.removed) == (0, 2, 0)
    os.replace(report_pdf, other_pdf.parent / "report.pdf")
    os.replace(other_pdf, report_pdf.parent / "other.pdf")
    report = ingest_pdfs(store, [report_pdf.parent, other_pdf.parent])
    assert (report.added, report.moved, report.removed) == (0, 2, 0)
    after = sources(store)
    assert after[uri(b, "alpha.md")] == before[uri(a, "proj/alpha.md")]
    assert after[uri(a, "beta.md")] == before[uri(b, "beta.md")]
    assert after[uri(other_pdf.parent, "report.pdf")] == before[uri(report_pdf.parent, "report.pdf")]
    assert after[uri(report_pdf.parent, "other.pdf")] == before[uri(other_pdf.parent, "other.pdf")]
    assert len(after) == 4
    assert_consistent(store)


def test_of_two_identical_notes_the_renamed_one_keeps_its_id_when_the_other_is_deleted(
    store: Store, tmp_path: Path
) -> None:
    """Both gone from their stored paths with the same title and text: the rename is the one of the
    same size and mtime (settled stamps: written an hour ago, a second apart)."""
    vault = tmp_path / "twins"
    twin1 = write_note(vault, "twin1.md", "# Twin\n\nThe same words in both.\n")
    twin2 = write_note(vault, "twin2.md", "# Twin\n\nThe same words in both.\n")
    settle(twin1)
    settle(twin2, twin1.stat().st_mtime_ns + 10**9)
    ingest_notes(store, [vault])
    ids = sources(store)
    twin1.unlink()
    final = twin2.rename(vault / "twin-final.md")
    report = ingest_notes(store, [vault])
    assert (report.moved, report.removed) == (1, 1)
    assert sources(store) == {uri(vault, final.name): ids[uri(vault, "twin2.md")]}


def test_a_copied_note_is_added_and_its_original_kept(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "copy.md", NOTES["alpha.md"])
    report = ingest_notes(store, [vault])
    assert (report.added, report.moved, report.removed) == (1, 0, 0)


def settle(note: Path, ns: int | None = None) -> None:
    """Date the note's last write an hour ago (or at `ns`): written moments ago, its stamp is unsettled."""
    ns = ns if ns is not None else time.time_ns() - 3600 * 10**9
    os.utime(note, ns=(ns, ns))


def test_an_unchanged_note_file_is_not_read_again(store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save under `mem sync --watch` re-synced the vault, re-parsing every note of it."""
    for note in vault.rglob("*.md"):
        settle(note)
    reads: list[str] = []
    real_read = notes_module.read_note
    monkeypatch.setattr(notes_module, "read_note", lambda root, path: reads.append(path.name) or real_read(root, path))
    ingest_notes(store, [vault])
    reads.clear()
    assert ingest_notes(store, [vault]).unchanged == 3 and reads == []
    write_note(vault, "alpha.md", "# Alpha\n\nThe zebrafish swims upstream.\n")
    report = ingest_notes(store, [vault])
    assert (report.updated, report.unchanged, reads) == (1, 2, ["alpha.md"])
    assert searched_uris(store, "zebrafish") == {uri(vault, "alpha.md")}


def test_a_note_rewritten_within_its_stamps_granularity_is_read_again(
    store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same size, same mtime (one tick of a coarse clock, a FAT or network share): only the bytes differ."""
    monkeypatch.setattr("crossmodalrag.file_moves.UNSETTLED_SECONDS", 10**9)  # every write counts as moments ago
    alpha = write_note(vault, "alpha.md", "# Alpha\n\nThe aardvark eats ants.\n")
    written = alpha.stat().st_mtime_ns
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nThe anteater eats ants.\n")
    settle(alpha, written)
    assert alpha.stat().st_size == len("# Alpha\n\nThe aardvark eats ants.\n")
    report = ingest_notes(store, [vault])
    assert (report.updated, report.unchanged) == (1, 2)
    assert searched_uris(store, "anteater") == {uri(vault, "alpha.md")}


def test_an_editors_atomic_save_is_an_update(store: Store, vault: Path) -> None:
    """Editors write a hidden temp file and rename it over the note: same source, no orphan."""
    ingest_notes(store, [vault])
    before = sources(store)
    temp = write_note(vault, "projects/.beta.md.tmp", "# Beta\n\n## Goals\nBuild a treehouse.\n")
    ingest_notes(store, [vault])  # the temp file is hidden and must not be picked up mid-save
    assert sources(store) == before
    os.replace(temp, vault / "projects" / "beta.md")
    report = ingest_notes(store, [vault])
    assert (report.added, report.updated, report.removed) == (0, 1, 0)
    assert sources(store) == before
    assert searched_uris(store, "treehouse") == {uri(vault, "projects/beta.md")}
    assert fts_rowids(store, "birdhouse") == set()
    assert_consistent(store)


def test_a_bad_utf8_note_fails_alone_and_keeps_its_stored_version(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", b"# Alpha\n\ncaf\xc3\xa9 in UTF-8, caf\xe9 damaged\n")
    write_note(vault, "delta.md", "Dolphins dive deep.\n")
    report = ingest_notes(store, [vault])
    assert len(report.failures) == 1
    assert "alpha.md" in report.failures[0] and "UTF-8" in report.failures[0]
    assert (report.added, report.removed, report.unchanged) == (1, 0, 2)
    assert searched_uris(store, "aardvark") == {uri(vault, "alpha.md")}, "the last good version stays"
    assert searched_uris(store, "dolphins") == {uri(vault, "delta.md")}
    assert_consistent(store)


def test_a_bad_note_on_first_ingest_does_not_stop_the_others(store: Store, vault: Path) -> None:
    write_note(vault, "binary.md", b"\x00\x01\x02")
    write_note(vault, "empty.md", "")
    report = ingest_notes(store, [vault])
    assert report.added == 3 and len(report.failures) == 1 and report.empty == 1
    assert set(sources(store)) == {uri(vault, r) for r in NOTES}


def test_an_empty_note_is_skipped_and_counted_not_a_failure(store: Store, vault: Path) -> None:
    write_note(vault, "Untitled.md", "")
    write_note(vault, "blank.md", "---\ntags:\n---\n  \n")  # a template's blank field is nothing to keep
    report = ingest_notes(store, [vault])
    assert (report.added, report.empty, report.failures) == (3, 2, [])
    assert "2 empty skipped" in report.summary() and report.to_dict()["empty"] == 2


def test_a_note_of_only_a_date_line_is_empty_and_with_frontmatter_its_frontmatter_is_its_chunk(
    store: Store, vault: Path
) -> None:
    write_note(vault, "dated.md", "Date: 2024-01-01\n")  # the date line is metadata: stored, it had no chunk
    write_note(vault, "daily.md", "---\ndate: 2024-01-02\n---\n")  # a daily note nothing was written in
    write_note(vault, "reminder.md", "---\ntitle: Call dentist\n---\nDate: 2024-01-01\n")
    report = ingest_notes(store, [vault])
    assert (report.added, report.empty, report.failures) == (4, 2, [])  # the vault's 3 and the reminder
    assert uri(vault, "dated.md") not in sources(store) and uri(vault, "daily.md") not in sources(store)
    rows = store.conn.execute("SELECT COUNT(*) FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.uri = ?",
                              (uri(vault, "reminder.md"),)).fetchone()  # fmt: skip
    assert rows[0] == 1


def test_a_note_emptied_after_it_was_stored_keeps_its_stored_version_and_id(store: Store, vault: Path) -> None:
    """An editor truncates, then writes: a sync in between removed the note, which came back under a new id."""
    ingest_notes(store, [vault])
    before = sources(store)
    write_note(vault, "alpha.md", "")
    report = ingest_notes(store, [vault])
    assert (report.empty, report.removed, report.failures) == (1, 0, [])
    assert report.notices == [
        f"{uri(vault, 'alpha.md')}: empty now: kept as stored (hint: delete the file to remove it)"
    ]
    assert searched_uris(store, "aardvark") == {uri(vault, "alpha.md")}
    write_note(vault, "alpha.md", NOTES["alpha.md"])
    assert ingest_notes(store, [vault]).unchanged == 3 and sources(store) == before
    (vault / "alpha.md").unlink()
    assert ingest_notes(store, [vault]).removed == 1


def test_an_emptied_vault_is_not_read_as_every_note_deleted(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    before = chunk_ids(store)
    for note in vault.rglob("*.md"):
        note.unlink()  # an unmounted drive leaves an empty mount point
    report = ingest_notes(store, [vault])
    assert report.removed == 0 and len(report.failures) == 1
    assert "3 of its 3 stored sources are gone" in report.failures[0] and "--allow-mass-delete" in report.failures[0]
    assert chunk_ids(store) == before
    report = ingest_notes(store, [vault], allow_mass_delete=True)
    assert report.removed == 3 and not report.failures and sources(store) == {}


def test_the_mass_delete_refusal_names_why_the_notes_would_go(store: Store, tmp_path: Path) -> None:
    root = tmp_path / "w"
    write_note(root, "a/x.md", "# A\n\na\n")
    for i in range(3):
        write_note(root, f"b/n{i}.md", f"# B{i}\n\nb{i}\n")
    ingest_notes(store, [root])
    (failure,) = ingest_notes(store, [root], include=["a/**"]).failures
    assert "3 of its 4 stored sources are filtered out by the include/exclude rules" in failure
    assert "gone from disk" not in failure and "the patterns select less than you meant" in failure
    (root / "b" / "n1.md").unlink()
    (root / "b" / "n2.md").unlink()
    (failure,) = ingest_notes(store, [root], exclude=["b/n0.md"]).failures
    assert "would leave the memory (1 filtered out by the include/exclude rules, 2 gone from disk)" in failure
    assert "unmounted drive" in failure and "--allow-mass-delete" in failure


def test_removing_less_than_half_of_a_vault_needs_no_flag(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    (vault / "alpha.md").unlink()
    assert ingest_notes(store, [vault]).removed == 1


def test_a_note_whose_file_name_is_not_utf8_fails_alone(store: Store, vault: Path) -> None:
    write_note(vault, os.fsdecode(b"caf\xe9.md"), "Latin-1 named note.\n")
    report = ingest_notes(store, [vault])
    assert report.added == 3 and len(report.failures) == 1


def test_a_missing_vault_is_a_failure_and_removes_nothing(store: Store, vault: Path, tmp_path: Path) -> None:
    ingest_notes(store, [vault])
    before = chunk_ids(store)
    vault.rename(tmp_path / "unplugged-drive")
    report = ingest_notes(store, [vault])
    assert len(report.failures) == 1 and "no such folder" in report.failures[0]
    assert (report.added, report.removed) == (0, 0)
    assert chunk_ids(store) == before


def test_a_first_ingest_whose_include_selects_none_of_the_notes_says_so(store: Store, tmp_path: Path) -> None:
    write_note(tmp_path / "gv", "work/a.md", "# A\nThe a note.\n")
    report = ingest_notes(store, [tmp_path / "gv"], include=["wrok"])  # `work` was meant
    assert report.notices == [] and report.failures == [
        f"{tmp_path / 'gv'}: --include 'wrok' selects none of its notes (hint: check the pattern; nothing was removed)"
    ]


def test_a_folder_or_repository_with_nothing_to_read_says_so(store: Store, tmp_path: Path, repo: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ingest_notes(store, [empty]).notices == [f"{empty}: no notes (.md, .markdown) in it"]
    assert ingest_notes(store, [empty], include=["work"]).notices == [f"{empty}: no notes (.md, .markdown) in it"]
    write_note(empty, "blank.md", "")  # a note, empty: counted as such, not "no notes"
    assert ingest_notes(store, [empty]).notices == []
    assert ingest_git(store, [repo]).notices == [f"{repo}: no commits to read"]
    commit_files(repo, {"a.txt": "a"}, "first")
    assert ingest_git(store, [repo], author="Zoe").notices == [f"{repo}: no commits by 'Zoe' to read"]
    assert ingest_git(store, [repo]).notices == []


def test_a_vault_inside_another_is_read_once_and_a_second_run_changes_nothing(store: Store, vault: Path) -> None:
    inner = vault / "projects"
    write_note(inner, "plan.md", "# Plan\n\nShip in May.\n")
    first = ingest_notes(store, [vault, inner])
    assert first.notices == [f"{inner} is inside {vault}: its notes are read as part of that vault"]
    again = ingest_notes(store, [vault, inner])
    assert again.updated == 0 and again.added == 0 and again.unchanged == first.added


def test_a_subfolder_ingested_after_its_vault_keeps_the_notes_as_the_vault_read_them(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    inner = vault / "projects"
    write_note(inner, "plan.md", "# Plan\n\nShip in May.\n")
    for _ in range(2):
        report = ingest_notes(store, [inner])
        assert report.updated == 0 and report.notices == [
            f"{inner} is inside the vault {vault}: its notes are read as part of that vault"
        ]
        assert ingest_notes(store, [vault]).updated == 0
    stored = store.conn.execute(
        "SELECT json_extract(metadata, '$.vault'), json_extract(metadata, '$.path') FROM sources WHERE uri = ?",
        (uri(vault, "projects/plan.md"),),
    ).fetchone()
    assert tuple(stored) == (str(vault.resolve()), "projects/plan.md")  # a note of the vault, read from the subfolder


def test_a_subfolder_ingested_before_its_vault_is_rewritten_once_then_stays(store: Store, vault: Path) -> None:
    inner = vault / "projects"
    ingest_notes(store, [inner])
    assert ingest_notes(store, [vault]).updated == 1  # now a note of the vault: its locator says so
    assert ingest_notes(store, [inner]).updated == 0 and ingest_notes(store, [vault]).updated == 0


def test_a_link_to_a_note_of_the_same_vault_is_not_stored_twice(store: Store, vault: Path, tmp_path: Path) -> None:
    (vault / "alias.md").symlink_to(vault / "alpha.md")
    outside = write_note(tmp_path / "elsewhere", "shared.md", "# Shared\n\nA note kept outside the vault.\n")
    (vault / "shared.md").symlink_to(outside)  # a note brought in from elsewhere is still read
    ingest_notes(store, [vault])
    uris = {row[0] for row in store.conn.execute("SELECT uri FROM sources")}
    assert str(vault / "alias.md") not in uris and {str(vault / "alpha.md"), str(vault / "shared.md")} <= uris


def test_a_link_to_a_note_of_the_vault_that_is_gone_fails_as_one_out_of_it_does(store: Store, vault: Path) -> None:
    """A relative link to a deleted note was skipped without a word; an absolute one out of the vault failed."""
    (vault / "broken.md").symlink_to("nonexistent.md")
    report = ingest_notes(store, [vault])
    assert report.failures == [
        f"{vault / 'broken.md'}: cannot read (No such file or directory) (hint: a link to a file that is gone:"
        " fix or remove the link)"
    ]


def test_a_linked_folder_is_not_followed_and_the_ingest_says_so(store: Store, vault: Path, tmp_path: Path) -> None:
    write_note(tmp_path / "elsewhere", "e.md", "# E\n\nElsewhere.\n")
    (vault / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (vault / "loop").symlink_to(vault, target_is_directory=True)  # a loop: never walked into
    report = ingest_notes(store, [vault])
    assert report.added == 3 and report.notices == [
        f"{vault}: 2 linked folders not followed (e.g. {vault / 'linked'}; symbolic links to folders are skipped:"
        " ingest the folder itself as a vault)"
    ]


def test_a_commits_oversized_diff_is_named_once_when_first_read(store: Store, repo: Path, monkeypatch) -> None:
    from crossmodalrag.connectors import git as git_connector

    monkeypatch.setattr(git_connector, "MAX_FILE_DIFF_CHARS", 200)
    commit_files(repo, {"small.txt": "a line\n", "lock.json": "x" * 500 + "\n"}, "add a lockfile")
    first = ingest_git(store, [repo])
    assert first.notices == [
        f"{repo}: the diffs of 1 changed file over 200 characters were left out, their names kept (e.g. lock.json)"
    ]
    assert ingest_git(store, [repo]).notices == []  # said once, when the commit is first read
    hits = search(store, "lock.json", SearchOptions()).hits  # found by a chunk of the diff's header
    assert any(hit.locator.endswith(" lock.json") for hit in hits)


def test_a_note_given_as_the_vault_says_it_is_a_file(store: Store, vault: Path) -> None:
    note = vault / "projects" / "beta.md"
    report = ingest_notes(store, [note])
    expected = f"{note}: a file, not a vault folder (hint: give the vault's folder; nothing was removed)"
    assert report.failures == [expected]


def test_a_missing_vault_does_not_stop_the_next_vault(store: Store, vault: Path, tmp_path: Path) -> None:
    report = ingest_notes(store, [tmp_path / "nope", vault])
    assert len(report.failures) == 1 and report.added == 3


def test_globs_narrow_what_is_stored_and_a_newly_excluded_note_leaves(store: Store, vault: Path) -> None:
    write_note(vault, "projects/draft-idea.md", "Draft about dragons.\n")
    report = ingest_notes(store, [vault], include=["projects/**"])
    assert set(sources(store)) == {uri(vault, "projects/beta.md"), uri(vault, "projects/draft-idea.md")}
    assert report.added == 2
    report = ingest_notes(store, [vault], include=["projects/**"], exclude=["**/draft-*.md"])
    assert report.removed == 1 and report.unchanged == 1
    assert set(sources(store)) == {uri(vault, "projects/beta.md")}
    assert searched_uris(store, "dragons") == set()
    assert_consistent(store)
    report = ingest_notes(store, [vault], include=["[projects"])  # a typo selecting nothing: not "all deleted"
    assert report.removed == 0 and "selects none of its notes" in report.failures[0]
    assert set(sources(store)) == {uri(vault, "projects/beta.md")}


def test_bumping_the_chunker_version_rederives_every_source(
    store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest_notes(store, [vault])
    prints_before = dict(store.conn.execute("SELECT uri, fingerprint FROM sources").fetchall())
    monkeypatch.setattr("crossmodalrag.store.documents.CHUNKER_VERSION", "chunker-test-next")
    report = ingest_notes(store, [vault])
    assert (report.updated, report.unchanged, report.added) == (3, 0, 0)
    prints_after = dict(store.conn.execute("SELECT uri, fingerprint FROM sources").fetchall())
    assert prints_after.keys() == prints_before.keys()
    assert all(prints_after[u] != prints_before[u] for u in prints_before)
    assert ingest_notes(store, [vault]).unchanged == 3
    assert_consistent(store)


def failing_on_call(limit: int):
    """A read_note that raises RuntimeError on its `limit`-th call, like a crash mid-run."""
    calls = {"n": 0}

    def read(root: Path, path: Path):
        calls["n"] += 1
        if calls["n"] == limit:
            raise RuntimeError("simulated crash")
        return read_note(root, path)

    return read


def test_a_crash_mid_run_keeps_finished_notes_whole_and_a_rerun_completes(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "big-vault"
    long_body = "\n\n".join(f"Paragraph {i} about the lighthouse keeper and the stormy sea." * 6 for i in range(8))
    names = [f"note{i}.md" for i in range(5)]
    for name in names:
        write_note(root, name, f"# {name}\n\n## Part\n{long_body}\n\n## Other {name[:-3]}\nunique{name[:-3]}word\n")
    monkeypatch.setattr(notes_module, "read_note", failing_on_call(3))
    with pytest.raises(RuntimeError, match="simulated crash"):
        ingest_notes(store, [root])
    stored = chunk_ids(store)
    assert set(stored) == {uri(root, n) for n in names[:2]}
    for name in names[:2]:
        assert len(stored[uri(root, name)]) == expected_chunk_count(root, name) > 2
        assert fts_rowids(store, f"unique{name[:-3]}word")
    assert_consistent(store)

    monkeypatch.undo()
    report = ingest_notes(store, [root])
    assert (report.added, report.unchanged, report.failures) == (3, 2, [])
    assert set(sources(store)) == {uri(root, n) for n in names}
    assert all(fts_rowids(store, f"unique{n[:-3]}word") for n in names)
    assert_consistent(store)


def test_the_database_is_intact_after_a_whole_lifecycle(store: Store, vault: Path, tmp_path: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nnew text\n")
    (vault / "journal/gamma.md").unlink()
    write_note(vault, "journal/bad.md", b"\xff\xfe")
    ingest_notes(store, [vault])
    ingest_notes(store, [vault], exclude=["projects/**"])
    ingest_notes(store, [tmp_path / "gone"])
    if store.backend == "sqlite":
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert_consistent(store)


def test_progress_is_reported_per_item(store: Store, vault: Path) -> None:
    seen: list[int] = []
    ingest_notes(store, [vault], progress=lambda report: seen.append(report.added + report.failed))
    assert seen == [1, 2, 3]


def test_a_writer_that_waited_finds_the_same_content_stored_and_writes_nothing(store: Store) -> None:
    """Two syncs at once read the same edited note; the second's view of what is stored is stale."""
    from crossmodalrag.ingest import ingest_documents
    from crossmodalrag.types import Document

    doc = Document("/v/n.md", "note", "N", "# N\n\nThe tokenizer ships in June.\n", "markdown", locator="n.md")
    first, second = IngestReport(), IngestReport()
    ingest_documents(store, [doc], {}, first)
    before = chunk_ids(store)
    ingest_documents(store, [doc], {}, second)  # known = {}: as read before the first one wrote
    assert (first.added, second.added, second.updated, second.unchanged, second.chunks) == (1, 0, 0, 1, 0)
    assert chunk_ids(store) == before


def test_report_summary_and_dict() -> None:
    report = IngestReport(added=2, updated=1, failures=["x: broken"])
    assert report.summary() == "2 added, 1 updated, 0 unchanged, 0 removed, 1 failed (0 chunks written)"
    assert report.to_dict()["failed"] == 1 and report.to_dict()["failures"] == ["x: broken"]


# --- git -------------------------------------------------------------------------------------


@pytest.mark.integration
def test_git_ingest_is_searchable_and_idempotent(store: Store, repo: Path) -> None:
    first = commit_files(repo, {"src/engine.py": "def ignite():\n    return 'vroom'\n"}, "Add the engine ignition")
    second = commit_files(repo, {"src/engine.py": "def ignite():\n    return 'whoosh'\n"}, "Quieter ignition sound")
    report = ingest_git(store, [repo])
    assert (report.added, report.failures) == (2, [])
    root = repo.resolve()
    assert set(sources(store)) == {f"{root}@{first}", f"{root}@{second}"}
    assert f"{root}@{second}" in searched_uris(store, "whoosh")
    before = chunk_ids(store)
    again = ingest_git(store, [repo])
    assert (again.added, again.updated, again.unchanged, again.chunks) == (0, 0, 2, 0)
    assert chunk_ids(store) == before
    modality = {row[0] for row in store.conn.execute("SELECT DISTINCT modality FROM chunks")}
    assert modality == {"code"}
    assert_consistent(store)


@pytest.mark.integration
def test_git_ingest_picks_up_new_commits_only(store: Store, repo: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "first")
    ingest_git(store, [repo])
    commit_files(repo, {"a.txt": "b\n"}, "second")
    report = ingest_git(store, [repo])
    assert (report.added, report.unchanged) == (1, 1)


@pytest.mark.integration
def test_a_linked_worktree_stores_its_commits_under_the_main_work_tree(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    first = commit_files(repo, {"a.txt": "a\n"}, "first")
    git(repo, "worktree", "add", "-q", str(tmp_path / "feature-wt"), "-b", "feature")
    own = commit_files(tmp_path / "feature-wt", {"b.txt": "b\n"}, "feature work")
    report = ingest_git(store, [repo, tmp_path / "feature-wt"])
    assert (report.added, report.unchanged) == (2, 1), "the shared commit is one source, not two"
    assert {f"{repo.resolve()}@{first}", f"{repo.resolve()}@{own}"} == set(sources(store))
    assert ingest_git(store, [repo]).removed == 0, "the worktree's branch still reaches its commit"


@pytest.mark.integration
def test_git_ingest_drops_commits_history_no_longer_reaches(store: Store, repo: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "first")
    git(repo, "checkout", "-q", "-b", "side")
    side = commit_files(repo, {"b.txt": "side work\n"}, "side branch")
    ingest_git(store, [repo])
    git(repo, "checkout", "-q", "-")
    leaked = commit_files(repo, {"a.txt": "key sk-leakedtoken\n"}, "oops")
    assert ingest_git(store, [repo]).removed == 0
    assert f"{repo.resolve()}@{side}" in sources(store), "a commit of another branch is still history"
    commit_files(repo, {"a.txt": "key from the environment\n"}, "read the key from the environment")
    git(repo, "reset", "-q", "--hard", "HEAD~2")  # drop both, then commit the clean version
    commit_files(repo, {"a.txt": "clean\n"}, "clean")
    report = ingest_git(store, [repo])
    assert report.removed == 1 and report.added == 1
    assert f"{repo.resolve()}@{leaked}" not in sources(store)
    assert f"{repo.resolve()}@{side}" in sources(store)
    assert not searched_uris(store, "leakedtoken")
    assert_consistent(store)


@pytest.mark.integration
def test_globs_that_now_leave_a_commit_out_remove_it_as_a_first_ingest_never_stores_it(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "text")
    binary = commit_files(repo, {"img.png": "png bytes\n", "bin.dat": "data\n"}, "add binaries binarymarker")
    commit_files(repo, {"b.txt": "b\n", "c.png": "c\n"}, "mixed")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")
    ingest_git(store, [repo])
    report = ingest_git(store, [repo], exclude=["*.png", "*.dat"])
    assert (report.removed, report.updated, report.unchanged) == (1, 1, 2)
    assert f"{repo.resolve()}@{binary}" not in sources(store) and not searched_uris(store, "binarymarker")
    with open_store(tmp_path / "fresh.db") as fresh:
        ingest_git(fresh, [repo], exclude=["*.png", "*.dat"])
        assert set(sources(fresh)) == set(sources(store)), "the same globs, the same memory"
    assert_consistent(store)


@pytest.mark.integration
def test_commits_stored_when_a_bracket_in_a_glob_was_the_character_are_looked_at_again(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--exclude 'mod[12].py'` kept every commit before sets were read; upgraded, the stored commits'
    stamps still matched the same glob text, so the commits it now leaves out stayed in memory."""
    import hashlib
    import json

    from crossmodalrag import repositories
    from crossmodalrag.chunking import CHUNKER_VERSION
    from crossmodalrag.connectors import globs

    for i in (1, 2, 3):
        commit_files(repo, {f"mod{i}.py": f"{i}\n"}, f"mod {i}")
    exclude = ["mod[12].py"]

    def stamp_of_an_older_release(include, exclude):
        digest = hashlib.sha256(json.dumps([include or [], exclude or []]).encode()).hexdigest()[:16]
        cap = git_connector.MAX_FILE_DIFF_CHARS
        return f"{git_connector.EXTRACTOR} chunker {CHUNKER_VERSION} cap {cap} globs {digest}"

    with monkeypatch.context() as older:
        older.setattr(globs, "_character_set", lambda body: None)  # `[` read as the character
        globs._compile.cache_clear()
        older.setattr(repositories, "_commit_stamp", stamp_of_an_older_release)
        assert ingest_git(store, [repo], exclude=exclude).added == 3
    globs._compile.cache_clear()  # patterns are compiled once: forget the older reading
    report = ingest_git(store, [repo], exclude=exclude)
    assert (report.removed, report.unchanged) == (2, 1)
    with open_store(tmp_path / "fresh.db") as fresh:
        ingest_git(fresh, [repo], exclude=exclude)
        assert set(sources(fresh)) == set(sources(store)), "the same globs, the same memory"


def test_a_pattern_selecting_none_of_a_repositorys_commits_removes_nothing(store: Store, repo: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "text")
    git(repo, "commit", "-q", "--allow-empty", "-m", "empty")  # changes no file: kept whatever the globs
    ingest_git(store, [repo])
    before = set(sources(store))
    report = ingest_git(store, [repo], include=["zzz/*"])  # a typo, as ingest-notes refuses one
    assert report.removed == 0 and set(sources(store)) == before
    [failure] = report.failures
    assert "selects none of its commits" in failure and "nothing was removed" in failure


def shallow_clone(origin: Path, to: Path) -> None:
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin}", str(to)], check=True)


@pytest.mark.integration
def test_a_shallow_clones_oldest_commit_keeps_its_message_and_the_ingest_says_why(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    commit_files(repo, {"a.txt": "hello\n"}, "first")
    commit_files(repo, {"a.txt": "hello\nfeaturemarker\n"}, "second")
    commit_files(repo, {"b.txt": "b\n"}, "third")
    clone = tmp_path / "shallow"
    shallow_clone(repo, clone)
    report = ingest_git(store, [clone])
    [notice] = report.notices
    assert "a shallow clone" in notice and "git fetch --unshallow" in notice
    assert not searched_uris(store, "featuremarker"), "the clone's whole tree is not that commit's change"
    subprocess.run(["git", "-C", str(clone), "fetch", "-q", "--unshallow"], check=True)
    again = ingest_git(store, [clone])
    assert (again.added, again.updated, again.notices) == (2, 1, [])
    assert len(searched_uris(store, "featuremarker")) == 1


@pytest.mark.integration
def test_an_ingest_asks_git_for_the_patches_of_new_commits_only(
    store: Store, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = commit_files(repo, {"a.txt": "one\n"}, "first")
    ingest_git(store, [repo])
    asked: list[list[str]] = []
    read = git_log.log_records
    monkeypatch.setattr(git_log, "log_records", lambda root, shas: asked.append(shas) or read(root, shas))
    assert ingest_git(store, [repo]).unchanged == 1 and asked == [[]]
    second = commit_files(repo, {"b.txt": "two\n"}, "second")
    report = ingest_git(store, [repo])
    assert (report.added, report.unchanged, asked[-1]) == (1, 1, [second])
    # other globs store other diffs: what was stored under the old ones is read again
    report = ingest_git(store, [repo], include=["a.txt"])
    assert (report.updated, report.removed, asked[-1]) == (0, 1, [second, first])


@pytest.mark.integration
def test_a_repository_recloned_shallow_keeps_its_stored_commits_and_diffs(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    commit_files(repo, {"a.txt": "first\n"}, "first")
    commit_files(repo, {"a.txt": "second\n"}, "second")
    commit_files(repo, {"b.txt": "newestmarker\n"}, "third")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", f"file://{repo}", str(clone)], check=True)
    ingest_git(store, [clone])
    before = sources(store)
    shutil.rmtree(clone)
    shallow_clone(repo, clone)  # the same history, fetched with --depth 1
    report = ingest_git(store, [clone])
    assert (report.removed, report.updated, sources(store)) == (0, 0, before)
    [notice] = report.notices
    assert "2 stored commits past its oldest kept" in notice and "git fetch --unshallow" in notice
    assert len(searched_uris(store, "newestmarker")) == 1, "the newest commit keeps its stored diff"


@pytest.mark.integration
def test_a_commit_amended_in_a_shallow_clone_still_leaves_the_memory(store: Store, repo: Path, tmp_path: Path) -> None:
    commit_files(repo, {"a.txt": "a\n"}, "first")
    commit_files(repo, {"a.txt": "b\n"}, "second")
    clone = tmp_path / "shallow"
    shallow_clone(repo, clone)
    commit_files(clone, {"secret.txt": "leakedtoken\n"}, "oops")
    ingest_git(store, [clone])
    git(clone, "reset", "-q", "--hard", "HEAD~1")  # git still holds the commit: history no longer has it
    report = ingest_git(store, [clone])
    assert (report.removed, report.notices) == (1, [])
    assert not searched_uris(store, "leakedtoken")


@pytest.mark.integration
def test_a_commit_stored_with_its_committer_date_is_redated_by_its_author_date(store: Store, repo: Path) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", "rebased later", "--date=2020-01-01T00:00:00+00:00")
    ingest_git(store, [repo])
    # as an earlier version stored it: dated when it was committed, fingerprinted without an extractor,
    # with no stamp of what it was derived by
    [doc] = git_connector.read_commits(repo.resolve())
    doc.extractor, committed = "", datetime.fromisoformat("2025-01-01T12:00:00+00:00").timestamp()
    with store.transaction() as conn:
        conn.execute(
            "UPDATE sources SET timestamp = ?, fingerprint = ?, metadata = json_set(metadata, '$.file_stamp', ?)",
            (committed, fingerprint(doc), None),
        )
    assert ingest_git(store, [repo]).updated == 1
    [stamp] = [row[0] for row in store.conn.execute("SELECT timestamp FROM sources")]
    assert stamp == datetime.fromisoformat("2020-01-01T00:00:00+00:00").timestamp()


@pytest.mark.integration
def test_git_ingest_of_a_bad_path_fails_alone(store: Store, repo: Path, tmp_path: Path) -> None:
    sha = commit_files(repo, {"a.txt": "hello\n"}, "Greeting file")
    not_a_repo = tmp_path / "plain-folder"
    not_a_repo.mkdir()
    report = ingest_git(store, [not_a_repo, repo])
    assert len(report.failures) == 1 and "not a git repository" in report.failures[0]
    assert report.added == 1
    assert searched_uris(store, "greeting") == {f"{repo.resolve()}@{sha}"}
    assert_consistent(store)


@pytest.mark.integration
def test_git_ingest_of_an_empty_repository_adds_nothing(store: Store, repo: Path) -> None:
    report = ingest_git(store, [repo])
    assert (report.added, report.failures) == (0, [])
    assert count(store, "sources") == 0


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    return any_store


def test_a_source_given_twice_in_one_run_keeps_the_last_version_and_a_clean_index(store: Store) -> None:
    """A chat export can hold one session id twice: the second write of the same uri inside one
    write batch must neither collide with the first one's pending index rows nor leave them behind."""
    from crossmodalrag.ingest import ingest_documents
    from crossmodalrag.types import Document

    first = Document(uri="chat:s1", source_type="note", title="Session", text="alpha bravo charlie", format="plain")
    second = Document(uri="chat:s1", source_type="note", title="Session", text="delta echo foxtrot", format="plain")
    report = IngestReport()
    ingest_documents(store, [first, second], {}, report)
    texts = [row[0] for row in store.conn.execute("SELECT text FROM chunks")]
    assert len(texts) == 1 and "delta echo foxtrot" in texts[0]
    assert_consistent(store)
    assert search(store, "foxtrot", SearchOptions()).hits
    assert not search(store, "bravo", SearchOptions()).hits


def test_ingesting_a_folder_as_one_kind_keeps_the_other_kinds_stored_under_it(store: Store, tmp_path: Path) -> None:
    """~/Documents holding notes, PDFs and a repository: each ingest removes only its own kind's sources
    that are gone (an ingest of the parent as notes once dropped every commit, PDF and image under it)."""
    pytest.importorskip("pypdfium2")
    from crossmodalrag.ingest import ingest_pdfs
    from tests.conftest import git
    from tests.pdfs import write_pdf

    documents = tmp_path / "Documents"
    write_note(documents / "vault", "plan.md", "# Plan\n\nShip the tokenizer in June.")
    write_pdf(documents / "papers" / "spec.pdf", ["The turbine blades crack under thermal cycling."])
    (documents / "code").mkdir()
    git(documents / "code", "init", "-q")
    commit_files(documents / "code", {"a.py": "print(1)\n"}, "Add a")
    assert not ingest_notes(store, [documents / "vault"]).failures
    assert not ingest_pdfs(store, [documents / "papers"]).failures
    assert not ingest_git(store, [documents / "code"]).failures
    before = {kind: n for kind, n in store.conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY 1")}
    assert before == {"note": 1, "pdf": 1, "commit": 1}

    notes_report = ingest_notes(store, [documents])  # the whole folder as a vault: its .md files
    pdf_report = ingest_pdfs(store, [documents])  # and as a folder of PDFs

    assert notes_report.removed == pdf_report.removed == 0
    after = {kind: n for kind, n in store.conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY 1")}
    assert after == before
    (documents / "vault" / "plan.md").unlink()
    assert ingest_notes(store, [documents]).removed == 1  # its own kind still leaves when gone
    assert {k for (k,) in store.conn.execute("SELECT DISTINCT source_type FROM sources")} == {"pdf", "commit"}


def test_a_file_ingested_by_its_own_path_stays_when_its_folder_is_ingested(store: Store, tmp_path: Path) -> None:
    """A PDF with another extension or a hidden name is found only when given itself; the folder's walk
    skipping it does not make it gone (it was removed while still on disk)."""
    pytest.importorskip("pypdfium2")
    from crossmodalrag.ingest import ingest_pdfs
    from tests.pdfs import write_pdf

    papers = tmp_path / "papers"
    write_pdf(papers / "spec.pdf", ["The turbine blades crack under thermal cycling."])
    odd = [write_pdf(papers / "report.PDF.bak", ["Kept aside."]), write_pdf(papers / ".draft.pdf", ["Hidden."])]
    assert not ingest_pdfs(store, odd).failures
    report = ingest_pdfs(store, [papers])
    assert (report.added, report.removed) == (1, 0) and len(sources(store)) == 3
    odd[0].unlink()
    assert ingest_pdfs(store, [papers]).removed == 1  # gone from disk: it leaves


def test_a_pdf_given_and_also_in_a_folder_given_is_read_and_counted_once(store: Store, tmp_path: Path) -> None:
    """`mem ingest-pdf ~/papers/spec.pdf ~/papers/` (the README's line) said "1 added, 1 unchanged"."""
    pytest.importorskip("pypdfium2")
    from crossmodalrag.ingest import ingest_pdfs
    from tests.pdfs import write_pdf

    papers = tmp_path / "papers"
    spec = write_pdf(papers / "spec.pdf", ["The turbine blades crack under thermal cycling."])
    report = ingest_pdfs(store, [spec, papers])
    assert (report.added, report.unchanged, report.removed, report.notices) == (1, 0, 0, [])
    write_pdf(papers / "more.pdf", ["The rotor hub was redesigned."])
    report = ingest_pdfs(store, [papers, spec])  # the other order: the folder first
    assert (report.added, report.unchanged, report.removed, report.notices) == (1, 1, 0, [])
    assert len(sources(store)) == 2


def test_pdfs_and_chats_whose_file_name_is_not_utf8_fail_alone(store: Store, tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2")
    from crossmodalrag.conversations import ingest_conversations
    from crossmodalrag.ingest import ingest_pdfs
    from tests.agent.chats import claude_record, write_jsonl
    from tests.pdfs import write_pdf

    papers = tmp_path / "papers"
    write_pdf(papers / "ok.pdf", ["The turbine blades crack under thermal cycling."])
    write_pdf(papers / os.fsdecode(b"sp\xe9c.pdf"), ["Named in Latin-1."])
    report = ingest_pdfs(store, [papers])
    assert (
        report.added == 1
        and len(report.failures) == 1
        and "sp\ufffdc.pdf: file name is not valid UTF-8" in report.failures[0]
    )
    chats = tmp_path / "chats"
    chats.mkdir()
    write_jsonl(chats / "ok.jsonl", [claude_record("u1", None, "user", "what port does the cache use?")])
    write_jsonl(chats / os.fsdecode(b"s\xe9.jsonl"), [claude_record("u1", None, "user", "hello")])
    report = ingest_conversations(store, [chats])
    assert report.added == 1 and len(report.failures) == 1 and "rename the file" in report.failures[0]


def test_confined_ingest_does_not_follow_a_link_out_of_the_folder(store: Store, vault: Path, tmp_path: Path) -> None:
    """What an agent's memory_ingest does (agent/jobs.py): a symlink in a configured vault must not
    lead the read outside it. The CLI, run by the vault's owner, still follows it."""
    secret = write_note(tmp_path / "elsewhere", "secret.md", "The safe code is 4711.\n")
    (vault / "leak.md").symlink_to(secret)
    (vault / "inside.md").symlink_to(vault / "alpha.md")  # a link within the vault is no failure (alpha is read)
    report = ingest_notes(store, [vault], confine=True)
    assert report.added == 3 and len(report.failures) == 1 and "outside" in report.failures[0]
    assert uri(vault, "leak.md") not in sources(store)
    assert ingest_notes(store, [vault]).added == 1  # unconfined: read as before


def test_a_note_read_again_whose_text_now_chunks_otherwise_is_rewritten(
    store: Store, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal stored before dated sections carried their day kept the file's date for good: the
    upgrade's re-read found its text as stored and wrote nothing. Other notes read again stay unchanged."""
    from crossmodalrag.chunking import markdown

    journal = write_note(
        vault, "journal.md", "# Journal\n\n## 2024-03-05\nMet Priya.\n\n## March 12, 2024\nKumquat test.\n"
    )
    with monkeypatch.context() as before:
        before.setattr(markdown, "section_day", lambda headings: None)  # the chunker of an older release
        ingest_notes(store, [vault])
    assert {row[0] for row in store.conn.execute("SELECT said_at FROM chunks")} == {None}
    monkeypatch.setattr(notes_module, "READER_VERSION", "next")  # an upgrade: every note is read again
    report = ingest_notes(store, [vault])
    assert (report.updated, report.unchanged) == (1, 3)
    said = store.conn.execute(
        "SELECT c.said_at FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.uri = ? ORDER BY c.chunk_index",
        (str(journal),),
    ).fetchall()
    assert [row[0] for row in said] == [1_709_596_800.0, 1_710_201_600.0]
    assert ingest_notes(store, [vault]).unchanged == 4
    assert_consistent(store)
