"""`mem forget`: a source leaves completely (rows, FTS, vectors, caches), and with --vacuum its bytes too."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.evals.queries import EvalQuery, upsert_queries
from crossmodalrag.forget import find_sources, forget_sources, still_in_memory
from crossmodalrag.index.embeddings import cached_vectors, embed_missing, vectors_stamp
from crossmodalrag.ingest import ingest_git, ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.semantic import SemanticIndex
from crossmodalrag.store import open_store
from crossmodalrag.store.params import MAX_BOUND
from crossmodalrag.versioning.verify import verify
from tests.conftest import commit_files, same_commit_in_two_repos, write_note
from tests.fakes import HashingEmbedder
from tests.test_privacy import database_bytes

MARKER = "quokkamarmalade"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write_note(root, "keep.md", "# Keep\nThe aardvark stays in memory.\n")
    write_note(root, "secret/gone.md", f"# Gone\nThe {MARKER} recipe.\n\n## More\n{MARKER} again, twice {MARKER}.\n")
    write_note(root, "secret/also.md", "# Also\nAnother note in the folder.\n")
    return root


def ingest(vault: Path, db_path: Path) -> None:
    """Through the library: the CLI would also try to load an embedding model."""
    with open_store(db_path) as store:
        assert not ingest_notes(store, [vault]).failures


def counts(db_path: Path) -> dict[str, int]:
    with sqlite3.connect(db_path) as conn:
        return {
            table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("sources", "chunks", "chunks_fts", "chunk_vectors")
        }


def fts_terms(db_path: Path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, chunks_fts, row)")
        return {row[0] for row in conn.execute("SELECT term FROM temp.terms")}


def embed(db_path: Path) -> HashingEmbedder:
    """Vectors for every chunk, plus the memory-mapped cache a query would build beside the database."""
    embedder = HashingEmbedder()
    with open_store(db_path) as store:
        embed_missing(store, embedder)
        cached_vectors(store, embedder.identity, vectors_stamp(store, embedder.identity))
    return embedder


# --- what goes --------------------------------------------------------------------------------


def test_forget_by_uri_removes_everything_derived_and_nothing_else(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    embed(db_path)
    assert Path(f"{db_path}.vectors").is_dir()
    before = counts(db_path)
    gone = str(vault / "secret/gone.md")
    code, out, err = run(capsys, "forget", gone, "--yes")
    assert code == 0 and out.strip() == gone
    assert "forgot 1 source (2 chunks, 2 vectors)" in err
    assert "--vacuum" not in err  # freed space zeroed, the write-ahead log emptied: nothing left to wipe
    after = counts(db_path)
    assert after == {"sources": before["sources"] - 1, **{t: before[t] - 2 for t in after if t != "sources"}}
    assert MARKER not in fts_terms(db_path) and "aardvark" in fts_terms(db_path)
    assert not Path(f"{db_path}.vectors").exists()  # the derived copy of the vectors went too
    with open_store(db_path) as store:
        assert search(store, MARKER, SearchOptions()).hits == []
        assert search(store, "aardvark", SearchOptions()).hits


def test_forgotten_chunks_leave_no_usage_rows_for_a_later_chunk_to_inherit(capsys, vault, db_path) -> None:
    """Usage is logged by chunk id, and SQLite gives a new chunk the highest free id: a rating of a
    forgotten chunk must go with it (erasure), not pass to the next note stored."""
    from crossmodalrag.memory.usage import chunk_target, record

    ingest(vault, db_path)
    gone = str(vault / "secret/gone.md")
    with open_store(db_path) as store:
        ids = [
            row[0]
            for row in store.conn.execute(
                "SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id WHERE s.uri = ?", (gone,)
            )
        ]
        kept = store.conn.execute("SELECT MIN(id) FROM chunks").fetchone()[0]
        record(store, [chunk_target(i) for i in [*ids, kept]], "feedback_down")
    assert run(capsys, "forget", gone, "--yes")[0] == 0
    with open_store(db_path) as store:
        left = {row[0] for row in store.conn.execute("SELECT target_id FROM memory_usage")}
    assert left == {chunk_target(kept)}


def test_the_semantic_index_stops_serving_forgotten_vectors(vault, db_path) -> None:
    embedder = embed_and_ingest(vault, db_path)
    with open_store(db_path) as store:
        index = SemanticIndex(store, embedder, Settings(db_path=db_path))
        hits = search(store, f"{MARKER} recipe", SearchOptions(), index).hits
        assert hits[0].source_uri.endswith("gone.md")
        forget_sources(store, find_sources(store, uri=str(vault / "secret/gone.md")))
        hits = search(store, f"{MARKER} recipe", SearchOptions(), index).hits  # the same, long-lived index
        assert all(not h.source_uri.endswith("gone.md") for h in hits)


def embed_and_ingest(vault: Path, db_path: Path) -> HashingEmbedder:
    ingest(vault, db_path)
    return embed(db_path)


def test_forget_a_folder_by_path(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    code, out, err = run(capsys, "forget", "--path", str(vault / "secret"), "--yes", "--json")
    data = json.loads(out)
    assert code == 0 and data["sources"] == 2 and data["vacuumed"] is False
    assert {s["uri"] for s in data["forgotten"]} == {str(vault / "secret/gone.md"), str(vault / "secret/also.md")}
    assert set(data) == {"forgotten", "sources", "earlier_paths", "sub_agent_sessions", "chunks", "vectors",
                         "memory_nodes", "stranded_events", "vacuumed", "eval_queries_naming_them", "still_on_disk",
                         "backups", "backup_paths", "unfinished_copies", "live_copies",
                         "bytes_may_remain", "vacuum_by_owner"}  # fmt: skip
    assert data["vacuum_by_owner"] is None  # only PostgreSQL's tables have an owner other than the user
    assert counts(db_path)["sources"] == 1


def test_forget_takes_path_repeatedly(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    # `--path A --path B` forgot only B and said nothing about A
    code, out, _ = run(capsys, "forget", "--path", str(vault / "keep.md"), "--path", str(vault / "secret"), "--yes")
    assert code == 0 and len(out.splitlines()) == 3 and counts(db_path)["sources"] == 0
    ingest(vault, db_path)
    code, _, err = run(capsys, "forget", "--path", str(vault / "keep.md"), "--path", str(vault / "nowhere"), "--yes")
    assert code == 1 and "nothing stored was read from" in err and "nowhere" in err
    assert counts(db_path)["sources"] == 3  # one path that matches nothing: nothing is forgotten


def test_forget_by_a_relative_or_symlinked_path(capsys, vault, db_path, monkeypatch) -> None:
    ingest(vault, db_path)
    monkeypatch.chdir(vault)
    assert run(capsys, "forget", "--path", "secret/also.md", "--yes")[0] == 0
    link = vault.parent / "link-to-vault"
    link.symlink_to(vault)
    assert run(capsys, "forget", "--path", str(link / "secret"), "--yes")[0] == 0  # stored under the target
    assert counts(db_path)["sources"] == 1


def test_forget_a_repository_by_path(capsys, repo, db_path) -> None:
    commit_files(repo, {"a.txt": f"{MARKER}\n"}, "first")
    commit_files(repo, {"a.txt": "changed\n"}, "second")
    with open_store(db_path) as store:
        ingest_git(store, [repo])
    code, out, err = run(capsys, "forget", "--path", str(repo), "--yes")
    assert code == 0 and len(out.splitlines()) == 2 and all(line.startswith(f"{repo}@") for line in out.splitlines())
    # deleting or wrapping a file in <private> cannot take a commit out: its history brings it back
    assert f"the commits are still in the history of {repo}, so the next ingest-git or sync of it" in err
    assert "rewrite that history so no branch or tag reaches them" in err
    assert "still on disk" not in err and "<private>" not in err
    assert counts(db_path)["chunks"] == 0
    with open_store(db_path) as store:
        assert ingest_git(store, [repo]).added == 2, "as the note says"


def test_forget_takes_the_ids_and_uris_other_commands_print(capsys, vault, db_path) -> None:
    # `mem remember --json` prints mem://source/N and `mem history N` works: forget refused both
    ingest(vault, db_path)
    with sqlite3.connect(db_path) as conn:
        ids = dict(conn.execute("SELECT uri, id FROM sources").fetchall())
    gone, also = ids[str(vault / "secret/gone.md")], ids[str(vault / "secret/also.md")]
    code, out, _ = run(capsys, "forget", f"mem://source/{gone}", "--yes")
    assert code == 0 and out.strip() == str(vault / "secret/gone.md")
    code, out, _ = run(capsys, "forget", str(also), "--yes")
    assert code == 0 and out.strip() == str(vault / "secret/also.md")
    code, _, err = run(capsys, "forget", "mem://source/999", "--yes")
    assert code == 1 and "mem://source/ID" in err and err.count("\n") == 1


@pytest.mark.integration
def test_forget_and_history_take_a_commit_label_with_a_short_sha(capsys, repo, db_path, tmp_path, monkeypatch) -> None:
    sha = commit_files(repo, {"a.txt": f"{MARKER}\n"}, "first")
    with open_store(db_path) as store:
        ingest_git(store, [repo])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # `repo` is the label's repository name, not a path from here
    code, out, _ = run(capsys, "history", f"repo@{sha[:7]}", "--json")
    assert code == 0 and json.loads(out)["source"] == f"{repo}@{sha}"
    code, out, _ = run(capsys, "forget", f"repo@{sha[:7]}", "--yes")
    assert code == 0 and out.strip() == f"{repo}@{sha}"
    code, _, err = run(capsys, "forget", "repo@0000000", "--yes")
    assert code == 1 and "unique sha prefix" in err


@pytest.mark.integration
def test_a_short_sha_that_names_two_commits_is_ambiguous(capsys, tmp_path, db_path) -> None:
    repos, sha = same_commit_in_two_repos(tmp_path)
    with open_store(db_path) as store:
        ingest_git(store, repos)
    code, _, err = run(capsys, "forget", f"repo@{sha[:7]}", "--yes")
    assert code == 1 and "is ambiguous: 2 commits match" in err and "(hint: give more of the sha" in err
    assert counts(db_path)["sources"] == 2
    assert run(capsys, "forget", f"{repos[0]}@{sha[:7]}", "--yes")[0] == 0  # a path says which repository


def test_the_cli_says_a_file_still_on_disk_comes_back(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    gone = vault / "secret/gone.md"
    assert "still on disk" in run(capsys, "forget", str(gone), "--yes")[2]
    ingest(vault, db_path)
    assert counts(db_path)["sources"] == 3  # as the note said: it came back
    gone.unlink()
    code, _, err = run(capsys, "forget", str(gone), "--yes")
    assert code == 0 and "still on disk" not in err


def test_a_forgotten_chat_session_whose_file_is_still_on_disk_is_named(capsys, tmp_path, db_path) -> None:
    """Its uri is `FILE@session`: the file, not the uri, is what the next sync reads again."""
    from crossmodalrag.conversations import ingest_conversations
    from tests.agent.chats import claude_record, write_jsonl

    (tmp_path / "chats").mkdir()
    chat = write_jsonl(tmp_path / "chats" / "s.jsonl", [claude_record("u1", None, "user", f"the {MARKER} plan")])
    with open_store(db_path) as store:
        ingest_conversations(store, [chat.parent])
    code, out, err = run(capsys, "forget", "--path", str(chat), "--yes", "--json")
    assert code == 0 and json.loads(out)["still_on_disk"] == [str(chat)]
    assert f"the next ingest-chat or sync of its folder reads it again: {chat}; delete it" in err
    assert "--exclude" not in err


def test_forgetting_a_chat_session_forgets_its_sub_agents_and_says_how_many(capsys, tmp_path, db_path) -> None:
    """A sub-agent's transcript (`FILE@session/agent-ID`) is part of the session: it goes with it."""
    from crossmodalrag.conversations import ingest_conversations
    from tests.agent.chats import claude_record, write_jsonl

    sub_agent = {"isSidechain": True, "agentId": "x"}
    chat = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "find the callers of cache_get"),
            claude_record("s1", None, "user", f"Search for {MARKER}", **sub_agent),
            claude_record("s2", "s1", "assistant", [{"type": "text", "text": f"{MARKER} twice."}], **sub_agent),
        ],
    )
    with open_store(db_path) as store:
        ingest_conversations(store, [chat])
    code, out, err = run(capsys, "forget", f"{chat}@s-1", "--yes", "--json")
    assert code == 0 and json.loads(out)["sub_agent_sessions"] == [f"{chat}@s-1/agent-x"]
    assert counts(db_path)["sources"] == 0 and MARKER not in fts_terms(db_path)
    assert "forgot 2 sources" in err and f"including 1 sub-agent session of {chat}@s-1" in err


