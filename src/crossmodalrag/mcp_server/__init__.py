"""`mem mcp` and `mem serve --mcp`: the memory's tools for AI agents over the Model Context Protocol
(the `[mcp]` extra: the official `mcp` SDK, 2.x line)."""

from __future__ import annotations

from importlib.util import find_spec

from crossmodalrag.errors import MissingExtraError

MCP_INSTALL = 'pip install -e ".[mcp]"'


def require_mcp() -> None:
    """Raises MissingExtraError naming the install command when the MCP SDK is missing."""
    if find_spec("mcp") is None or find_spec("mcp.server.mcpserver") is None:
        raise MissingExtraError("the MCP server needs the mcp extra (the `mcp` SDK 2.x is missing)", MCP_INSTALL)
