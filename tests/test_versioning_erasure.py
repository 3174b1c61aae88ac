"""What a forget leaves in the change log (versioning/erasure.py): nothing that confirms a guessed secret.

A content hash of an erased version, with the rest of the note stored again, confirms a guessed PIN:
hash the note with each guess. So every hash of an erased state becomes a random marker, the chain
is re-chained over the markers, and `mem verify` still proves it (and still catches tampering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag import versioning
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import Store
from crossmodalrag.versioning.log import append, load_state
from crossmodalrag.versioning.sources import restore_source, source_digest
from crossmodalrag.versioning.verify import verify
from tests.conftest import write_note


@pytest.fixture
def store(any_store):  # on SQLite and on PostgreSQL
    return any_store


def bank_note(pin: str) -> str:
    return f"---\ndate: 2025-03-01\n---\n# Bank\n\nMy card PIN is {pin} and the branch is downtown.\n"


def logged(store: Store) -> list[tuple]:
    return [tuple(row) for row in store.conn.execute("SELECT * FROM change_log ORDER BY seq")]


def test_a_forget_leaves_no_hash_that_confirms_a_guessed_pin(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_note(vault, "bank.md", bank_note("4471"))
    write_note(vault, "other.md", "# Other\n\nUnrelated.\n")
    ingest_notes(store, [vault])
    uri = str((vault / "bank.md").resolve())
    guess = versioning.KINDS["source"].read(store.conn, uri)  # what an attacker rebuilds with the right PIN
    write_note(vault, "bank.md", bank_note("4471, the old one was 9031"))
    ingest_notes(store, [vault])
    assert source_digest(guess) in {row[6] for row in logged(store)}
    first = min(row[0] for row in logged(store) if row[4] == uri)
    chained_over_it = {row[8] for row in logged(store) if row[0] >= first}
    write_note(vault, "bank.md", bank_note("<private>4471</private>"))
    forget_sources(store, find_sources(store, uri=uri))
    ingest_notes(store, [vault])  # the README's recipe: wrap the PIN, forget, ingest again
    after = {value for row in logged(store) for value in row}
    assert source_digest(guess) not in after, "the erased version's hash would confirm the PIN"
    assert not chained_over_it & after, "a chain hash computed over it would be the same oracle"
    erased = [row for row in logged(store) if row[4] == uri and versioning.is_erased(row[6])]
    assert [row[2] for row in erased] == ["insert", "update", "forget"]
    assert len({row[6] for row in erased}) == 2, "two versions, two markers; the tombstone names the last"
    assert verify(store.conn).ok


def test_verify_still_catches_tampering_after_a_forget(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\n\nsecret a\n")
    write_note(vault, "b.md", "# B\n\nkept b\n")
    ingest_notes(store, [vault])
    forget_sources(store, find_sources(store, uri=str((vault / "a.md").resolve())))
    assert verify(store.conn).ok
    store.conn.execute("UPDATE chunks SET text = 'kept b, edited'")
    assert [p.problem for p in verify(store.conn).problems] == ["edited_outside"]
    if store.backend == "sqlite":  # PostgreSQL's clients may not change a record's reason at all
        store.conn.execute("UPDATE change_log SET reason = 'forged' WHERE seq = 2")
        assert verify(store.conn).problems[0].problem == "chain_broken"


def test_a_forgotten_sources_memory_nodes_leave_neither_hash_nor_id(store: Store, tmp_path: Path) -> None:
    """An event's id is a hash of its statement (stable_id): it would confirm a guessed statement."""
    from crossmodalrag.memory.nodes import Node, write_nodes

    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\n\nMy PIN is 4471.\n")
    ingest_notes(store, [vault])
    source_id, uri = store.conn.execute("SELECT id, uri FROM sources").fetchone()
    with store.transaction() as conn:
        write_nodes(conn, [Node("ev_pin", "event", "PIN", "The PIN is 4471", source_id=source_id, source_uri=uri)])
    node_hash = store.conn.execute("SELECT content_hash FROM change_log WHERE target = 'ev_pin'").fetchone()[0]
    forget_sources(store, find_sources(store, uri=uri))
    values = {value for row in logged(store) for value in row}
    assert "ev_pin" not in values and node_hash not in values
    assert verify(store.conn).ok


def test_a_forget_also_erases_the_hashes_an_earlier_version_of_mem_left(store: Store, tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    write_note(vault, "old.md", "# Old\n\nforgotten before this fix\n")
    write_note(vault, "new.md", "# New\n\nforgotten now\n")
    ingest_notes(store, [vault])
    old = str((vault / "old.md").resolve())
    digest = store.conn.execute("SELECT content_hash FROM change_log WHERE target = ?", (old,)).fetchone()[0]
    with store.transaction() as conn:  # what forget did before: states erased, a tombstone with the hash
        assert load_state(conn, digest) is None  # the live version: never stored
        restore_source(conn, old, None)
        append(conn, "forget", "source", old, digest, "mem forget")
    assert verify(store.conn).ok
    forget_sources(store, find_sources(store, uri=str((vault / "new.md").resolve())))
    assert digest not in {row[6] for row in logged(store)}
    assert verify(store.conn).ok
