"""Commands ported to PostgreSQL in phase 2 (issue 16), each run on both backends: `mem sync` (notes,
git, chat transcripts), `mem sync --watch`, `mem ingest-chat`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from tests.agent.chats import claude_record, write_jsonl
from tests.conftest import commit_files, write_note


def _uris(store) -> set[str]:
    return {row[0] for row in store.conn.execute("SELECT uri FROM sources").fetchall()}


def _sync(capsys, monkeypatch, db_path, *args: str) -> dict:
    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    code = main(["sync", "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _session(folder: Path, reply: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_jsonl(
        folder / "session.jsonl",
        [
            claude_record("u1", None, "user", "Which port should the cache use?"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": reply}]),
        ],
    )


def test_sync_applies_every_connector_then_changes_nothing(any_store, monkeypatch, capsys, tmp_path, repo, db_path):
    vault, chats = tmp_path / "vault", tmp_path / "chats"
    write_note(vault, "parser.md", "# Parser\nWe replaced regexes with a tokenizer.\n")
    write_note(vault, "cache.md", "# Cache\nThe LRU cache served stale HTML.\n")
    commit_files(repo, {"parser.py": "def parse():\n    return 1\n"}, "Add the parser")
    _session(chats, "We agreed the cache listens on port 7379.")
    for name, value in (("OBSIDIAN_VAULT_PATH", vault), ("REPO_PATH", repo), ("CHAT_PATH_1", chats)):
        monkeypatch.setenv(name, str(value))
    first = _sync(capsys, monkeypatch, db_path)
    assert (first["added"], first["failed"]) == (4, 0), first
    again = _sync(capsys, monkeypatch, db_path)
    assert (again["added"], again["updated"], again["removed"], again["unchanged"]) == (0, 0, 0, 4)

    (vault / "cache.md").unlink()
    write_note(vault, "parser.md", "# Parser\nNow with a hand-written lexer.\n")
    _session(chats, "We agreed the cache listens on port 7380 now.")
    changed = _sync(capsys, monkeypatch, db_path)
    assert (changed["updated"], changed["removed"]) == (2, 1)
    assert str(vault.resolve() / "cache.md") not in _uris(any_store)
    texts = " ".join(row[0] for row in any_store.conn.execute("SELECT text FROM chunks").fetchall())
    assert "hand-written lexer" in texts and "7380" in texts and "stale HTML" not in texts
    assert main(["ask", "which port does the cache listen on?", "--no-llm", "--json"]) == 0
    assert "7380" in json.dumps(json.loads(capsys.readouterr().out)["evidence"])


def test_ingest_chat(any_store, monkeypatch, capsys, tmp_path, db_path):
    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    session = _session(tmp_path / "chats", "We agreed the cache listens on port 7379.")
    assert main(["ingest-chat", str(session), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == 1
    assert any(uri.startswith(str(session)) for uri in _uris(any_store))


def test_watch_follows_a_vault(any_store, tmp_path, db_path):
    from crossmodalrag.watch import watch

    vault = tmp_path / "vault"
    write_note(vault, "first.md", "# First\nAlready here before the watch.\n")
    url = any_store.location if any_store.backend == "postgresql" else None
    settings = Settings(db_path=db_path, db_url=url, notes_paths=[vault])
    stop, failure = threading.Event(), []

    def loop() -> None:
        from crossmodalrag.store import open_configured_store

        try:
            with open_configured_store(settings) as store:
                watch(store, settings, stop, debounce=0.3, poll=0.3)
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            failure.append(error)

    def wait_for(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition() and not failure:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert not failure, failure

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        wait_for(lambda: str(vault / "first.md") in _uris(any_store))
        write_note(vault, "idea.md", "# Idea\nA parser built on a tokenizer.\n")
        wait_for(lambda: str(vault / "idea.md") in _uris(any_store))
        (vault / "first.md").unlink()
        wait_for(lambda: _uris(any_store) == {str(vault / "idea.md")})
    finally:
        stop.set()
        thread.join(timeout=10)


def test_chat_answers_as_ask_does(any_store, monkeypatch, capsys, tmp_path, db_path):
    import io
    import sys

    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser rewrite\nWe replaced the regexes with a tokenizer: they backtracked.\n")
    assert main(["ingest-notes", str(vault)]) == 0
    capsys.readouterr()
    question = "why did we replace the regexes with a tokenizer?"
    monkeypatch.setattr(sys, "stdin", io.StringIO(question + "\n"))
    assert main(["chat", "--no-llm", "--json"]) == 0
    from_chat = json.loads(capsys.readouterr().out.splitlines()[0])
    assert main(["ask", question, "--no-llm", "--json"]) == 0
    from_ask = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in from_chat.items() if k != "timing"} == {k: v for k, v in from_ask.items() if k != "timing"}
    assert not from_chat["abstained"]


def test_remember_supersede_and_list_memories(any_store, monkeypatch, capsys, db_path):
    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    for content in ("The staging key rotates monthly", "The staging key rotates weekly"):
        assert main(["remember", content, "--kind", "fact", "--tags", "ops", "--json"]) == 0
        newer = json.loads(capsys.readouterr().out)
    assert newer["supersedes"]
    assert main(["memories", "--tag", "ops", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["memories"]
    assert [m["id"] for m in listed] == [newer["id"]]
    assert main(["memories", "--history", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["memories"]) == 2


def test_every_mcp_tool_on_postgresql(postgres_url, tmp_path):
    """The MCP scenario every transport runs (tests/agent/mcp_calls.py; SQLite: tests/agent/test_mcp.py)."""
    pytest.importorskip("mcp.server.mcpserver")
    from tests.agent.mcp_calls import every_tool_in_process

    chats = tmp_path / "chats"
    every_tool_in_process(Settings(db_path=tmp_path / "memory.db", db_url=postgres_url, chat_paths=[chats]), chats)


def test_the_memory_hierarchy_is_the_same_on_both_backends(postgres_url, monkeypatch, capsys, tmp_path, repo):
    """build-memory without a language model (commits as events), then every view: identical JSON."""
    for i in range(6):
        when = f"2025-0{i + 1}-01T12:00:00+00:00"
        commit_files(repo, {f"f{i}.py": f"x = {i}\n"}, f"Fix parser bug {i} in the tokenizer", date=when)
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    views = ("events", "timeline", "memory-stats", "concepts", "forgetting", "recall", "drift", "distill", "usage")
    shown = {}
    backends = (("sqlite", "CMRAG_DB_PATH", tmp_path / "m.db"), ("pg", "CMRAG_DB_URL", postgres_url))
    for backend, variable, value in backends:
        monkeypatch.setenv(variable, str(value))
        assert main(["ingest-git", str(repo)]) == 0 and main(["build-memory"]) == 0
        capsys.readouterr()
        for view in views:
            assert main([view, "--json"]) == 0, capsys.readouterr().err
            shown[backend, view] = json.loads(capsys.readouterr().out)
    assert len(shown["pg", "events"]["events"]) == 6
    for view in views:
        assert shown["sqlite", view] == shown["pg", view], view


@pytest.mark.slow
def test_seed_sample_then_eval(any_store, monkeypatch, capsys, tmp_path, db_path):
    """The bundled sample (notes, git, a PDF, images with OCR) into either backend; its eval finds every gold source."""
    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    assert main(["seed-sample", "--workspace-dir", str(tmp_path / "sample")]) == 0
    assert "eval queries loaded into " + any_store.location in capsys.readouterr().err
    assert main(["eval", "--query-prefix", "[sample]", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["hit_rate"] == 1.0


def test_llm_answers_and_eval_generation(any_store, monkeypatch, capsys, tmp_path, db_path):
    """The language-model path (a scripted model): a cited answer, and eval-generation's scores."""
    from crossmodalrag.answer import llm as llm_package
    from crossmodalrag.answer import synthesize
    from tests.fakes import ScriptedLLM

    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))
    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser rewrite\nWe replaced the regexes with a tokenizer: they backtracked.\n")
    assert main(["ingest-notes", str(vault)]) == 0
    model = ScriptedLLM("Answer: they backtracked [E1]\nThe regexes backtracked, so we wrote a tokenizer [E1].")
    monkeypatch.setattr(synthesize, "load_llm", lambda settings: model)
    monkeypatch.setattr(llm_package, "load_llm", lambda settings: model)
    question = "why did we replace the regexes with a tokenizer?"
    capsys.readouterr()
    assert main(["ask", question, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["mode"] == "llm" and answer["citations"][0]["source_uri"].endswith("parser.md")
    queries = tmp_path / "queries.json"
    queries.write_text(
        json.dumps([{"query_text": "[t] " + question, "expected_source_uris": [str(vault / "parser.md")]}])
    )
    assert main(["eval-generation", "--load-queries", str(queries), "--query-prefix", "[t]", "--json"]) == 0
    overall = json.loads(capsys.readouterr().out)["overall"]
    assert overall["source_grounding_hit"] == 1.0 and overall["generated"] == 1
