"""An edited source keeps the rows (ids, vectors) of its chunks whose text is unchanged, wherever
they now fall, on both backends: editing one section of a long journal note embeds that section only."""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import Store
from crossmodalrag.versioning.verify import verify
from tests.conftest import write_note
from tests.fakes import HashingEmbedder
from tests.test_ingest import assert_consistent, searched_uris


def journal(entries: list[str]) -> str:
    return "# Journal\n\n" + "".join(
        f"## Entry {e}\n\nToday I worked on topic{e} and wrote about it.\n\n" for e in entries
    )


def stored_chunks(store: Store, uri: str) -> list[tuple]:
    """(id, chunk_index, text, char_start, char_end, locator) in chunk order."""
    return store.conn.execute(
        "SELECT c.id, c.chunk_index, c.text, c.char_start, c.char_end, c.locator FROM chunks c"
        " JOIN sources s ON s.id = c.source_id WHERE s.uri = ? ORDER BY c.chunk_index",
        (uri,),
    ).fetchall()


def test_editing_one_section_writes_and_embeds_that_section_only(any_store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "v"
    note = write_note(vault, "journal.md", journal([str(i) for i in range(12)]))
    uri = str(note.resolve())
    ingest_notes(any_store, [vault])
    embedder = HashingEmbedder()
    embed_missing(any_store, embedder)
    before = {row[2]: row[0] for row in stored_chunks(any_store, uri)}
    assert len(before) == 12
    note.write_text(note.read_text().replace("topic3 and", "topic3 (a typo fixed) and"))
    report = ingest_notes(any_store, [vault])
    assert (report.updated, report.chunks) == (1, 1)
    assert embed_missing(any_store, embedder).chunks == 1
    after = stored_chunks(any_store, uri)
    kept = [row for row in after if row[2] in before]
    assert len(kept) == 11 and all(before[row[2]] == row[0] for row in kept)
    assert searched_uris(any_store, "typo") == {uri}
    assert verify(any_store.conn).ok
    assert_consistent(any_store)


def test_chunks_that_shift_or_trade_places_keep_their_rows_with_their_new_positions(
    any_store: Store, tmp_path: Path
) -> None:
    vault = tmp_path / "v"
    note = write_note(vault, "journal.md", journal(["a", "b", "c", "d"]))
    uri = str(note.resolve())
    ingest_notes(any_store, [vault])
    before = {row[2]: row[0] for row in stored_chunks(any_store, uri)}
    note.write_text(journal(["new", "d", "b", "a", "c"]))  # one section ahead of all, the rest reordered
    report = ingest_notes(any_store, [vault])
    assert report.chunks == 1
    after = stored_chunks(any_store, uri)
    assert [row[1] for row in after] == list(range(5))
    assert after[0][2] not in before and all(before.get(row[2]) == row[0] for row in after[1:])
    text = note.read_text()
    for _, _, chunk_text, start, end, locator in after:  # spans and locators are the new ones
        assert text[start:end].strip() in chunk_text and locator.startswith("journal.md#Entry ")
    assert [row[5] for row in after] == [f"journal.md#Entry {e}" for e in ["new", "d", "b", "a", "c"]]
    assert searched_uris(any_store, "topicd") == {uri}
    assert verify(any_store.conn).ok
    assert_consistent(any_store)
