"""The MCP server with the SDK's own client: in process, over stdio (`mem mcp`, exactly as the
README's `claude mcp add mem -- mem mcp` launches it) and over streamable HTTP (`mem serve --mcp`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp.server.mcpserver")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from crossmodalrag.config import Settings  # noqa: E402
from crossmodalrag.mcp_server.server import build_server  # noqa: E402
from tests.agent.mcp_calls import exercise_every_tool  # noqa: E402


def test_every_tool_in_process(tmp_path):
    chats = tmp_path / "chats"
    settings = Settings(db_path=tmp_path / "memory.db", chat_paths=[chats])
    server = build_server(settings)

    async def scenario():
        async with Client(server) as client:
            await exercise_every_tool(client, chats)

    try:
        asyncio.run(scenario())
    finally:
        server.service.close()


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

    asyncio.run(scenario())


def test_mcp_needs_its_extra(monkeypatch, capsys):
    from crossmodalrag.cli.main import main

    monkeypatch.setitem(sys.modules, "mcp", None)
    assert main(["mcp"]) == 1
    assert 'pip install -e ".[mcp]"' in capsys.readouterr().err