def test_eval_gold_is_kept_and_counted(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    gone = str(vault / "secret/gone.md")
    with open_store(db_path) as store:
        upsert_queries(store, [EvalQuery("where is the recipe?", [gone]), EvalQuery("aardvark?", [])])
    code, out, err = run(capsys, "forget", gone, "--yes", "--json")
    assert json.loads(out)["eval_queries_naming_them"] == 1
    assert "1 eval query names a forgotten source" in err
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM queries_eval").fetchone()[0] == 2


def test_backups_made_before_are_named(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    assert run(capsys, "backup")[0] == 0
    older = db_path.parent / "backups" / "memory-20200101-000000.db"  # from before the note was stored
    older.write_bytes(b"an older backup")
    os.utime(older, (1_577_836_800, 1_577_836_800))
    code, out, err = run(capsys, "forget", str(vault / "secret/gone.md"), "--yes", "--json")
    assert code == 0 and json.loads(out)["backups"] == 1 and len(json.loads(out)["backup_paths"]) == 1
    assert f"1 backup in {db_path.parent / 'backups'} made before now may still hold it" in err


def test_copies_a_killed_backup_or_restore_left_are_deleted_and_running_ones_named(capsys, vault, db_path) -> None:
    import os
    import subprocess

    ingest(vault, db_path)
    dead = subprocess.Popen(["true"])  # a process id no process has any more: the backup was killed
    dead.wait()
    backups = db_path.parent / "backups"
    backups.mkdir()
    killed_backup = backups / f".memory-20261206-101500.db.{dead.pid}.x1y2.partial"
    killed_restore = db_path.parent / f".{db_path.name}.{dead.pid}.a1b2.partial"
    running = backups / f".memory-20261206-101501.db.{os.getpid()}.c3d4.partial"  # a backup still writing
    for copy in (killed_backup, killed_restore, running):
        copy.write_bytes(f"a whole copy with {MARKER}".encode())
    code, out, err = run(capsys, "forget", str(vault / "secret/gone.md"), "--yes", "--json")
    # such hidden copies were in no list, and stayed
    assert code == 0 and not killed_backup.exists() and not killed_restore.exists() and running.exists()
    assert json.loads(out)["unfinished_copies"] == [str(running)] and json.loads(out)["backups"] == 0
    assert f"may still hold it ({running})" in err


KILLED_MIDWAY = """
import os, sys
from pathlib import Path
from crossmodalrag.store import backup
backup.sync_and_hash = lambda path: os._exit(9)  # as a kill -9 once the copy is written, before its rename
backup.backup_database(Path(sys.argv[1]), sys.argv[2])
"""


def test_backups_in_folders_of_ones_choosing_are_named_and_a_killed_ones_copy_deleted(
    capsys, vault, db_path, tmp_path
) -> None:
    import subprocess
    import sys

    ingest(vault, db_path)
    usb, elsewhere = tmp_path / "usb", tmp_path / "elsewhere"
    assert run(capsys, "backup", f"{elsewhere}/")[0] == 0
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(db_path), f"{usb}/"], env=environment, check=False)
    assert [p for p in usb.iterdir() if p.name.endswith(".partial")]  # a whole hidden copy, left behind
    code, out, err = run(capsys, "forget", str(vault / "secret/gone.md"), "--yes", "--json")
    assert code == 0 and not [p for p in usb.iterdir() if ".partial" in p.name]
    assert json.loads(out)["backups"] == 1 and f"1 backup in {elsewhere} made before now may still hold it" in err


