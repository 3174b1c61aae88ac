"""Events of a note that moved: re-anchored and found under its new path, given back after a rollback,
dated by the section that says them; and the events of a chat export's file named by its path."""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.cli.main import main
from crossmodalrag.memory.events import list_events
from crossmodalrag.store import open_store
from tests.conftest import write_note
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output

MARTA = (
    "# Marta Kowalski\n\n## 2026-06-22\nData engineer at Acme Logistics. Works on their route optimiser.\n\n"
    "## 2026-10-06\nLeft Acme. Now staff engineer at Globex Energy (grid forecasting team).\n"
)
LEFT = "Marta left Acme to become a staff engineer at Globex Energy."
OCT_6 = 1_791_244_800.0  # 2026-10-06, UTC midnight


def _ingest(vault: Path, db_path: Path) -> None:
    assert main(["ingest-notes", str(vault), "--db-path", str(db_path)]) == 0


def _extracted(tmp_path: Path, db_path: Path) -> Path:
    """A person note whose one event cites both sections, the older first, drawn by a scripted model."""
    vault = tmp_path / "vault"
    write_note(vault, "Marta Kowalski.md", MARTA)
    _ingest(vault, db_path)
    with open_store(db_path) as store:
        build(store, db_path, llm=ScriptedExtractor(events_output(event(LEFT, [1, 2], "change"))), levels=("event",))
    return vault


def _evidence(store) -> list[tuple]:
    (found,) = list_events(store)
    return [(e["locator"], e["role"], e["score"]) for e in found["evidence"]]


def test_an_event_is_dated_by_the_section_that_says_it_not_the_earliest_it_cites(db_path, tmp_path) -> None:
    _extracted(tmp_path, db_path)
    with open_store(db_path) as store:
        (found,) = list_events(store)
        first = store.conn.execute("SELECT first_time FROM memory_nodes WHERE level = 'event'").fetchone()[0]
    assert found["evidence"][0]["locator"].endswith("#2026-10-06")  # the best-supporting cited section
    assert first == OCT_6 and found["first_time"].startswith("2026-10-06")


def test_a_renamed_note_is_reanchored_not_waiting_and_its_events_are_found_by_its_new_path_and_id(
    db_path, tmp_path
) -> None:
    vault = _extracted(tmp_path, db_path)
    with open_store(db_path) as store:
        before = _evidence(store)
    (vault / "Marta Kowalski.md").rename(vault / "Marta K.md")
    _ingest(vault, db_path)
    with open_store(db_path) as store:
        report = build(store, db_path, levels=("event",)).levels["event"]  # no model
        assert report["reanchored"] == 1 and report["waiting"] == 0 and report["waiting_sources"] == []
        new = str(vault.resolve() / "Marta K.md")
        source_id = store.conn.execute("SELECT id FROM sources WHERE uri = ?", (new,)).fetchone()[0]
        for given in (new, str(source_id)):
            assert [(e["statement"], e["source_uri"]) for e in list_events(store, given)] == [(LEFT, new)]
        after = _evidence(store)
    assert [(role, score) for _, role, score in after] == [(role, score) for _, role, score in before]
    assert before[0][2] is not None and after[0][0] == "Marta K.md#2026-10-06"


def _renamed_after_a_checkpoint(tmp_path, db_path) -> tuple[Path, list[str]]:
    """The extracted vault, checkpointed as `before-rename`, then its note renamed, ingested and built
    again; with the --db-path arguments for the commands that follow."""
    vault = _extracted(tmp_path, db_path)
    db = ["--db-path", str(db_path)]
    assert main(["checkpoint", "before-rename", *db]) == 0
    (vault / "Marta Kowalski.md").rename(vault / "Marta K.md")
    _ingest(vault, db_path)
    with open_store(db_path) as store:
        build(store, db_path, levels=("event",))
    return vault, db


def test_a_rollback_across_a_rename_gives_the_note_its_events_back(db_path, tmp_path) -> None:
    vault, db = _renamed_after_a_checkpoint(tmp_path, db_path)
    assert main(["rollback", "before-rename", *db]) == 0
    with open_store(db_path) as store:
        report = build(store, db_path, levels=("event",)).levels["event"]  # no model
        assert report["removed_orphans"] == [] and report["waiting"] == 0
        (found,) = list_events(store, str(vault.resolve() / "Marta Kowalski.md"))
        assert found["statement"] == LEFT and found["supported"] and found["evidence"]
        assert build(store, db_path, levels=("event",)).levels["event"]["unchanged"] == 1  # settled


def test_the_rollback_itself_gives_the_events_back_without_waiting_for_a_build(capsys, db_path, tmp_path) -> None:
    """Until the next build-memory, `mem events --source` found nothing and memory-stats said "no events drawn"."""
    import json

    from crossmodalrag.memory.stats import not_extracted_sources

    vault, db = _renamed_after_a_checkpoint(tmp_path, db_path)
    capsys.readouterr()
    assert main(["rollback", "before-rename", "--json", *db]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["events_given_back"] == 1 and done["without_events"] == []
    with open_store(db_path) as store:
        (found,) = list_events(store, str(vault.resolve() / "Marta Kowalski.md"))
        assert found["statement"] == LEFT and found["evidence"]
        assert not_extracted_sources(store.conn) == []


def test_a_commit_a_rollback_brings_back_gets_its_events_back_at_once(capsys, repo, db_path) -> None:
    """A commit dropped by a rewritten history: its events (drawn without a model) keep no chunk texts."""
    import json

    from tests.conftest import commit_files, git

    commit_files(repo, {"a.txt": "a\n"}, "Add tokenizer skeleton")
    sha = commit_files(repo, {"b.txt": "b\n"}, "Switch parser to streaming tokens")
    db = ["--db-path", str(db_path)]
    assert main(["ingest-git", str(repo), *db]) == 0
    with open_store(db_path) as store:
        build(store, db_path, levels=("event",))  # commits need no model
    assert main(["checkpoint", "before-rewrite", *db]) == 0
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert main(["ingest-git", str(repo), *db]) == 0
    capsys.readouterr()
    assert main(["rollback", "before-rewrite", "--json", *db]) == 0
    assert json.loads(capsys.readouterr().out)["events_given_back"] == 1
    with open_store(db_path) as store:
        (found,) = list_events(store, f"{repo.resolve()}@{sha}")
        assert found["statement"] == "Switch parser to streaming tokens" and found["evidence"]


def test_a_chat_exports_file_path_names_all_its_sessions(store, db_path, tmp_path) -> None:
    from crossmodalrag.connectors.chats import Session, Turn, session_document

    export = tmp_path / "claude-code" / "short.jsonl"
    sessions = [
        Session(key, key, "claude-code", [Turn("user", text, "1")], timestamp=1_735_689_600.0)
        for key, text in (("s1", "We decided to pin numpy below 2."), ("s2", "We fixed the flaky login test."))
    ]
    add_docs(store, *(session_document(export, session) for session in sessions))
    llm = ScriptedExtractor({"user": [event("The user pinned numpy below 2.")]})
    build(store, db_path, llm=llm, levels=("event",))
    found = list_events(store, str(export))
    assert len(found) == 2 and {e["source_uri"] for e in found} == {f"{export}@s1", f"{export}@s2"}
