"""The MCP server with the SDK's own client: in process, over stdio (`mem mcp`, exactly as the
README's `claude mcp add mem -- mem mcp` launches it) and over streamable HTTP (`mem serve --mcp`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from crossmodalrag.config import Settings  # noqa: E402
from crossmodalrag.mcp_server.server import build_server  # noqa: E402
from tests.agent.mcp_calls import answer, call, every_tool_in_process, exercise_every_tool, run_async  # noqa: E402
from tests.fakes import ScriptedLLM  # noqa: E402


def test_every_tool_in_process(tmp_path):
    chats = tmp_path / "chats"
    every_tool_in_process(Settings(db_path=tmp_path / "memory.db", chat_paths=[chats]), chats)


def readme_command() -> list[str]:
    """The command line the README tells Claude Code to run, and the JSON config other clients take."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("claude mcp add mem -- "))
    command = line.split(" -- ", 1)[1].split("#")[0].split()
    config = json.loads(next(line for line in readme.splitlines() if line.startswith('{"mcpServers"')))
    assert [config["mcpServers"]["mem"]["command"], *config["mcpServers"]["mem"]["args"]] == command
    return command


@pytest.mark.integration
def test_every_tool_over_stdio_with_the_readme_command(tmp_path):
    """Exactly what the README configures: the memory comes from the environment, as for any client."""
    chats = tmp_path / "chats"
    command = readme_command()
    assert command == ["mem", "mcp"]
    executable = shutil.which(command[0]) or pytest.skip("the mem console script is not on PATH")
    env = {"CMRAG_DB_PATH": str(tmp_path / "memory.db"), "CHAT_PATH_1": str(chats), "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(
        command=executable, args=command[1:], env={**env, "PATH": os.environ["PATH"]}, cwd=tmp_path
    )

    async def scenario():
        async with Client(params) as client:
            await exercise_every_tool(client, chats)

    run_async(scenario())


def test_mcp_needs_its_extra(monkeypatch, capsys):
    from crossmodalrag.cli.main import main

    monkeypatch.setitem(sys.modules, "mcp", None)
    assert main(["mcp"]) == 1
    assert 'pip install -e ".[mcp]"' in capsys.readouterr().err


class SlowLLM(ScriptedLLM):
    def stream(self, messages, generation):
        time.sleep(0.3)  # longer than the tool's wait, which the slow test sets to 0
        yield from super().stream(messages, generation)


def scripted_model(monkeypatch, model=ScriptedLLM) -> None:
    from crossmodalrag.answer import llm as llm_package

    monkeypatch.setattr(llm_package, "load_llm", lambda settings: model("It rotates weekly [E1]."))


def ask_scenario(settings: Settings, scenario) -> Any:
    """memory_store one fact, then `scenario(client)` in process."""
    server = build_server(settings)

    async def run():
        async with Client(server) as client:
            await call(client, "memory_store", {"content": "The staging key rotates weekly", "kind": "fact"})
            return await scenario(client)

    try:
        return run_async(run())
    finally:
        server.service.close()


def test_memory_ask_answers_with_the_configured_model(tmp_path, monkeypatch):
    """The `mem ask --json` contract with the model: its text and citations, not the evidence answer."""
    scripted_model(monkeypatch)
    question = {"question": "How often does the staging key rotate?"}

    async def both(client):
        return await answer(client, question), await answer(client, {**question, "use_llm": False})

    with_model, without = ask_scenario(Settings(db_path=tmp_path / "m.db"), both)
    assert with_model["mode"] == "llm" and with_model["answer"].startswith("It rotates weekly")
    assert with_model["citations"] and with_model["evidence"][0]["source_id"] == 1
    assert without["mode"] == "evidence" and without["evidence"] == with_model["evidence"]


def test_a_slow_model_answer_comes_back_as_a_job(tmp_path, monkeypatch):
    """A tool call waits a few seconds at most: past that, memory_ask hands back a job id, and
    memory_job's result is the answer once it is done."""
    from crossmodalrag.mcp_server import server as mcp_server

    scripted_model(monkeypatch, SlowLLM)
    monkeypatch.setattr(mcp_server, "ASK_WAIT_SECONDS", 0.0)

    async def slow(client):
        job = await call(client, "memory_ask", {"question": "How often does the key rotate?"})
        assert job["kind"] == "ask" and job["status"] in ("queued", "running") and job["job_id"]
        while job["status"] != "done":
            assert job["status"] != "failed", job["error"]
            await asyncio.sleep(0.05)
            job = await call(client, "memory_job", {"job_id": job["job_id"]})
        return job["result"]

    answered = ask_scenario(Settings(db_path=tmp_path / "m.db"), slow)
    assert answered["mode"] == "llm" and answered["answer"].startswith("It rotates weekly")
