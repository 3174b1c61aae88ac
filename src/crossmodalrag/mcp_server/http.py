"""`mem serve --mcp`: the MCP tools over streamable HTTP at /mcp, inside `mem serve`'s one guard
(api/security.py: Host allowlist, token, no CORS, Origin check). The SDK's own DNS-rebinding check
is switched off because the guard enforces the same rule, with the same --allow-host names, in one
place; tests/agent/test_mcp_http.py pins that a foreign Host or Origin is refused."""

from __future__ import annotations

from typing import Any, Callable

from crossmodalrag.config import Settings

MCP_PATH = "/mcp"


def mcp_http_app(settings: Settings) -> Any:
    """The SDK's Starlette app for the MCP endpoint (its lifespan runs the session manager)."""
    from mcp.server.transport_security import TransportSecuritySettings

    from crossmodalrag.mcp_server.server import build_server

    server = build_server(settings)
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


def with_mcp(console: Callable, mcp: Callable) -> Callable:
    """One ASGI app: /mcp to the MCP endpoint, lifespan to it too (the console needs none), the rest
    to the console and API."""

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan" or scope.get("path", "").rstrip("/") == MCP_PATH:
            await mcp(scope, receive, send)
        else:
            await console(scope, receive, send)

    return app
