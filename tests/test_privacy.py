"""`<private>` spans: never stored, indexed, embedded, nor kept in metadata or the title."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

import crossmodalrag.connectors.notes as notes_module
from crossmodalrag.chunking import chunk_document
from crossmodalrag.cli.main import main
from crossmodalrag.connectors.notes import read_note
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.privacy import has_private, strip_private
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import open_store
from tests.conftest import write_note
from tests.fakes import HashingEmbedder

SECRET = "xylophonesecret42"


def database_bytes(db_path: Path) -> bytes:
    """Every byte of the database and its side files (WAL, shm, vector cache) as they are on disk."""
    files = [p for p in db_path.parent.glob(db_path.name + "*") if p.is_file()]
    files += [p for p in db_path.parent.glob(db_path.name + ".vectors/**/*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


# --- stripping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>x</private> b", "a   b"),
        ("a<PRIVATE>x</Private>b", "a b"),
        ("a< private >x</ private >b", "a< private >x</ private >b"),
        ("a <private >x</private\t> b <PRIVATE  >y</private> c", "a   b   c"),
        ("<private<private>x</private>>secret", " "),
        ("<<private>x</private>private>y", "< private>y"),
        ("keep\n<private>\nline one\nline two\n</private>\n# Next\nbody", "keep\n\n\n\n\n# Next\nbody"),
        ("a <private>x</private> b <private>y</private> c", "a   b   c"),
        ("before <private>the rest\nof the note", "before \n"),
        ("<private>outer <private>inner</private> still hidden</private> shown", "  shown"),
        ("a stray </private> closing tag", "a stray   closing tag"),
        ("no tags at all", "no tags at all"),
        ("```\n<private>x</private>\n```", "```\n \n```"),
    ],
    ids=[
        "inline",
        "case",
        "spaces-are-not-tags",
        "space-before-close-bracket",
        "no-new-tag-with-space",
        "no-new-tag",
        "multi-line",
        "several",
        "unclosed",
        "nested",
        "stray-close",
        "none",
        "code",
    ],
)
def test_strip_private(text: str, expected: str) -> None:
    assert strip_private(text) == expected
    assert not has_private(strip_private(text))


def test_a_note_without_tags_is_returned_as_is() -> None:
    text = "# Title\nprivately speaking, <b>private</b> is a word\n"
    assert strip_private(text) is text


# --- the notes connector --------------------------------------------------------------------


def test_private_text_never_leaves_the_connector(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    text = (
        f"---\ntitle: Plan <private>{SECRET}</private>\nsecret: <private>{SECRET}</private>\n---\n"
        f"# Heading\nPublic words. <private>{SECRET} #secrettag [[SecretLink]]</private>\n"
        f"<private>\n## {SECRET} heading\n{SECRET}\n</private>\nMore public words.\n"
    )
    doc = read_note(vault, write_note(vault, "plan.md", text))
    assert SECRET not in repr(doc)
    assert doc.title == "Plan"
    assert "secrettag" not in doc.metadata["tags"] and doc.metadata["wikilinks"] == []
    chunks = chunk_document(doc)
    assert chunks and all(SECRET not in c.text + c.locator + repr(c.metadata) for c in chunks)
    assert "Public words." in doc.text and "More public words." in doc.text


def test_a_private_h1_does_not_become_the_title(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    doc = read_note(vault, write_note(vault, "stem.md", f"# <private>{SECRET}</private>\nbody\n"))
    assert doc.title == "stem"


def test_a_wholly_private_note_is_stored_without_text(tmp_path: Path, store) -> None:
    """Replacing the stored version by nothing, rather than failing and keeping the old text."""
    vault = tmp_path / "vault"
    path = write_note(vault, "diary.md", f"# Diary\n{SECRET} in the open\n")
    ingest_notes(store, [vault])
    assert search(store, SECRET, SearchOptions()).hits
    path.write_text(f"<private>\n# Diary\n{SECRET} in the open\n</private>\n", encoding="utf-8")
    report = ingest_notes(store, [vault])
    assert (report.updated, report.failed) == (1, 0)
    assert not search(store, SECRET, SearchOptions()).hits
    assert store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == 0
    assert read_note(vault, path).text == ""


def test_no_hash_of_a_note_with_a_private_span_is_stored(tmp_path: Path, db_path: Path, store) -> None:
    """With the rest of the note stored, the hash of its bytes confirms a guessed PIN in milliseconds."""
    vault = tmp_path / "vault"
    bank = write_note(vault, "bank.md", "# Bank\nCard ending 1234.\n<private>PIN 4821</private>\n")
    write_note(vault, "plain.md", "# Plain\nnothing hidden\n")
    ingest_notes(store, [vault])
    os.utime(bank, ns=(1_700_000_000_000_000_000,) * 2)  # touched: read again, and restamped
    assert ingest_notes(store, [vault]).unchanged == 2
    rows = store.conn.execute(
        "SELECT json_extract(metadata, '$.path'), json_extract(metadata, '$.file_sha256') IS NOT NULL,"
        " json_extract(metadata, '$.file_stamp') LIKE '%:1700000000000000000:%' FROM sources ORDER BY uri"
    ).fetchall()
    assert [tuple(row) for row in rows] == [("bank.md", 0, 1), ("plain.md", 1, 0)]
    assert hashlib.sha256(bank.read_bytes()).hexdigest().encode() not in database_bytes(db_path)


# --- end to end -----------------------------------------------------------------------------


def test_the_secret_is_nowhere_in_the_database_files(tmp_path: Path, db_path: Path, capsys) -> None:
    vault = tmp_path / "vault"
    write_note(vault, "a.md", f"# Alpha\nalpha words <private>{SECRET}\nmore {SECRET}</private> after\n")
    write_note(vault, "b.md", f"---\ntags: [x]\nnote: <private>{SECRET}</private>\n---\n# Beta\nbeta words\n")
    assert main(["ingest-notes", str(vault)]) == 0
    with open_store(db_path) as store:
        embedder = HashingEmbedder()
        embedded: list[str] = []
        original = embedder.embed
        embedder.embed = lambda texts: embedded.extend(texts) or original(texts)
        embed_missing(store, embedder)
        assert embedded and not any(SECRET in text for text in embedded)
        assert not search(store, SECRET, SearchOptions()).hits
        assert search(store, "alpha", SearchOptions()).hits
        assert SECRET.encode() not in database_bytes(db_path)  # the WAL is still there: the store is open
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert SECRET.encode() not in database_bytes(db_path)
    capsys.readouterr()
    main(["ask", SECRET, "--no-llm", "--json"])
    assert SECRET not in capsys.readouterr().out.replace(f'"query": "{SECRET}"', "")


def test_a_note_stored_before_privacy_is_rewritten_and_can_be_scrubbed(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Its fingerprint changes with its text, so no CHUNKER_VERSION bump is needed to re-ingest it (the
    notes reader's version, in its file stamp, has it read again); `mem forget --vacuum` then wipes the
    old text's freed bytes."""
    vault = tmp_path / "vault"
    write_note(vault, "a.md", f"# Alpha\nalpha words <private>{SECRET}</private>\n")
    write_note(vault, "b.md", "# Beta\nbeta words\n")
    with monkeypatch.context() as patch:
        patch.setattr(notes_module, "strip_private", lambda text: text)  # an older version of mem
        patch.setattr(notes_module, "READER_VERSION", "0")
        with open_store(db_path) as store:
            ingest_notes(store, [vault])
            assert search(store, SECRET, SearchOptions()).hits
    with open_store(db_path) as store:
        report = ingest_notes(store, [vault])
        assert (report.updated, report.unchanged) == (1, 1)
        assert not search(store, SECRET, SearchOptions()).hits
    assert main(["forget", "--vacuum"]) == 0
    assert SECRET.encode() not in database_bytes(db_path)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2
