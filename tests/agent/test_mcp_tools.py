"""MCP tools one finding at a time, through the SDK's in-process client (tests/agent/mcp_calls.py has
the whole scenario): what an agent may read, who the change log names, what an ingest reads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client  # noqa: E402

from crossmodalrag.config import Settings  # noqa: E402
from crossmodalrag.mcp_server.server import build_server  # noqa: E402
from crossmodalrag.store import open_store  # noqa: E402
from tests.agent.mcp_calls import call, refused, run_async, write_session  # noqa: E402


def with_server(settings: Settings, scenario) -> Any:
    """`scenario(client)` against an in-process server over the memory `settings` name."""
    server = build_server(settings)

    async def run():
        async with Client(server) as client:
            return await scenario(client)

    try:
        return run_async(run())
    finally:
        server.service.close()


def test_digest_session_reads_no_transcript_folder_the_user_did_not_configure(tmp_path, monkeypatch):
    # ~/.claude/projects holds every project's sessions; an agent digesting one the user never chose
    # to keep read it as memory_ingest refused to.
    monkeypatch.setenv("HOME", str(tmp_path))
    session = write_session(tmp_path / ".claude" / "projects" / "other-client")
    settings = Settings(db_path=tmp_path / "memory.db")

    async def digest(client):
        return await refused(client, "memory_digest_session", {"path": str(session)})

    message = with_server(settings, digest)
    assert "outside the folders mem is configured to read chats from" in message and "CHAT_PATH_1" in message


def test_the_change_log_names_the_agent_each_call_gives(tmp_path):
    settings = Settings(db_path=tmp_path / "memory.db")

    async def store_update_and_forget(client):
        stored = await call(client, "memory_store", {"content": "Claude stored this", "agent_id": "claude-code"})
        await call(client, "memory_store", {"content": "An unnamed client stored this"})
        await call(client, "memory_update", {"id": stored["id"], "tags": ["x"], "agent_id": "codex"})
        await call(client, "memory_forget", {"id": stored["id"], "agent_id": "claude-code"})

    with_server(settings, store_update_and_forget)
    with open_store(settings.db_path) as store:
        logged = store.conn.execute("SELECT op, actor FROM change_log ORDER BY seq").fetchall()
    assert [tuple(row) for row in logged] == [
        ("insert", "mcp:claude-code"),
        ("insert", "mcp"),  # a call that names no agent is the MCP server's
        ("update", "mcp:codex"),
        ("forget", "mcp:claude-code"),
    ]


def test_memory_forget_leaves_the_text_in_no_database_file_while_the_server_runs(tmp_path):
    # The write-ahead log kept the pages as stored, text included, until a checkpoint an always-on
    # server may not reach for hours; only `mem forget --vacuum` (after stopping it) wiped them.
    settings = Settings(db_path=tmp_path / "memory.db")

    def files_holding(word: bytes) -> list[str]:
        return [p.name for p in sorted(tmp_path.glob("memory.db*")) if p.is_file() and word in p.read_bytes()]

    async def store_then_forget(client):
        stored = await call(client, "memory_store", {"content": "My bank PIN hint is xylophone-quokkafish-8841"})
        assert files_holding(b"quokkafish")  # stored: in the log at least
        forgotten = await call(client, "memory_forget", {"id": stored["id"]})
        return forgotten, files_holding(b"quokkafish")  # while the server still runs

    forgotten, holding = with_server(settings, store_then_forget)
    assert holding == []
    assert not forgotten["vacuumed"] and "mem forget --vacuum" in forgotten["hint"]


async def finished(client, job: dict) -> dict:
    while job["status"] in ("queued", "running"):
        await asyncio.sleep(0.05)
        job = await call(client, "memory_job", {"job_id": job["job_id"]})
    assert job["status"] == "done", job["error"]
    return job


def test_memory_ingest_reads_the_note_or_folder_asked_for_as_its_vault_would(tmp_path):
    # It read the whole vault: an agent asking for one note stored every note the user kept there.
    vault = tmp_path / "vault"
    (vault / "big").mkdir(parents=True)
    for i in range(4):
        (vault / "big" / f"n{i}.md").write_text(f"# note {i}\n\nfiller text number {i}\n")
    (vault / "big" / "private.md").write_text("# private\n\nleft out by the vault's glob\n")
    (vault / "one.md").write_text("# one\n\nthe only note I asked for\n")
    settings = Settings(db_path=tmp_path / "memory.db", notes_paths=[vault], notes_exclude=["big/private.md"])

    async def ingest(client, path) -> dict:
        return await finished(client, await call(client, "memory_ingest", {"path": str(path)}))

    async def scenario(client):
        one = await ingest(client, vault / "one.md")
        assert (one["target"], one["result"]["added"]) == (str(vault / "one.md"), 1)
        folder = await ingest(client, vault / "big")
        assert (folder["result"]["added"], folder["result"]["removed"]) == (4, 0)  # one.md stays
        (vault / "big" / "n0.md").unlink()
        again = await ingest(client, vault / "big")
        assert (again["result"]["removed"], again["result"]["unchanged"]) == (1, 3)
        return await ingest(client, vault)

    whole = with_server(settings, scenario)["result"]
    assert (whole["added"], whole["updated"], whole["removed"]) == (0, 0, 0)  # as the vault's ingest stores them
    with open_store(settings.db_path) as store:
        rows = store.conn.execute("SELECT uri, json_extract(metadata, '$.vault') FROM sources ORDER BY uri").fetchall()
        locators = {row[0] for row in store.conn.execute("SELECT locator FROM chunks")}
    assert [Path(uri).relative_to(vault).as_posix() for uri, _ in rows] == [
        "big/n1.md",
        "big/n2.md",
        "big/n3.md",
        "one.md",
    ]
    assert {stored_vault for _, stored_vault in rows} == {str(vault)}
    assert any(locator.startswith("big/n1.md") for locator in locators)


def test_an_unexpected_failure_is_one_line_with_a_hint_and_logged_once_compactly(tmp_path, monkeypatch, caplog):
    # A bug or a full disk came back as the SDK's bare "Error executing tool memory_search", and the
    # server logged a ~180-line boxed traceback for it.
    from crossmodalrag.agent import tools

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tools, "search_memory", full_disk)
    settings = Settings(db_path=tmp_path / "memory.db")

    async def search(client):
        message = await refused(client, "memory_search", {"query": "cache"})
        assert not (await client.call_tool("memory_stats", {})).is_error  # the server keeps serving
        return message

    with caplog.at_level("ERROR"):
        message = with_server(settings, search)
    assert message.startswith("memory_search: unexpected error: OSError: [Errno 28] No space left on device (hint: ")
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and not errors[0].exc_info and "\n" not in errors[0].getMessage()
    assert "test_mcp_tools.py" in errors[0].getMessage() and "full_disk" in errors[0].getMessage()


def test_memory_stats_is_mem_stats_json_plus_agent_memories(tmp_path):
    """The contract's promise: an agent reads `retrieval` (lexical only, and why) as `mem stats --json` shows it."""
    from crossmodalrag.retrieval_mode import stats_report

    settings = Settings(db_path=tmp_path / "memory.db")

    async def stats(client):
        await call(client, "memory_store", {"content": "the zeppelin lands at noon"})
        return await call(client, "memory_stats", {})

    shown = with_server(settings, stats)
    with open_store(settings.db_path) as store:
        expected = stats_report(store, settings)
    assert shown.pop("agent_memories")["memories"] == 1
    assert shown == expected and set(shown["retrieval"]) == {"mode", "embedding_model", "notice"}
