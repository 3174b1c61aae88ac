"""`mem sync --watch`: real file operations on real folders, the store polled until it reflects each one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.store import open_store
from crossmodalrag.watch import WatchEvent, watch
from crossmodalrag.watch_targets import Target, _Handler, _Pending
from tests.conftest import commit_files, git, write_note
from tests.pdfs import write_pdf

TIMEOUT = 15.0


@pytest.fixture(autouse=True)
def no_file_connectors(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("PDF_PATH", "IMAGE_PATH")):
            monkeypatch.delenv(key)


def source_uris(db_path: Path) -> set[str]:
    if not db_path.exists():
        return set()
    try:
        with sqlite3.connect(db_path, timeout=10) as conn:
            return {uri for (uri,) in conn.execute("SELECT uri FROM sources")}
    except sqlite3.OperationalError:  # a `mem` subprocess has created the file but not its tables yet
        return set()


def chunk_text(db_path: Path, uri: str) -> str:
    with sqlite3.connect(db_path, timeout=10) as conn:
        rows = conn.execute(
            "SELECT c.text FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.uri = ? ORDER BY c.chunk_index",
            (uri,),
        )
        return "\n".join(text for (text,) in rows)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll until condition holds; fail after TIMEOUT seconds (no timing is asserted)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for: {what}")


@contextmanager
def watching(settings: Settings, **options) -> Iterator[list[WatchEvent]]:
    """The watch loop in a thread (with its own store connection); yields the events it reports."""
    events: list[WatchEvent] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def loop() -> None:
        try:
            with open_store(settings.db_path) as store:
                watch(store, settings, stop, notify=events.append, debounce=0.3, poll=0.3, **options)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            failure.append(error)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield events
    finally:
        stop.set()
        thread.join(timeout=TIMEOUT)
    assert not thread.is_alive(), "the watch loop did not stop"
    if failure:
        raise failure[0]


def test_a_vault_follows_creates_edits_renames_deletes_and_its_own_disappearance(tmp_path, db_path):
    vault = tmp_path / "vault"
    write_note(vault, "first.md", "# First\nAlready here before the watch.\n")
    settings = Settings(db_path=db_path, notes_paths=[vault])
    uri = lambda name: str(vault / name)  # noqa: E731

    with watching(settings) as events:
        wait_for(lambda: uri("first.md") in source_uris(db_path), "the initial sync")

        write_note(vault, "idea.md", "# Idea\nA parser built on a tokenizer.\n")
        wait_for(lambda: uri("idea.md") in source_uris(db_path), "a new note")

        with (vault / "idea.md").open("a", encoding="utf-8") as handle:  # editors write in several steps
            for word in ("Then", " a", " lexer", " generator.\n"):
                handle.write(word)
                handle.flush()
        wait_for(lambda: "lexer generator" in chunk_text(db_path, uri("idea.md")), "the edit")

        (vault / "idea.md").rename(vault / "plan.md")
        wait_for(lambda: source_uris(db_path) == {uri("first.md"), uri("plan.md")}, "the rename")

        (vault / "plan.md").unlink()
        wait_for(lambda: source_uris(db_path) == {uri("first.md")}, "the deletion")

        write_note(vault, ".obsidian/workspace.json", "{}")  # vault noise: not a change
        (vault / "scratch.txt").write_text("not a note", encoding="utf-8")

        shutil.rmtree(vault)
        wait_for(lambda: any(event.kind == "missing" for event in events), "the vanished vault to be reported")
        assert source_uris(db_path) == {uri("first.md")}  # a vanished root is not 'delete everything'

        write_note(vault, "back.md", "# Back\nThe vault returned.\n")
        wait_for(lambda: source_uris(db_path) == {uri("back.md")}, "the recreated vault")

        write_note(vault, "first.md", "# First\nWritten again after the return.\n")
        wait_for(lambda: uri("first.md") in source_uris(db_path), "a note in the re-armed vault")

        shutil.rmtree(vault)  # replaced faster than a poll: the observer on the old folder is dead
        write_note(vault, "swift.md", "# Swift\nA new folder at the same path.\n")
        wait_for(lambda: source_uris(db_path) == {uri("swift.md")}, "the replaced vault")
        write_note(vault, "after.md", "# After\nSeen by the re-armed observer.\n")
        wait_for(lambda: uri("after.md") in source_uris(db_path), "a note in the replaced vault")

    assert [event.kind for event in events].count("missing") == 1  # reported once, not every poll
    assert any(event.kind == "returned" for event in events)
    synced = [event for event in events if event.kind == "synced"]
    assert all(not event.report.failures for event in synced)


def test_an_edit_to_a_linked_note_outside_the_vault_is_seen(tmp_path, db_path):
    vault, outside = tmp_path / "vault", write_note(tmp_path / "ext", "t.md", "# Ext\nFirst version.\n")
    write_note(vault, "a.md", "# A\nA note.\n")
    (vault / "link.md").symlink_to(outside)
    settings = Settings(db_path=db_path, notes_paths=[vault])
    with watching(settings):
        wait_for(lambda: str(vault / "link.md") in source_uris(db_path), "the initial sync")
        outside.write_text("# Ext\nSecond version.\n", encoding="utf-8")
        wait_for(lambda: "Second version" in chunk_text(db_path, str(vault / "link.md")), "the edit outside the vault")
        (vault / "later.md").symlink_to(write_note(tmp_path / "ext2", "u.md", "# U\nLinked later.\n"))
        wait_for(lambda: str(vault / "later.md") in source_uris(db_path), "a link added while watching")
        (tmp_path / "ext2" / "u.md").write_text("# U\nEdited after.\n", encoding="utf-8")
        wait_for(lambda: "Edited after" in chunk_text(db_path, str(vault / "later.md")), "its target's edit")


def test_a_vault_missing_at_start_is_reported_once_and_picked_up_when_it_appears(tmp_path, db_path):
    vault = tmp_path / "later"
    settings = Settings(db_path=db_path, notes_paths=[vault])
    with watching(settings) as events:
        wait_for(lambda: any(event.kind == "missing" for event in events), "the missing vault to be reported")
        time.sleep(1)  # several polls: still one report
        write_note(vault, "note.md", "# Note\nThe vault exists now.\n")
        wait_for(lambda: str(vault / "note.md") in source_uris(db_path), "the appeared vault's note")
    assert [event.kind for event in events].count("missing") == 1


def test_a_commit_or_a_new_branch_re_ingests_the_repository(repo, tmp_path, db_path):
    commit_files(repo, {"a.py": "x = 1\n"}, "First commit")
    settings = Settings(db_path=db_path, git_paths=[repo])
    with watching(settings):
        wait_for(lambda: len(source_uris(db_path)) == 1, "the initial commit")
        sha = commit_files(repo, {"a.py": "x = 2\n"}, "Second commit")
        wait_for(lambda: f"{repo}@{sha}" in source_uris(db_path), "the new commit")
        git(repo, "checkout", "-q", "-b", "topic")
        sha = commit_files(repo, {"b.py": "y = 1\n"}, "A commit on a new branch")
        wait_for(lambda: f"{repo}@{sha}" in source_uris(db_path), "the new branch's commit")
        (repo / "scratch.py").write_text("untracked\n", encoding="utf-8")  # working tree noise only
    assert len(source_uris(db_path)) == 3


def test_pdfs_are_read_one_by_one_and_removed_when_deleted(tmp_path, db_path):
    pytest.importorskip("pypdfium2")
    papers = tmp_path / "papers"
    write_pdf(papers / "kept.pdf", ["A paper that stays."])
    settings = Settings(db_path=db_path, pdf_paths=[papers])
    with watching(settings, only=("pdf",)) as events:
        wait_for(lambda: str(papers / "kept.pdf") in source_uris(db_path), "the initial PDF")
        write_pdf(papers / "deep" / "new.pdf", ["Rate limits are 100 requests per minute."])
        wait_for(lambda: str(papers / "deep" / "new.pdf") in source_uris(db_path), "a new PDF in a new folder")
        shutil.rmtree(papers / "deep")
        wait_for(lambda: source_uris(db_path) == {str(papers / "kept.pdf")}, "the deleted folder's PDF to leave")
    synced = [event.report for event in events if event.kind == "synced" and event.report.added]
    assert synced and all(report.unchanged == 0 for report in synced)  # kept.pdf was never re-read


def test_the_cli_watch_applies_changes_and_stops_cleanly_on_ctrl_c(tmp_path, isolated_env, db_path):
    vault = tmp_path / "vault"
    write_note(vault, "first.md", "# First\nHello.\n")
    (isolated_env / ".env").write_text(f"OBSIDIAN_VAULT_PATH_1={vault}\n", encoding="utf-8")
    # A background job may inherit an ignored SIGINT; the watcher must see Ctrl-C as a terminal would send it.
    process = subprocess.Popen(
        [sys.executable, "-m", "crossmodalrag", "sync", "--watch", "--json", "--debounce", "0.3"],
        cwd=isolated_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        wait_for(lambda: str(vault / "first.md") in source_uris(db_path), "the initial sync")
        write_note(vault, "second.md", "# Second\nAdded while watching.\n")
        wait_for(lambda: str(vault / "second.md") in source_uris(db_path), "the watched change")
        time.sleep(0.5)  # let the change's JSON line be written
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0 and "Traceback" not in err
    assert "watching notes" in err and "stopped watching" in err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["event"] == "initial" and lines[0]["connectors"]["notes"]["added"] == 1
    assert any(line["event"] == "synced" and line["added"] == 1 for line in lines[1:])


def test_sigterm_stops_the_cli_watch_cleanly(tmp_path, isolated_env, db_path):
    vault = tmp_path / "vault"
    write_note(vault, "first.md", "# First\nHello.\n")
    (isolated_env / ".env").write_text(f"OBSIDIAN_VAULT_PATH_1={vault}\n", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "crossmodalrag", "sync", "--watch"],
        cwd=isolated_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: str(vault / "first.md") in source_uris(db_path), "the initial sync")
        time.sleep(0.5)
        process.terminate()
        _, err = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0 and "stopped watching" in err and "Traceback" not in err


def test_ctrl_c_in_the_watch_loop_exits_0(capsys, monkeypatch, tmp_path):
    from crossmodalrag import watch as watch_module

    def interrupted(self, stop):
        raise KeyboardInterrupt

    monkeypatch.setattr(watch_module.Watcher, "run", interrupted)
    write_note(tmp_path / "vault", "a.md", "# A\nText.\n")
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(tmp_path / "vault"))
    assert main(["sync", "--watch"]) == 0
    err = capsys.readouterr().err
    assert "stopped watching" in err and "error:" not in err


def test_ctrl_c_applies_the_changes_still_waiting_out_the_debounce(capsys, monkeypatch, tmp_path, db_path):
    from crossmodalrag import watch as watch_module

    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\nText.\n")

    def saved_then_interrupted(self, stop):  # a save, then Ctrl-C before the debounce is over
        self.pending.add(self.targets[0], [write_note(vault, "late.md", "# Late\nLate text.\n")])
        raise KeyboardInterrupt

    monkeypatch.setattr(watch_module.Watcher, "run", saved_then_interrupted)
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    assert main(["sync", "--watch"]) == 0
    err = capsys.readouterr().err
    assert "applying 1 pending change before stopping" in err and "stopped watching" in err
    assert str(vault.resolve() / "late.md") in source_uris(db_path)


def test_a_second_ctrl_c_skips_the_pending_changes_and_says_how_many(capsys, monkeypatch, tmp_path):
    from crossmodalrag import watch as watch_module

    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\nText.\n")

    def saved_then_interrupted(self, stop):
        self.pending.add(self.targets[0], [vault / "b.md", vault / "c.md"])
        raise KeyboardInterrupt

    def interrupted(self, target, paths):
        raise KeyboardInterrupt

    monkeypatch.setattr(watch_module.Watcher, "run", saved_then_interrupted)
    monkeypatch.setattr(watch_module.Watcher, "_apply", interrupted)
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    assert main(["sync", "--watch"]) == 0
    err = capsys.readouterr().err
    assert "2 changes not applied; the next `mem sync` picks them up" in err and "stopped watching" in err


def test_a_second_ctrl_c_while_embedding_says_the_changes_are_stored_not_that_they_were_skipped(
    capsys, monkeypatch, tmp_path, db_path
):
    from crossmodalrag import watch as watch_module
    from crossmodalrag.cli import sync as sync_cli

    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\nText.\n")
    embeds: list[int] = []

    def saved_then_interrupted(self, stop):
        self.pending.add(self.targets[0], [write_note(vault, "late.md", "# Late\nLate text.\n")])
        raise KeyboardInterrupt

    def embedding_interrupted(self):  # the first sync's embedding runs; the one while stopping is cut short
        embeds.append(1)
        if len(embeds) > 1:
            raise KeyboardInterrupt
        return 0

    monkeypatch.setattr(watch_module.Watcher, "run", saved_then_interrupted)
    monkeypatch.setattr(sync_cli.WatchLines, "embed", embedding_interrupted)
    monkeypatch.setattr(watch_module.Watcher, "_arm", lambda self, target: True)  # no observer re-adding late.md
    monkeypatch.setattr("crossmodalrag.index.embeddings.has_unembedded", lambda store: True)
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    assert main(["sync", "--watch"]) == 0
    err = capsys.readouterr().err
    assert len(embeds) == 2 and "not applied" not in err
    assert "changes stored but not embedded yet; the next `mem sync` (or `mem reindex-embeddings`) embeds them" in err
    assert str(vault.resolve() / "late.md") in source_uris(db_path)


def test_an_unreadable_note_the_first_sync_reported_is_not_repeated_by_the_next_batch(capsys, monkeypatch, tmp_path):
    """Each save of another note said again every unreadable file of the vault the first sync had named."""
    from crossmodalrag import watch as watch_module

    vault = tmp_path / "vault"
    write_note(vault, "a.md", "# A\nText.\n")
    write_note(vault, "bad.md", b"# Bad\ncaf\xc3\xa9, damaged: caf\xe9\n")

    def saved(self, stop):
        self.pending.add(self.targets[0], [write_note(vault, "a.md", "# A\nText, edited.\n")])

    monkeypatch.setattr(watch_module.Watcher, "run", saved)
    monkeypatch.setattr(watch_module.Watcher, "_arm", lambda self, target: True)  # no observer adding a.md again
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    assert main(["sync", "--watch"]) == 0
    err = capsys.readouterr().err
    assert err.count("bad.md: not valid UTF-8") == 1 and "0 added, 1 updated" in err


def test_watch_json_events_carry_the_keys_docs_json_contract_lists(tmp_path):
    from crossmodalrag.ingest import IngestReport

    counts = {"added", "updated", "unchanged", "removed", "moved", "empty", "failed", "chunks", "failures", "notices"}
    synced = WatchEvent("synced", "notes", tmp_path, IngestReport(updated=1)).to_dict()
    assert set(synced) == {"event", "connector", "root", "message"} | counts
    assert set(WatchEvent("missing", "pdf", tmp_path, message="not found").to_dict()) == {
        "event", "connector", "root", "message"
    }  # fmt: skip


def test_watch_with_nothing_configured_is_an_error(capsys):
    assert main(["sync", "--watch"]) == 1
    assert capsys.readouterr().err.startswith("error: nothing to sync")


def test_debounce_must_be_a_positive_number_of_seconds(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sync", "--watch", "--debounce", "0"])
    assert exit_info.value.code == 2


# Which events matter: decided without a filesystem.


def event(kind: str, src: str, dest: str = "", is_directory: bool = False) -> SimpleNamespace:
    return SimpleNamespace(event_type=kind, src_path=src, dest_path=dest, is_directory=is_directory)


def test_notes_ignore_noise_hidden_files_other_suffixes_and_reads(tmp_path):
    root = tmp_path / "vault"
    target, pending = Target("notes", root), _Pending()
    handler = _Handler(target, pending)
    for ignored in (
        event("modified", f"{root}/.obsidian/workspace.json"),
        event("created", f"{root}/.note.md.swp"),
        event("created", f"{root}/4913"),
        event("modified", f"{root}/node_modules/x.md"),
        event("opened", f"{root}/note.md"),  # our own ingest reads notes: reading is no change
        event("closed_no_write", f"{root}/note.md"),
        event("modified", f"{root}/sub", is_directory=True),
        event("created", f"{tmp_path}/elsewhere.md"),
    ):
        handler.dispatch(ignored)
    assert pending.take(0, 0) == {}
    handler.dispatch(event("moved", f"{root}/draft.txt", f"{root}/Draft.MD"))
    handler.dispatch(event("deleted", f"{root}/old", is_directory=True))
    assert pending.take(0, 0) == {target: {root / "Draft.MD", root / "old"}}


def test_git_changes_matter_only_in_refs_and_head(tmp_path):
    git_dir = tmp_path / "repo" / ".git"
    target = Target("git", tmp_path / "repo", watched=git_dir)
    assert target.relevant(git_dir / "refs" / "heads" / "main", False)
    assert target.relevant(git_dir / "HEAD", False) and target.relevant(git_dir / "packed-refs", False)
    assert not target.relevant(git_dir / "objects" / "ab" / "cdef", False)
    assert not target.relevant(git_dir / "index", False)
    assert not target.relevant(tmp_path / "repo" / "a.py", False)


def test_images_and_a_single_pdf_match_only_their_own_files(tmp_path):
    images = Target("image", tmp_path / "shots")
    assert images.relevant(tmp_path / "shots" / "a.PNG", False) and images.relevant(tmp_path / "shots" / "d", True)
    assert not images.relevant(tmp_path / "shots" / "a.pdf", False)
    single = Target("pdf", tmp_path / "spec.pdf", single_file=True)
    assert single.relevant(tmp_path / "spec.pdf", False) and not single.relevant(tmp_path / "other.pdf", False)


def test_pending_changes_wait_for_quiet_but_not_forever(tmp_path, monkeypatch):
    from crossmodalrag import watch_targets

    clock = [100.0]
    monkeypatch.setattr(watch_targets.time, "monotonic", lambda: clock[0])
    target, pending = Target("notes", tmp_path), _Pending()
    pending.add(target, [tmp_path / "a.md"])
    clock[0] += 0.2
    pending.add(target, [tmp_path / "a.md", tmp_path / "b.md"])
    assert pending.take(debounce=0.5, longest=3) == {}  # still in the burst
    clock[0] += 0.5
    assert pending.take(debounce=0.5, longest=3) == {target: {tmp_path / "a.md", tmp_path / "b.md"}}
    assert pending.take(debounce=0.5, longest=3) == {}
    for _ in range(10):  # writes that never pause are applied anyway
        pending.add(target, [tmp_path / "c.md"])
        clock[0] += 0.4
    assert pending.take(debounce=0.5, longest=3) == {target: {tmp_path / "c.md"}}


def missing_pdf_extra(monkeypatch) -> None:
    from crossmodalrag.connectors import pdf
    from crossmodalrag.errors import MissingExtraError

    def missing(*args, **kwargs):
        raise MissingExtraError("PDF support is not installed", 'pip install -e ".[pdf]"')

    monkeypatch.setattr(pdf, "extractor_version_or_raise", missing)


def test_a_connector_without_its_extra_is_not_watched_and_says_so(monkeypatch, store, tmp_path):
    from crossmodalrag.watch import Watcher

    missing_pdf_extra(monkeypatch)
    (tmp_path / "vault").mkdir()
    (tmp_path / "papers").mkdir()
    settings = Settings(db_path=store.path, notes_paths=[tmp_path / "vault"], pdf_paths=[tmp_path / "papers"])
    events: list[WatchEvent] = []
    with Watcher(store, settings, notify=events.append) as watcher:
        assert [target.connector for target in watcher.targets] == ["notes"]
        assert watcher.targets[0].observer is not None
    assert [(event.kind, event.connector) for event in events] == [("skipped", "pdf")]
    assert "pip install" in events[0].message and events[0].to_dict()["root"] is None
    assert watcher.targets[0].observer is None  # stopped on the way out


def test_watching_only_skipped_connectors_is_an_error(capsys, monkeypatch, tmp_path):
    missing_pdf_extra(monkeypatch)
    (tmp_path / "papers").mkdir()
    monkeypatch.setenv("PDF_PATH_1", str(tmp_path / "papers"))
    assert main(["sync", "--watch", "--only", "pdf"]) == 1
    err = capsys.readouterr().err
    assert "note: pdf skipped" in err and err.splitlines()[-1].startswith("error: nothing to watch")