# --- asking first, and refusing -------------------------------------------------------------


def test_without_yes_and_without_a_terminal_nothing_is_forgotten(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    code, _, err = run(capsys, "forget", "--path", str(vault))
    assert code == 1 and err.startswith("error: not forgetting 3 sources (4 chunks) without confirmation")
    assert "pass --yes" in err and counts(db_path)["sources"] == 3


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code", "left"), [("y\n", 0, 2), ("n\n", 1, 3), ("", 1, 3)])
def test_on_a_terminal_it_asks(capsys, vault, db_path, monkeypatch, answer, code, left) -> None:
    ingest(vault, db_path)
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    result, _, err = run(capsys, "forget", str(vault / "secret/gone.md"))
    assert result == code and "forget 1 source (2 chunks) and everything derived from them? [y/N]" in err
    assert counts(db_path)["sources"] == left


def test_on_a_terminal_it_says_what_a_long_forget_is_doing_then_clears_the_line(vault, db_path, monkeypatch) -> None:
    """Forgetting a whole vault ran for minutes without a word; the text index purge still rewrites
    the whole index, however little is forgotten."""
    ingest(vault, db_path)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["forget", str(vault / "secret/gone.md"), "--yes"]) == 0
    shown = terminal.getvalue()
    assert "forget: purging the forgotten words from the text index" in shown
    assert "\r\033[Kforgot 1 source (2 chunks" in shown  # the summary starts on a cleared line
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    ingest(vault, db_path)
    assert main(["forget", str(vault / "secret/gone.md"), "--yes"]) == 0
    assert log.getvalue().startswith("forgot 1 source") and "purging" not in log.getvalue()  # no progress in a log


