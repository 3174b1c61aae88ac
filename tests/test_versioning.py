"""Versioned memory (issue 14): the hash-chained change log, verify, history, checkpoints, rollback, diff."""

from __future__ import annotations

import json
import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from crossmodalrag import versioning
from crossmodalrag.cli.main import main
from crossmodalrag.errors import CMRAGError
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import Store, open_store
from crossmodalrag.store.migrations import migrate
from crossmodalrag.versioning.history import checkpoint, diff, recent_changes, rollback, source_history
from crossmodalrag.versioning.verify import verify
from tests.conftest import write_note

NOTES = {
    "alpha.md": "# Alpha\n\nAardvarks eat ants.\n",
    "beta.md": "# Beta\n\nBees build.\n",
    "gamma.md": "# Gamma\n\nGeese.\n",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    for name, text in NOTES.items():
        write_note(tmp_path / "vault", name, text)
    return (tmp_path / "vault").resolve()


def ops(store: Store) -> list[tuple[str, str]]:
    rows = store.conn.execute("SELECT op, target FROM change_log ORDER BY seq")
    return [(op, Path(target).name) for op, target in rows]


def problems(store: Store) -> list[tuple[str, str, int | None]]:
    return [(p.problem, Path(p.target).name, p.seq) for p in verify(store.conn).problems]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the log and its chain ------------------------------------------------------------------


def test_every_insert_update_and_delete_appends_one_chained_record(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nAardvarks eat termites too.\n")
    (vault / "beta.md").unlink()
    ingest_notes(store, [vault])
    assert ops(store) == [
        ("insert", "alpha.md"),
        ("insert", "beta.md"),
        ("insert", "gamma.md"),
        ("update", "alpha.md"),
        ("delete", "beta.md"),
    ]
    ingest_notes(store, [vault])  # nothing changed: nothing recorded
    assert len(ops(store)) == 5
    report = verify(store.conn)
    assert report.ok and report.records == 5 and report.head_seq == 5 and len(report.head_hash) == 64


@pytest.mark.integration
def test_every_connector_s_writes_verify(store: Store, vault: Path, repo: Path) -> None:
    from crossmodalrag.ingest import ingest_git
    from tests.conftest import commit_files

    commit_files(repo, {"a.py": "x = 1\n"}, "first")
    commit_files(repo, {"a.py": "x = 2\n", "café.md": "# Notes\n\nnaïve\n"}, "second, with ünïcode")
    write_note(vault, "journal/ünïcode.md", "---\ndate: 2024-01-01\ntags: [a]\n---\n# Ü\n\nEmoji 🦊 text.\n")
    ingest_git(store, [repo])
    ingest_notes(store, [vault])
    report = verify(store.conn)
    assert report.ok and report.rows_checked == 6, report.problems


def test_verify_catches_direct_edits_inserts_and_deletes_of_live_rows(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    conn = store.conn
    conn.execute(
        "UPDATE chunks SET text = 'tampered' WHERE source_id = (SELECT id FROM sources WHERE uri LIKE '%alpha.md')"
    )
    conn.execute("DELETE FROM sources WHERE uri LIKE '%beta.md'")
    conn.execute(
        "INSERT INTO sources (source_type, uri, fingerprint, title, ingested_at)"
        " VALUES ('note', '/x/planted.md', 'f', 't', 0)"
    )
    assert sorted(problems(store)) == [
        ("deleted_outside", "beta.md", 2),
        ("edited_outside", "alpha.md", 1),
        ("inserted_outside", "planted.md", None),
    ]


def test_verify_catches_a_rewritten_log_record_and_the_cli_exits_1(capsys, store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    code, out, _ = run(capsys, "verify")
    assert code == 0 and "chain head: seq 3 " in out
    store.conn.execute("UPDATE change_log SET actor = 'someone else' WHERE seq = 2")
    assert problems(store) == [("chain_broken", "beta.md", 2)]
    code, out, _ = run(capsys, "verify", "--json")
    data = json.loads(out)
    assert (
        code == 1
        and data["ok"] is False
        and data["problems"][0]
        == {
            "problem": "chain_broken",
            "kind": "source",
            "target": str(vault / "beta.md"),
            "seq": 2,
        }
    )
    assert set(data) == {"ok", "versioning", "records", "head", "rows_checked", "problems", "seconds"}
    assert data["head"]["seq"] == 1  # the last record the chain still proves


def test_a_stored_past_version_changed_in_the_file_is_caught(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nthe second version\n")
    ingest_notes(store, [vault])  # the first version is now a stored past state
    assert problems(store) == []
    digest, blob = store.conn.execute("SELECT content_hash, state FROM change_states LIMIT 1").fetchone()
    forged = zlib.compress(zlib.decompress(blob).replace(b"alpha", b"forged"))
    store.conn.execute("UPDATE change_states SET state = ? WHERE content_hash = ?", (forged, digest))
    assert [(problem, target) for problem, target, _ in problems(store)] == [("version_altered", "alpha.md")]


def test_a_removed_log_record_is_caught(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    store.conn.execute("DELETE FROM change_log WHERE seq = 2")
    assert ("chain_broken", "gamma.md", 3) in problems(store)
    store.conn.execute("DELETE FROM change_log WHERE seq = 3")  # now the newest: only the live rows tell
    assert problems(store) == [("inserted_outside", "beta.md", None), ("inserted_outside", "gamma.md", None)]


def test_a_direct_update_recorded_with_changing_source_verifies(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    checkpoint(store, "before-merge")
    with store.transaction() as conn, versioning.changing_source(conn, 1, reason="merged"):
        conn.execute("UPDATE sources SET metadata = json_set(metadata, '$.importance', ?) WHERE id = 1", (0.9,))
    assert ops(store)[-1] == ("update", "alpha.md") and verify(store.conn).ok
    assert rollback(store, "before-merge").restore == [("source", str(vault / "alpha.md"))]
    assert "importance" not in store.conn.execute("SELECT metadata FROM sources WHERE id = 1").fetchone()[0]


def test_only_superseded_states_are_stored(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    assert store.conn.execute("SELECT COUNT(*) FROM change_states").fetchone()[0] == 0  # the live rows are the state
    write_note(vault, "alpha.md", "# Alpha\n\nnew\n")
    ingest_notes(store, [vault])
    [state] = [zlib.decompress(r[0]) for r in store.conn.execute("SELECT state FROM change_states")]
    assert b"Aardvarks eat ants" in state


def test_agent_memories_merges_and_updates_are_versioned(store: Store) -> None:
    from crossmodalrag.agent.edits import update_memory
    from crossmodalrag.agent.memories import remember

    with versioning.acting(store.conn, "mcp:claude"):
        first = remember(store, "The staging database lives on host db-7.", tags=["ops"])
        again = remember(store, "The staging database lives on host db-7.", tags=["infra"])
        update_memory(store, first.id, importance=0.9)
    assert again.status == "duplicate" and verify(store.conn).ok
    rows = store.conn.execute("SELECT op, actor, reason FROM change_log ORDER BY seq").fetchall()
    assert [tuple(r) for r in rows] == [
        ("insert", "mcp:claude", ""),
        ("update", "mcp:claude", "merged a duplicate"),
        ("update", "mcp:claude", "memory_update"),
    ]
    plan = rollback(store, "1")
    assert len(plan.restore) == 1 and verify(store.conn).ok
    assert "infra" not in store.conn.execute("SELECT metadata FROM sources").fetchone()[0]


def test_the_actor_is_recorded(store: Store, vault: Path, settings) -> None:
    settings.notes_paths = [vault]
    from crossmodalrag.sync import sync

    sync(store, settings)
    with versioning.acting(store.conn, "mcp:claude"):
        (vault / "gamma.md").unlink()
        ingest_notes(store, [vault])
    actors = [row[0] for row in store.conn.execute("SELECT actor FROM change_log ORDER BY seq")]
    assert actors == ["sync", "sync", "sync", "mcp:claude"] and store.conn.actor == "cli"


def test_versioning_off_records_nothing_and_verify_says_so(capsys, monkeypatch, db_path, vault: Path) -> None:
    monkeypatch.setenv("CMRAG_VERSIONING", "off")
    assert main(["ingest-notes", str(vault)]) == 0
    code, out, _ = run(capsys, "verify", "--json")
    data = json.loads(out)
    assert data["versioning"] is False and data["records"] == 0
    monkeypatch.delenv("CMRAG_VERSIONING")
    code, out, err = run(capsys, "verify")
    assert code == 1 and "inserted outside mem" in out  # changes made while it was off are unaccounted for


def test_verify_accept_records_changes_made_while_versioning_was_off(capsys, monkeypatch, vault: Path) -> None:
    assert main(["ingest-notes", str(vault)]) == 0
    monkeypatch.setenv("CMRAG_VERSIONING", "off")
    write_note(vault, "alpha.md", "# Alpha\n\nchanged while off\n")
    (vault / "beta.md").unlink()
    assert main(["ingest-notes", str(vault)]) == 0
    code, _, err = run(capsys, "verify", "--accept")
    assert code == 1 and "versioning is off" in err
    monkeypatch.delenv("CMRAG_VERSIONING")
    assert run(capsys, "verify")[0] == 1
    code, out, err = run(capsys, "verify", "--accept")
    assert code == 0 and "accepted 2 change(s)" in err and out.startswith("ok:")
    with open_store(Path(os.environ["CMRAG_DB_PATH"])) as store:
        store.conn.execute("UPDATE change_log SET reason = 'x' WHERE seq = 1")
    code, _, err = run(capsys, "verify", "--accept")
    assert code == 1 and "altered at seq 1" in err


def test_verify_accept_does_not_claim_an_altered_past_version_and_says_what_to_do(capsys, vault: Path) -> None:
    assert main(["ingest-notes", str(vault)]) == 0
    write_note(vault, "alpha.md", "# Alpha\n\nthe second version\n")
    assert main(["ingest-notes", str(vault)]) == 0
    with open_store(Path(os.environ["CMRAG_DB_PATH"])) as store:
        digest, blob = store.conn.execute("SELECT content_hash, state FROM change_states LIMIT 1").fetchone()
        forged = zlib.compress(zlib.decompress(blob).replace(b"alpha", b"forged"))
        store.conn.execute("UPDATE change_states SET state = ? WHERE content_hash = ?", (forged, digest))
        records = store.conn.execute("SELECT COUNT(*) FROM change_log").fetchone()[0]
    code, out, err = run(capsys, "verify", "--accept")
    # it said "accepted 1 change(s)" while nothing was recorded and the same mismatch stayed
    assert code == 1 and "accepted 0 change(s)" in err and "MISMATCH a stored version" in out
    assert "cannot accept 1 stored past version(s)" in err and "mem forget SOURCE" in err and "mem restore" in err
    with open_store(Path(os.environ["CMRAG_DB_PATH"])) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM change_log").fetchone()[0] == records
    assert main(["forget", str(vault / "alpha.md"), "--yes"]) == 0  # what the hint says works
    assert run(capsys, "verify")[0] == 0


def test_an_upgraded_memory_gets_one_genesis_record_per_source(tmp_path: Path, vault: Path) -> None:
    with open_store(tmp_path / "today.db") as today:
        ingest_notes(today, [vault])
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=6)
    # Today's writer needs today's columns: the version-6 memory gets the rows it wrote, in its own columns.
    conn.execute("ATTACH ? AS today", (str(tmp_path / "today.db"),))
    chunk_columns = (
        "id, source_id, chunk_index, text, locator, char_start, char_end, metadata, modality, byte_start, byte_end"
    )
    conn.execute("INSERT INTO sources SELECT * FROM today.sources")
    conn.execute(f"INSERT INTO chunks ({chunk_columns}) SELECT {chunk_columns} FROM today.chunks")
    conn.execute("INSERT INTO chunks_fts (rowid, title, body) SELECT rowid, title, body FROM today.chunks_fts")
    conn.execute("DETACH today")
    assert conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 3
    conn.close()
    with open_store(path) as store:  # migrates to 7 without re-ingesting
        rows = store.conn.execute("SELECT op, actor FROM change_log").fetchall()
        assert [tuple(r) for r in rows] == [("genesis", "migration")] * 3
        assert verify(store.conn).ok
        assert ingest_notes(store, [vault]).unchanged == 3


def test_memory_nodes_are_logged_by_hash_only_and_verified(store: Store, vault: Path) -> None:
    from crossmodalrag.memory.nodes import Node, delete_nodes, write_nodes

    ingest_notes(store, [vault])
    source_id, uri = store.conn.execute("SELECT id, uri FROM sources WHERE uri LIKE '%alpha.md'").fetchone()
    with store.transaction() as conn:
        write_nodes(conn, [Node("ev_1", "event", "Ants", "Aardvarks eat ants", source_id=source_id, source_uri=uri)])
        write_nodes(conn, [Node("ev_2", "event", "Bees", "Bees build hives")])
    with store.transaction() as conn:
        write_nodes(conn, [Node("ev_2", "event", "Bees", "Bees build bigger hives")])
        delete_nodes(conn, ["ev_1"])
    rows = store.conn.execute("SELECT op, target FROM change_log WHERE kind = 'memory_node' ORDER BY seq").fetchall()
    assert [tuple(r) for r in rows] == [("insert", "ev_1"), ("insert", "ev_2"), ("update", "ev_2"), ("delete", "ev_1")]
    states = [zlib.decompress(r[0]) for r in store.conn.execute("SELECT state FROM change_states")]
    assert not any(b"hives" in state for state in states), "derived text is not kept in the log"
    assert verify(store.conn).ok
    store.conn.execute("UPDATE memory_nodes SET statement = 'edited' WHERE id = 'ev_2'")
    assert problems(store) == [("edited_outside", "ev_2", 6)]  # seq 6: its last logged update
    plan = rollback(store, "3", dry_run=True)
    assert plan.rebuild == ["memory_node"] and plan.restore == []


# --- history, checkpoints, diff, rollback --------------------------------------------------------


def test_history_lists_one_sources_versions_newest_first(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nsecond version\n")
    ingest_notes(store, [vault])
    versions = source_history(store.conn, str(vault / "alpha.md"))
    assert [c.op for c in versions] == ["update", "insert"]
    source_id = store.conn.execute("SELECT id FROM sources WHERE uri LIKE '%alpha.md'").fetchone()[0]
    assert source_history(store.conn, str(source_id)) == versions
    with pytest.raises(CMRAGError, match="no recorded history"):
        source_history(store.conn, "/nowhere.md")


def test_history_of_a_moved_note_goes_back_through_its_earlier_paths(capsys, store: Store, vault: Path) -> None:
    """It started at the rename, its earlier versions only under the old path, with nothing to say so."""
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nsecond version\n")
    ingest_notes(store, [vault])
    os.renames(vault / "alpha.md", vault / "daily" / "alpha.md")
    ingest_notes(store, [vault])
    os.renames(vault / "daily" / "alpha.md", vault / "alpha.md")  # and back: followed to its start, once
    ingest_notes(store, [vault])
    versions = source_history(store.conn, str(vault / "alpha.md"))
    steps = [(c.op, Path(c.target).parent.name, c.reason.split(" /")[0]) for c in versions]
    assert steps == [
        ("insert", "vault", "moved from"),
        ("delete", "daily", "moved to"),
        ("insert", "daily", "moved from"),
        ("delete", "vault", "moved to"),
        ("update", "vault", ""),
        ("insert", "vault", ""),
    ]
    assert versions[0].reason == f"moved from {vault / 'daily' / 'alpha.md'}"
    assert verify(store.conn).ok
    if store.backend == "sqlite":  # the CLI on the same file: the lines before a move name their path
        source_id = store.conn.execute("SELECT id FROM sources WHERE uri LIKE '%alpha.md'").fetchone()[0]
        code, out, _ = run(capsys, "history", str(source_id), "--db-path", str(store.path))
        assert code == 0 and out.count(f"(at {vault / 'daily' / 'alpha.md'})") == 2 and len(out.splitlines()) == 7


def test_rollback_restores_a_checkpoint_as_new_versions(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    checkpoint(store, "before-cleanup")
    write_note(vault, "alpha.md", "# Alpha\n\nrewritten by an agent\n")
    write_note(vault, "delta.md", "# Delta\n\nnew note\n")
    (vault / "beta.md").unlink()
    ingest_notes(store, [vault])
    changes = diff(store.conn, "before-cleanup")
    assert [Path(t).name for _, t in changes.added] == ["delta.md"]
    assert [Path(t).name for _, t in changes.removed] == ["beta.md"]
    assert [Path(t).name for _, t in changes.changed] == ["alpha.md"]

    head_before = versioning.head(store.conn)[0]
    plan = rollback(store, "before-cleanup", dry_run=True)
    assert versioning.head(store.conn)[0] == head_before and len(plan.restore) == 2 and len(plan.remove) == 1
    plan = rollback(store, "before-cleanup")
    assert plan.applied_seq == head_before + 3  # appended, never rewound
    texts = " ".join(row[0] for row in store.conn.execute("SELECT text FROM chunks"))
    assert (
        "Bees build" in texts and "Aardvarks eat ants" in texts and "rewritten" not in texts and "new note" not in texts
    )
    hits = search(store, "bees", SearchOptions()).hits
    assert len(hits) == 1 and "Bees build" in hits[0].text, "restored chunks are searchable"
    assert verify(store.conn).ok
    assert diff(store.conn, "before-cleanup").to_dict() | {"since": 0, "until": 0} == {
        "since": 0,
        "until": 0,
        "added": [],
        "removed": [],
        "changed": [],
    }


def test_rollback_runs_again_whole_when_the_server_aborts_it(monkeypatch, store: Store, vault: Path) -> None:
    """PostgreSQL aborts a transaction that collides with another client's: the rollback is planned and
    applied again from the start, and nothing of the aborted try is kept."""
    from crossmodalrag.errors import WriteConflict
    from crossmodalrag.versioning import history

    ingest_notes(store, [vault])
    checkpoint(store, "cp")
    write_note(vault, "alpha.md", "# Alpha\n\nrewritten by an agent\n")
    (vault / "beta.md").unlink()
    ingest_notes(store, [vault])
    head_before = versioning.head(store.conn)[0]
    restorer, calls = history._restorer, []

    def collides_once(kind: str):
        restore = restorer(kind)

        def restore_then_collide(*args):
            restore(*args)
            calls.append(kind)
            if len(calls) == 1:
                raise WriteConflict("PostgreSQL aborted a write that collided with another client's", "retry")

        return restore_then_collide

    monkeypatch.setattr(history, "_restorer", collides_once)
    plan = rollback(store, "cp")
    assert len(calls) == 3, "one restore in the aborted try, then both again"
    assert plan.applied_seq == head_before + 2, "the aborted try's records are gone"
    assert verify(store.conn).ok and not diff(store.conn, "cp").changed and not diff(store.conn, "cp").removed


def test_rollback_before_a_forget_restores_the_rest_and_leaves_the_forgotten_out(store: Store, vault: Path) -> None:
    """A forget refused every rollback to a point before it, even of a note deleted by mistake."""
    ingest_notes(store, [vault])
    checkpoint(store, "cp")
    (vault / "beta.md").unlink()
    ingest_notes(store, [vault])  # deleted by mistake
    forget_sources(store, find_sources(store, uri=str(vault / "alpha.md")))  # an unrelated forget
    assert rollback(store, "cp", dry_run=True).skipped_forgotten == [("source", str(vault / "alpha.md"))]
    plan = rollback(store, "cp")
    assert plan.restore == [("source", str(vault / "beta.md"))]
    assert plan.to_dict()["skipped_forgotten"] == [{"kind": "source", "target": str(vault / "alpha.md")}]
    uris = {row[0] for row in store.conn.execute("SELECT uri FROM sources")}
    assert uris == {str(vault / "beta.md"), str(vault / "gamma.md")}
    texts = " ".join(row[0] for row in store.conn.execute("SELECT text FROM chunks"))
    assert "Bees build" in texts and "Aardvarks" not in texts
    assert verify(store.conn).ok


def test_rollback_refuses_a_version_the_log_never_kept(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    checkpoint(store, "cp")
    store.conn.versioning = False  # CMRAG_VERSIONING=off: the version replaced is not kept
    write_note(vault, "alpha.md", "# Alpha\n\nchanged unrecorded\n")
    ingest_notes(store, [vault])
    store.conn.versioning = True
    versioning.changed(store.conn, "source", str(vault / "alpha.md"))  # as `mem verify --accept` records it
    before = versioning.head(store.conn)[0]
    with pytest.raises(CMRAGError, match="the log did not keep the content"):
        rollback(store, "cp")
    assert versioning.head(store.conn)[0] == before


def test_checkpoint_names_are_unique_and_not_points(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    checkpoint(store, "one")
    for bad in ("one", "now", "42", "", "2025-01-01", "2025-01-01T09:00", "x" * 101, "two\nlines"):
        with pytest.raises(CMRAGError):  # a date would hide the time it names from rollback, diff and --as-of
            checkpoint(store, bad)


def test_points_can_be_seqs_and_times(store: Store, vault: Path) -> None:
    ingest_notes(store, [vault])
    assert len(diff(store.conn, "0").added) == 3 and len(diff(store.conn, "1").added) == 2
    assert len(diff(store.conn, "2000-01-01T00:00").added) == 3
    with pytest.raises(CMRAGError, match="not a checkpoint, a seq or a time"):
        diff(store.conn, "yesterday-ish")
    with pytest.raises(CMRAGError, match="seq 99999 is not in the log yet"):
        diff(store.conn, "99999")


# --- as of -----------------------------------------------------------------------------------


def test_ask_as_of_answers_from_the_state_then(capsys, store: Store, vault: Path, settings) -> None:
    from crossmodalrag.answer.evidence import open_retriever
    from crossmodalrag.versioning.asof import as_of

    write_note(vault, "alpha.md", "# Alpha\n\nThe deploy key lives in vault one.\n")
    ingest_notes(store, [vault])
    checkpoint(store, "tuesday")
    write_note(vault, "alpha.md", "# Alpha\n\nThe deploy key moved to vault two.\n")
    write_note(vault, "delta.md", "# Delta\n\nThe deploy key is a lie.\n")
    ingest_notes(store, [vault])
    retriever = as_of(open_retriever(store, settings, lexical_only=True), "tuesday")
    texts = [hit.text for hit in retriever.search("deploy key vault").hits]
    assert any("vault one" in t for t in texts) and not any("vault two" in t or "a lie" in t for t in texts)
    assert any("as of seq 4" in notice for notice in retriever.notices)
    now = open_retriever(store, settings, lexical_only=True).search("deploy key vault").hits
    assert any("vault two" in hit.text for hit in now)
    code, out, err = run(capsys, "ask", "deploy key vault", "--no-llm", "--as-of", "tuesday", "--json")
    assert code == 0 and "vault one" in out and "vault two" not in out


def test_ask_as_of_judges_its_evidence_by_what_memory_held_then(store: Store, vault: Path, settings) -> None:
    """A question only a source added since answers: the gate read the live search's coverage (100%,
    from the new note) and answered from unrelated older notes."""
    from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
    from crossmodalrag.versioning.asof import as_of

    write_note(vault, "alpha.md", "# Alpha\n\nThe alpha project uses a zebracorn cache.\n")
    write_note(vault, "beta.md", "# Beta\n\nBeta runs nightly database jobs.\n")
    ingest_notes(store, [vault])
    checkpoint(store, "before")
    write_note(vault, "newer.md", "# Newer\n\nThe hedgehogsql database appeared later.\n")
    ingest_notes(store, [vault])
    retriever = as_of(open_retriever(store, settings, lexical_only=True), "before")
    then = retriever.search("hedgehogsql database")
    assert then.hits and not any("hedgehogsql" in hit.text for hit in then.hits)  # beta, by "database"
    assert then.coverage < 0.5  # not the 100% newer.md holds
    assert ask_without_llm(retriever, "hedgehogsql").abstained


def test_as_of_tells_a_version_never_kept_from_a_forgotten_one(store: Store, vault: Path, settings) -> None:
    """A change made with versioning off is not logged, so the version it replaced is not kept: as-of
    said such a source was "forgotten since"."""
    from crossmodalrag.answer.evidence import open_retriever
    from crossmodalrag.versioning.asof import as_of

    write_note(vault, "alpha.md", "# Alpha\n\nzebraxylophone one\n")
    ingest_notes(store, [vault])
    checkpoint(store, "then")
    store.conn.versioning = False  # CMRAG_VERSIONING=off, read once per connection
    write_note(vault, "alpha.md", "# Alpha\n\nzebraxylophone two\n")
    ingest_notes(store, [vault])
    store.conn.versioning = True
    write_note(vault, "alpha.md", "# Alpha\n\nzebraxylophone three\n")
    ingest_notes(store, [vault])
    notices = as_of(open_retriever(store, settings, lexical_only=True), "then").notices
    assert any("1 source held then, left out: the log did not keep that version" in n for n in notices)
    assert not any("forgotten" in n for n in notices)
    forget_sources(store, find_sources(store, uri=str(vault / "beta.md")))
    notices = as_of(open_retriever(store, settings, lexical_only=True), "then").notices
    assert any("1 source held then, forgotten since" in n for n in notices)


# --- forget ---------------------------------------------------------------------------------


def test_forget_erases_the_text_from_the_log_and_leaves_a_tombstone(store: Store, vault: Path) -> None:
    write_note(vault, "alpha.md", "# Alpha\n\nzebraxylophone one\n")
    ingest_notes(store, [vault])
    write_note(vault, "alpha.md", "# Alpha\n\nzebraxylophone two\n")
    ingest_notes(store, [vault])
    kept = [zlib.decompress(row[0]) for row in store.conn.execute("SELECT state FROM change_states")]
    assert [b"zebraxylophone one" in state for state in kept] == [True]  # the superseded version
    forget_sources(store, find_sources(store, uri=str(vault / "alpha.md")), vacuum=True)
    last = recent_changes(store.conn, 1)[0]
    assert (last.op, Path(last.target).name, last.reason) == ("forget", "alpha.md", "mem forget")
    assert versioning.is_erased(last.content_hash)  # a marker: the erased content's hash would confirm a guess
    states = [zlib.decompress(row[0]) for row in store.conn.execute("SELECT state FROM change_states")]
    assert not any(b"zebraxylophone" in s for s in states)
    assert verify(store.conn).ok
    if store.backend == "sqlite":  # PostgreSQL's files: VACUUM (FULL), tested in tests/store/test_postgres.py
        assert b"zebraxylophone" not in Path(store.path).read_bytes()
    ingest_notes(store, [vault])  # the file is still on disk: the next ingest brings it back, as a new insert
    assert ops(store)[-1] == ("insert", "alpha.md") and verify(store.conn).ok


# --- the CLI --------------------------------------------------------------------------------


def test_cli_log_history_checkpoint_diff_rollback_json(capsys, store: Store, vault: Path) -> None:
    assert main(["ingest-notes", str(vault)]) == 0
    code, out, _ = run(capsys, "checkpoint", "cp", "--json")
    assert code == 0 and json.loads(out) == {"name": "cp", "seq": 4}
    write_note(vault, "alpha.md", "# Alpha\n\nchanged\n")
    main(["ingest-notes", str(vault)])
    capsys.readouterr()
    code, out, _ = run(capsys, "log", "--limit", "2", "--json")
    changes = json.loads(out)["changes"]
    assert [c["op"] for c in changes] == ["update", "checkpoint"]
    assert set(changes[0]) == {"seq", "at", "op", "kind", "target", "actor", "content_hash", "reason"}
    code, out, _ = run(capsys, "log", "--source", str(vault / "beta.md"), "--json")
    assert [c["op"] for c in json.loads(out)["changes"]] == ["insert"]
    beta_id = store.conn.execute("SELECT id FROM sources WHERE uri = ?", (str(vault / "beta.md"),)).fetchone()[0]
    code, out, _ = run(capsys, "log", "--source", str(beta_id), "--json")  # named as `mem history` takes it
    assert [c["target"] for c in json.loads(out)["changes"]] == [str(vault / "beta.md")]
    code, out, err = run(capsys, "log", "--source", str(vault / "betta.md"))  # a typo is no empty log
    assert code == 1 and "error: no source" in err and "betta.md" in err and not out
    code, out, _ = run(capsys, "history", str(vault / "alpha.md"), "--json")
    history = json.loads(out)
    assert set(history) == {"source", "versions"} and [v["op"] for v in history["versions"]] == ["update", "insert"]
    code, out, _ = run(capsys, "diff", "cp", "--json")
    data = json.loads(out)
    assert set(data) == {"since", "until", "added", "removed", "changed"}
    assert data["changed"] == [{"kind": "source", "target": str(vault / "alpha.md")}]
    code, out, _ = run(capsys, "rollback", "cp", "--dry-run", "--json")
    data = json.loads(out)
    assert set(data) == {"point", "seq", "dry_run", "restore", "remove", "head_seq", "rebuild", "embedded"} | {
        "skipped_forgotten",
        "events_given_back",
        "without_events",
    }
    assert data["dry_run"] is True and data["head_seq"] is None and len(data["restore"]) == 1
    code, out, err = run(capsys, "rollback", "cp")
    assert code == 0 and "did restore 1" in err
    assert "the next `mem sync` or ingest of their folders reads them again and undoes this" in err
    code, _, err = run(capsys, "rollback", "no-such-point")
    assert code == 1 and err.startswith("error:") and "Traceback" not in err


def test_rollback_says_a_restored_note_whose_file_is_gone_leaves_again_at_the_next_ingest(
    capsys, store: Store, vault: Path
) -> None:
    """The notice said the next sync undoes a rollback "for every file that still exists": it removes a
    note whose file is gone again too, and the user must hear that and how to keep it."""
    assert main(["ingest-notes", str(vault)]) == 0
    run(capsys, "checkpoint", "cp")
    (vault / "beta.md").unlink()
    main(["ingest-notes", str(vault)])
    code, _, err = run(capsys, "rollback", "cp")
    assert code == 0 and "still exists" not in err
    assert f"the file of 1 restored source is gone ({vault / 'beta.md'})" in err and "put the file back" in err
    main(["ingest-notes", str(vault)])  # what the notice says happens
    assert (
        store.conn.execute("SELECT COUNT(*) FROM sources WHERE uri = ?", (str(vault / "beta.md"),)).fetchone()[0] == 0
    )


# --- backup and restore ---------------------------------------------------------------------


def test_backups_carry_the_log_and_restore_verifies(capsys, tmp_path: Path, db_path: Path, vault: Path) -> None:
    assert main(["ingest-notes", str(vault)]) == 0
    backup = tmp_path / "copy.db"
    assert main(["backup", str(backup)]) == 0
    code, out, _ = run(capsys, "restore", str(backup), "--force", "--json")
    data = json.loads(out)
    assert code == 0 and data["verify"]["ok"] is True and data["verify"]["records"] == 3

    conn = sqlite3.connect(backup)  # edited behind mem's back, then restored
    conn.execute("UPDATE chunks SET text = 'planted' WHERE id = 1")
    conn.commit()
    conn.close()
    Path(f"{backup}.sha256").unlink()
    code, out, err = run(capsys, "restore", str(backup), "--force")
    assert code == 1 and "change log does not match its rows" in err and "nothing was restored" in err
    assert json.loads(run(capsys, "ask", "planted", "--no-llm", "--json")[1])["evidence"] == []


@pytest.fixture
def store(any_store):  # the tests taking a store run on SQLite and on PostgreSQL (issue 16)
    return any_store


@pytest.mark.parametrize("given", ["99999999999999999999999", "mem://source/99999999999999999999999", "²"])
def test_a_number_no_row_id_can_be_is_a_name_that_names_nothing(store: Store, given: str) -> None:
    from crossmodalrag.versioning.history import resolve_source

    assert resolve_source(store.conn, given) == given.removeprefix("mem://source/")  # no OverflowError, no int("²")
    with pytest.raises(CMRAGError, match="no recorded history"):
        source_history(store.conn, given)


def test_rollback_never_gives_the_note_now_at_a_path_the_text_of_the_one_there_before(any_store, tmp_path) -> None:
    """plans.md deleted, a new note written there, a rollback: the newer note's id must not open the older
    text (SQLite gives the older note its own id back: tests/store/test_ids.py; PostgreSQL a new one)."""
    vault = tmp_path / "vault"
    plans = write_note(vault, "plans.md", "# Plans\nWe chose the narwhal scheduler.\n")
    ingest_notes(any_store, [vault])
    checkpoint(any_store, "before")
    plans.unlink()
    ingest_notes(any_store, [vault])
    write_note(vault, "plans.md", "# New plans\nsomething else\n")
    ingest_notes(any_store, [vault])
    newer_id = any_store.conn.execute("SELECT id FROM sources WHERE uri = ?", (str(plans),)).fetchone()[0]
    rollback(any_store, "before")
    rows = {row[0]: row[1] for row in any_store.conn.execute("SELECT id, title FROM sources")}
    assert list(rows.values()) == ["Plans"] and newer_id not in rows
    assert verify(any_store.conn).ok
