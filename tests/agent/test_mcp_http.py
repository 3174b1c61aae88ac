"""`mem serve --mcp`: the MCP tools over streamable HTTP behind the console's guard (Host allowlist,
token, no CORS, Origin), in a real server process."""

from __future__ import annotations

import os

import httpx
import pytest

pytest.importorskip("mcp.server.mcpserver")
pytest.importorskip("fastapi")

import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from crossmodalrag.cli.main import main  # noqa: E402
from tests.agent.mcp_calls import exercise_every_tool, run_async  # noqa: E402
from tests.api.test_serve_cli import TOKEN, start, stop  # noqa: E402

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def served(tmp_path):
    chats = tmp_path / "chats"
    db = tmp_path / "memory.db"
    assert main(["init-db", "--db-path", str(db)]) == 0
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    env = {**os.environ, "CMRAG_LLM_PROVIDER": "none", "CHAT_PATH_1": str(chats), "HF_HUB_OFFLINE": "1"}
    process, url = start(["--db-path", str(db), "--token-file", str(token_file), "--mcp"], env)
    yield url, chats
    stderr = stop(process)
    assert "Traceback" not in stderr and f"MCP tools at {url}/mcp" in stderr


@pytest.mark.integration
def test_every_tool_over_streamable_http_with_the_token(served):
    url, chats = served

    async def scenario():
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with http, Client(streamable_http_client(url + "/mcp", http_client=http)) as client:
            await exercise_every_tool(client, chats)

    run_async(scenario())


@pytest.mark.integration
def test_the_mcp_endpoint_keeps_the_console_rules(served):
    url, _ = served
    auth = {"authorization": f"Bearer {TOKEN}"}
    assert httpx.post(url + "/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 401
    rebound = httpx.post(url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth, "host": "evil.example"})
    assert rebound.status_code == 421  # DNS rebinding: a foreign Host never reaches the tools
    foreign = httpx.post(
        url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth, "origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    cross = httpx.post(url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth, "sec-fetch-site": "cross-site"})
    assert cross.status_code == 403 and "access-control-allow-origin" not in cross.headers
    huge = httpx.post(url + "/mcp", content=b"x" * (2 << 20), headers={**MCP_HEADERS, **auth})
    assert huge.status_code == 413
    ok = httpx.post(url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth, "origin": url})
    assert ok.status_code == 200 and "access-control-allow-origin" not in ok.headers
    read_only = httpx.post(url + "/sources", headers=auth)
    assert read_only.status_code == 405 and read_only.headers["allow"] == "GET, HEAD"  # the console stays read-only
    put = httpx.put(url + "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **auth})
    assert put.status_code == 405 and put.headers["allow"] == "GET, POST, DELETE"