def test_nothing_matched_is_an_error_with_a_hint(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    code, _, err = run(capsys, "forget", "secret/gone.md", "--yes")
    assert code == 1 and "no stored source has the uri" in err and "use --path" in err
    code, _, err = run(capsys, "forget", "--path", str(vault / "nowhere"), "--yes")
    assert code == 1 and err.count("\n") == 1 and "nothing stored was read from" in err
    for given in ("99999", "mem://source/99999"):  # an id is no uri anyone stored
        code, _, err = run(capsys, "forget", given, "--yes")
        assert code == 1 and err.startswith("error: no source with id 99999 (hint: see `mem sources`")


def test_usage_errors_exit_2(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    assert run(capsys, "forget")[0] == 2
    with pytest.raises(SystemExit) as exited:
        main(["forget", "x", "--path", "y"])
    assert exited.value.code == 2


def test_no_database_is_an_error(capsys) -> None:
    code, _, err = run(capsys, "forget", "/x.md", "--yes")
    assert code == 1 and "no memory database" in err


# --- the bytes ------------------------------------------------------------------------------


def test_vacuum_wipes_the_forgotten_text_from_the_database_files(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    note = vault / "secret/gone.md"
    note.write_text(note.read_text(encoding="utf-8") + "\nEdited once.\n", encoding="utf-8")
    ingest(vault, db_path)  # the change log now keeps the first version
    embed(db_path)
    assert MARKER.encode() in database_bytes(db_path)
    logged = logged_states_with(db_path, MARKER)  # the change log's compressed copy of the first version
    assert logged and all(blob in database_bytes(db_path) for blob in logged)
    code, _, err = run(capsys, "forget", "--path", str(vault / "secret/gone.md"), "--yes", "--vacuum")
    assert code == 0 and "freed space wiped" in err
    assert MARKER.encode() not in database_bytes(db_path)
    assert not any(blob in database_bytes(db_path) for blob in logged)
    assert b"aardvark" in database_bytes(db_path)  # the rest is intact
    with open_store(db_path) as store:
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert search(store, "aardvark", SearchOptions()).hits
        assert not logged_states_with(db_path, MARKER)
        assert verify(store.conn).ok  # the log kept a tombstone, so the chain and the live rows agree


@pytest.mark.parametrize("by", ["uri", "path"])
def test_a_source_gone_from_memory_is_forgotten_from_the_change_log_too(capsys, vault, db_path, by) -> None:
    ingest(vault, db_path)
    note = vault / "secret/gone.md"
    note.unlink()
    ingest(vault, db_path)  # deleted from disk: removed from memory, its versions kept in the log
    assert logged_states_with(db_path, MARKER)
    target = [str(note)] if by == "uri" else ["--path", str(vault / "secret")]
    code, out, err = run(capsys, "forget", *target, "--yes", "--vacuum", "--json")
    assert code == 0, err
    forgotten = {item["uri"]: item for item in json.loads(out)["forgotten"]}
    assert forgotten[str(note)] == {
        "uri": str(note),
        "source_type": "note",
        "chunks": 0,
        "earlier_path_of": None,
        "sub_agent_of": None,
    }
    assert not logged_states_with(db_path, MARKER) and MARKER.encode() not in database_bytes(db_path)
    with open_store(db_path) as store:
        assert verify(store.conn).ok
    assert run(capsys, "forget", str(note), "--yes")[0] == 1, "nothing of it is left to forget"


def test_forgetting_a_moved_note_erases_the_versions_under_its_earlier_paths(capsys, vault, db_path) -> None:
    """The log records a move as the new path's insert and the old path's delete: the old path's
    versions kept the text, and `--as-of` and rollback brought it back after the forget."""
    first, second, now = vault / "secret/gone.md", vault / "archive/gone.md", vault / "archive/2024/renamed.md"
    write_note(vault, "secret/unrelated.md", "# Unrelated\nDeleted, with other text.\n")
    ingest(vault, db_path)
    with sqlite3.connect(db_path) as conn:
        then = str(conn.execute("SELECT MAX(seq) FROM change_log").fetchone()[0])  # the first path held the text
    (vault / "secret/unrelated.md").unlink()
    for old, new in ((first, second), (second, now)):  # moved twice, the second time renamed too
        new.parent.mkdir(parents=True, exist_ok=True)
        old.rename(new)
        ingest(vault, db_path)
    write_note(vault, "copy.md", now.read_text(encoding="utf-8"))  # a live copy keeps its own text
    ingest(vault, db_path)
    assert len(logged_states_with(db_path, MARKER)) == 2
    code, out, err = run(capsys, "forget", str(now), "--yes", "--vacuum", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["sources"] == 1 and data["earlier_paths"] == [str(second), str(first)]
    assert data["live_copies"] == [str(vault / "copy.md")]
    assert {item["uri"]: item["earlier_path_of"] for item in data["forgotten"]} == {
        str(now): None,
        str(second): str(now),
        str(first): str(now),
    }
    assert not logged_states_with(db_path, MARKER)
    with open_store(db_path) as store:
        assert verify(store.conn).ok
        assert logged_states_with(db_path, "Deleted, with other text")  # another note's history is kept
        assert search(store, MARKER, SearchOptions()).hits[0].source_uri == str(vault / "copy.md")
    code, out, err = run(capsys, "rollback", then, "--dry-run", "--json")
    assert code == 0 and {str(first)} <= {row["target"] for row in json.loads(out)["skipped_forgotten"]}
    code, out, err = run(capsys, "ask", MARKER, "--no-llm", "--as-of", then, "--json")
    assert code == 0 and json.loads(out)["abstained"], "the text it had then is erased"


def test_forgetting_a_path_a_note_left_says_the_note_is_still_in_memory(capsys, vault, db_path) -> None:
    """Forgetting the first of three paths erased the history (of it and the second) and said the
    text was no longer searchable, though the note lives on at the third path, untouched."""
    first, second, third = vault / "secret/gone.md", vault / "a/gone.md", vault / "b/gone.md"
    ingest(vault, db_path)
    for old, new in ((first, second), (second, third)):
        new.parent.mkdir(parents=True, exist_ok=True)
        old.rename(new)
        ingest(vault, db_path)
    code, out, err = run(capsys, "forget", str(first), "--yes")
    assert code == 0, err
    assert f"{second} (the same note as {first})" in err and "no longer searchable" not in err
    assert f"the same text is still in memory at {third}" in err
    with open_store(db_path) as store:
        assert search(store, MARKER, SearchOptions()).hits[0].source_uri == str(third)


@pytest.mark.parametrize("titles_per_query", [MAX_BOUND, 1])  # 1: more titles than one query binds
def test_live_copies_are_looked_for_in_one_pass_over_the_sources(vault, db_path, monkeypatch, titles_per_query):
    """A query per title scanned every source again (no index on title): forgetting a whole vault
    took minutes. However many titles, one statement reads the sources other than by uri."""
    monkeypatch.setattr("crossmodalrag.versioning.lineage.MAX_BOUND", titles_per_query)
    write_note(vault, "copy.md", (vault / "secret/gone.md").read_text(encoding="utf-8"))
    ingest(vault, db_path)
    with open_store(db_path) as store:
        sources = find_sources(store, path=vault / "secret")
        statements: list[str] = []
        store.conn.set_trace_callback(statements.append)
        copies = still_in_memory(store, sources)
        store.conn.set_trace_callback(None)
    assert len({s.uri for s in sources}) == 2 and copies == [str(vault / "copy.md")]
    scans = [sql for sql in statements if "FROM sources" in sql and "WHERE uri =" not in sql]  # by uri: a lookup
    assert len(scans) == 1, scans


def test_the_cli_names_the_earlier_paths_it_erased(capsys, vault, db_path) -> None:
    ingest(vault, db_path)
    old, new = vault / "secret/gone.md", vault / "secret/2024/gone.md"
    new.parent.mkdir()
    old.rename(new)
    ingest(vault, db_path)
    code, out, err = run(capsys, "forget", str(new), "--yes")
    assert code == 0 and out.split() == [str(new), str(old)]
    assert "forgot 1 source (2 chunks, 0 vectors)" in err
    assert f"also erased the versions kept under 1 earlier path: {old} (now {new})" in err


def logged_states_with(db_path: Path, marker: str) -> list[bytes]:
    """The change log's stored states (zlib'd) whose text holds the marker."""
    with open_store(db_path) as store:
        rows = store.conn.execute("SELECT state FROM change_states").fetchall()
    return [row[0] for row in rows if marker.encode() in zlib.decompress(row[0])]


def test_vacuum_also_wipes_what_an_open_reader_wrote_before(capsys, vault, db_path) -> None:
    """The WAL from the ingest is still there while another connection is open: it must be truncated."""
    with open_store(db_path) as store:
        ingest_notes(store, [vault])
        assert Path(f"{db_path}-wal").stat().st_size > 0
        code, _, _ = run(capsys, "forget", str(vault / "secret/gone.md"), "--yes", "--vacuum")
        assert code == 0
        assert MARKER.encode() not in database_bytes(db_path)


def test_vacuum_with_a_reader_in_a_transaction_says_what_to_do(capsys, vault, db_path, monkeypatch) -> None:
    monkeypatch.setattr("crossmodalrag.forget.WIPE_WAIT_SECONDS", 0.2)
    ingest(vault, db_path)
    reader = sqlite3.connect(db_path)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM chunks").fetchone()  # holds a snapshot of the WAL
    try:
        code, _, err = run(capsys, "forget", str(vault / "secret/gone.md"), "--yes", "--vacuum")
    finally:
        reader.close()
    assert code == 1 and err.startswith("error: could not wipe the freed space") and err.count("\n") == 1
    assert "run `mem forget --vacuum`" in err
    assert counts(db_path)["sources"] == 2  # forgotten all the same
    assert run(capsys, "forget", "--vacuum")[0] == 0
    assert MARKER.encode() not in database_bytes(db_path)


# --- the schema cannot grow a way around it ----------------------------------------------------


def foreign_keys(store) -> list[dict]:
    """Every foreign key as {table, from, on_delete} (the names SQLite's foreign_key_list uses)."""
    if store.backend == "postgresql":
        rows = store.conn.execute(
            "SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text, c.confdeltype"
            " FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
            " WHERE c.contype = 'f'"
        ).fetchall()
        actions = {"c": "CASCADE", "n": "SET NULL", "a": "NO ACTION", "r": "RESTRICT", "d": "SET DEFAULT"}
        return [{"in": t, "from": f, "table": target, "on_delete": actions[kind]} for t, f, target, kind in rows]
    tables = [row[0] for row in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [
        {"in": table, **dict(key)}
        for table in tables
        for key in store.conn.execute(f"PRAGMA foreign_key_list('{table}')").fetchall()
    ]


def test_every_table_pointing_at_sources_or_chunks_cascades(store) -> None:
    keys = foreign_keys(store)
    assert any(key["table"] == "chunks" for key in keys)
    for key in keys:
        if (key["in"], key["from"]) == ("memory_nodes", "source_id"):
            # SET NULL, so a build can report events whose source a sync saw deleted; forget itself
            # removes them in its transaction (memory.stats.forget_derived, tests/memory).
            assert key["on_delete"] == "SET NULL"
        elif (key["in"], key["from"]) == ("agent_memories", "superseded_by"):
            # The older memory a forgotten newer one had superseded becomes current again.
            assert key["on_delete"] == "SET NULL"
        elif key["table"] in ("sources", "chunks"):
            assert key["on_delete"] == "CASCADE", f"{key['in']}.{key['from']} must cascade, or forget leaves it"


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    return any_store


@pytest.mark.integration
def test_a_forgotten_pdf_still_on_disk_is_hinted_away_without_exclude_or_private(capsys, tmp_path, db_path) -> None:
    pytest.importorskip("pypdfium2")
    from crossmodalrag.ingest import ingest_pdfs
    from tests.pdfs import write_pdf

    salary = write_pdf(tmp_path / "papers" / "salary.pdf", [f"{MARKER} figures"])
    with open_store(db_path) as store:
        ingest_pdfs(store, [salary.parent])
    code, _, err = run(capsys, "forget", str(salary), "--yes")
    assert code == 0 and f"of its folder reads it again: {salary}; delete it or move it out of that folder" in err
    assert "--exclude" not in err and "<private>" not in err
