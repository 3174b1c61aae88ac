"""Every MCP tool, called through a real SDK client: one scenario shared by the in-process, stdio
and streamable-HTTP tests, so each transport proves the same behaviour."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from tests.agent.chats import claude_record, write_jsonl

TOOLS = {
    "memory_store", "memory_search", "memory_get", "memory_update", "memory_forget", "memory_ask",
    "memory_context", "memory_browse", "memory_timeline", "memory_feedback", "memory_ingest",
    "memory_digest_session", "memory_stats", "memory_diff", "memory_job",
}  # fmt: skip
COMPACT_KEYS = {"id", "chunk_id", "type", "preview", "date", "score"}  # docs/json-contract.md


def write_session(chats: Path) -> Path:
    """A small Claude Code session inside the configured chat folder."""
    chats.mkdir(parents=True, exist_ok=True)
    return write_jsonl(
        chats / "session.jsonl",
        [
            claude_record("u1", None, "user", "Which port should the cache use?"),
            claude_record(
                "a1", "u1", "assistant", [{"type": "text", "text": "We agreed the cache listens on port 7379."}]
            ),
        ],
    )


def run_async(coroutine) -> Any:
    """asyncio.run on a thread of its own: a test that ran before (playwright's sync API, tests/browser)
    may leave an event loop set in the main thread, where asyncio.run refuses to start another."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def every_tool_in_process(settings, chats: Path) -> None:
    """The whole scenario through the SDK's in-process client, against the memory `settings` name."""
    from mcp import Client

    from crossmodalrag.mcp_server.server import build_server

    server = build_server(settings)

    async def scenario():
        async with Client(server) as client:
            await exercise_every_tool(client, chats)

    try:
        run_async(scenario())
    finally:
        server.service.close()


async def call(client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def answer(client, arguments: dict) -> dict:
    """memory_ask's answer: at once, or (a model slower than the tool's wait) from the job it returns."""
    found = await call(client, "memory_ask", arguments)
    while "job_id" in found:
        job = await call(client, "memory_job", {"job_id": found["job_id"]})
        assert job["kind"] == "ask" and job["status"] != "failed", job["error"]
        if job["status"] == "done":
            return job["result"]
        await asyncio.sleep(0.1)
    return found


async def refused(client, tool: str, arguments: dict) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    message = result.content[0].text
    assert "\n" not in message, message  # one line, as every tool error
    assert message.startswith(f"{tool}: ") and "Error executing" not in message, message  # and alike
    return message


async def exercise_every_tool(client, chats: Path) -> None:
    """Round-trip each tool against a real memory, and refuse hostile arguments cleanly."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOLS
    assert all(tool.description and "\n    " not in tool.description for tool in listed.tools)  # no indentation

    stored = await call(client, "memory_store", {"content": "Deploys need the VPN; the staging key rotates monthly",
                                                  "tags": ["ops"], "importance": 0.8, "kind": "fact",
                                                  "session_id": "s1", "agent_id": "test-agent"})  # fmt: skip
    first = stored["id"]
    again = await call(client, "memory_store", {"content": "Deploys need the VPN; the staging key rotates monthly"})
    assert (again["id"], again["status"]) == (first, "duplicate")
    newer = await call(client, "memory_store", {"content": "The staging key rotates weekly", "kind": "fact"})
    assert newer["supersedes"] == [first]
    asked = "Which weekday should the release train leave on?"
    decision = await call(client, "memory_store", {"content": "Decided: releases ship on Tuesdays", "kind": "decision",
                                                    "when": "2026-11-03T10:00:00Z", "context": asked})  # fmt: skip

    found = await call(client, "memory_search", {"query": "staging key rotation"})
    assert found["results"][0]["id"] == newer["id"] and set(found["results"][0]) == COMPACT_KEYS
    # the old value says it was replaced (a compact result carries `superseded_by` only then)
    assert next(r for r in found["results"] if r["id"] == first)["superseded_by"] == newer["id"]
    unmatched = await call(client, "memory_search", {"query": "capital of Mongolia"})
    assert found["weak"] is False and unmatched["weak"] is True  # fused scores alone cannot tell them apart
    full = await call(client, "memory_search", {"query": "staging key", "compact": False, "max_tokens": 60})
    assert len(full["results"]) == 1 and "text" in full["results"][0]
    only_facts = await call(client, "memory_search", {"query": "releases", "kind": "fact"})
    assert only_facts["results"] == []

    got = await call(client, "memory_get", {"ids": [newer["id"], 999]})
    assert got["sources"][0]["text"] == "The staging key rotates weekly" and got["missing"] == [999]
    resource = await client.read_resource(f"mem://source/{newer['id']}")
    assert json.loads(resource.contents[0].text)["id"] == newer["id"]

    updated = await call(client, "memory_update", {"id": decision["id"], "tags": ["release"], "importance": 0.9})
    assert updated["tags"] == ["release"] and updated["importance"] == 0.9
    assert updated["date"].startswith("2026-11-03") and updated["context"].startswith("Which weekday")
    train = await call(client, "memory_search", {"query": "weekday train", "after": "2026-11-01"})
    assert [r["id"] for r in train["results"]] == [decision["id"]]  # found by its context, on its own date

    ask = {"question": "How often does the staging key rotate?", "strategy": "fusion"}
    answered = await answer(client, ask)
    assert not answered["abstained"] and answered["evidence"][0]["source_id"] == newer["id"]
    assert any("replaced an older one" in note for note in answered["notices"])
    nothing = await call(client, "memory_ask", {"question": "What is the capital of Mongolia?", "use_llm": False})
    assert nothing["abstained"]

    context = await call(client, "memory_context", {"topic": "release", "max_tokens": 400})
    assert [d["id"] for d in context["decisions"]] == [decision["id"]] and context["tokens"] <= 400
    browsed = await call(client, "memory_browse", {"kind": "fact", "history": True})
    assert {m["id"] for m in browsed["memories"]} == {first, newer["id"]}
    page = await call(client, "memory_browse", {"limit": 1})  # a page says how many there are in all
    assert len(page["memories"]) == 1 and page["total"] == 2  # the current ones: newer and the decision

    session = write_session(chats)
    digest = await call(client, "memory_digest_session", {"path": str(session)})
    assert digest["status"] == "done" and digest["result"]["added"] == 1
    assert (await call(client, "memory_job", {"job_id": digest["job_id"]}))["status"] == "done"
    ingest = await call(client, "memory_ingest", {"path": str(chats)})
    assert ingest["status"] in ("running", "done", "queued")
    port = await call(
        client, "memory_search", {"query": "cache port", "source_types": ["conversation"], "strategy": "episodic"}
    )
    assert port["results"][0]["type"] == "conversation"

    timeline = await call(client, "memory_timeline", {"after": "2026-01-01"})
    assert timeline["days"] and timeline["days"][0]["sources"]
    feedback = await call(client, "memory_feedback", {"chunk_ids": [found["results"][0]["chunk_id"]]})
    assert feedback["recorded"] == 1
    stats = await call(client, "memory_stats", {})
    assert stats["agent_memories"]["memories"] == 3 and stats["sources"]["conversation"] == 1
    diff = await call(client, "memory_diff", {"since": "2000-01-01"})
    assert diff["changed_total"] == len(diff["changed"])
    assert {c["id"] for c in diff["changed"]} >= {newer["id"]} and diff["superseded"] == [
        {"id": first, "by": newer["id"]}
    ]

    # Only agent memories are an agent's to erase: the digested chat session is the user's.
    assert "not an agent memory" in await refused(client, "memory_forget", {"id": port["results"][0]["id"]})
    forgotten = await call(client, "memory_forget", {"id": decision["id"]})
    assert forgotten["sources"] == 1
    assert (await call(client, "memory_get", {"ids": [decision["id"]]}))["missing"] == [decision["id"]]

    # Hostile and malformed arguments: an error result with one line, and the server keeps serving.
    assert "outside the folders" in await refused(client, "memory_ingest", {"path": "/etc"})
    assert "outside the folders" in await refused(client, "memory_digest_session", {"path": str(chats / "../../..")})
    assert "no such file" in await refused(client, "memory_digest_session", {"path": str(chats / "gone.jsonl")})
    (chats / "notes.json").write_text('{"not": "a chat"}')
    failed = await call(client, "memory_digest_session", {"path": str(chats / "notes.json")})
    while failed["status"] in ("queued", "running"):  # a busy machine: the job outlived the call's wait
        failed = await call(client, "memory_job", {"job_id": failed["job_id"]})
    assert failed["status"] == "failed" and "not a chat transcript" in failed["error"]
    assert "at most 2000" in await refused(client, "memory_search", {"query": "x" * 100_000})
    assert "validation" in await refused(client, "memory_get", {"ids": ["1; DROP TABLE sources"]})
    assert "importance" in await refused(client, "memory_store", {"content": "x", "importance": 7})
    assert "ISO date" in await refused(client, "memory_browse", {"after": "last tuesday"})
    assert "when must be an ISO date" in await refused(client, "memory_store", {"content": "x", "when": "yesterday"})
    assert "validation" in await refused(client, "memory_store", {"content": "x", "context": "y" * 5000})
    assert "no job" in await refused(client, "memory_job", {"job_id": "nope"})
    assert "no source" in await refused(client, "memory_forget", {"id": 424242})
    assert "less than or equal" in await refused(client, "memory_get", {"ids": [10**30]})  # beyond SQLite's range
    assert "less than or equal" in await refused(client, "memory_browse", {"offset": 2**70})
    operators = await call(client, "memory_search", {"query": 'staging OR NEAR("key" rotates) * ^ "'})
    assert operators["results"]
