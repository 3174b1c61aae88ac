"""The rules every request passes before any route runs: a pure ASGI wrapper, no framework magic.

A local server that serves a private memory is attacked through the browser: DNS rebinding (a page
on evil.example re-points its name at 127.0.0.1 and reads the answers: Ollama CVE-2024-28224, the
MCP SDKs' CVE-2025-66416) and cross-site requests. So:
- the Host header must be exactly a loopback name or address (any port) or an `--allow-host` name;
  no prefix or suffix matching (`localhost.evil.example` is not local), an empty Host is not local;
- a request a browser marks `Sec-Fetch-Site: cross-site` is refused, and no CORS header is ever sent;
- with a token (required for any non-loopback bind) every request needs `Authorization: Bearer` or
  the session cookie; a one-time `?token=` sets that cookie (HttpOnly, SameSite=Strict) and redirects
  to the same URL without it, so the token does not stay in the address bar or history;
- every response carries a strict CSP (no inline script or style), nosniff, no referrer, no caching;
- request bodies and query strings are bounded (the API is read-only: GET and HEAD only);
- the MCP endpoint (`mem serve --mcp`, under /mcp) also takes POST and DELETE with JSON bodies up to
  1 MB, and a request carrying an Origin header must come from one of the allowed hosts.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import json
import re
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qsl, quote, urlencode

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable, Callable], Awaitable[None]]

COOKIE = "mem_session"
# What a path keeps unencoded in a redirect: RFC 3986's path characters. Anything else (a backslash, a
# space, CR/LF, non-ASCII) is percent-encoded, so the Location header is always plain ASCII.
PATH_SAFE = "/:@!$&'()*+,;=~"
# A browser reads "//x" and "/\x" (any run of slashes and backslashes) as the other site x.
LEADING_SLASHES = re.compile(r"^[/\\]+")
# A 2,000-character question (MAX_QUESTION_CHARS) in a script of 3-4-byte characters, percent-encoded,
# is up to 24,000 bytes: 4,096 refused 450 Chinese characters.
MAX_QUERY_BYTES = 32 * 1024
# What `mem serve` lets uvicorn's h11 buffer for a request line and headers (its default, 16 KB, would
# refuse a long question with a bare 400 before the guard could name the limit).
MAX_HEAD_BYTES = MAX_QUERY_BYTES + 16 * 1024
MAX_BODY_BYTES = 16 * 1024
MCP_BODY_BYTES = 1024 * 1024
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

# The guard's own error page for a console address: self-contained (no template, no stylesheet, no
# script), because it answers before the app and to requests that may not load anything else (no
# token yet, a Host that is not ours); the CSP forbids inline style, so it is plain.
ERROR_PAGE = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1"><title>Error · mem</title></head>\n'
    '<body><div role="alert"><h1>{message}</h1>{hint}</div></body></html>\n'
)


def is_console_path(path: str) -> bool:
    """A console address (a person's browser): its errors are an HTML page, the API's are JSON."""
    return path in ("/", "/ui", "/docs") or path.startswith("/ui/")


def split_host(header: str) -> tuple[str, str] | None:
    """(name, port) of a Host header value, or None if it is not one: `[::1]:8765`, `localhost`."""
    if not header or header != header.strip() or any(c in header for c in "/\\@ ,"):
        return None
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        name, _, port = header.partition(":")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    return (name.lower(), port) if name else None


def allowed_name(value: str) -> str | None:
    """The Host name an `--allow-host` value means, as host_allowed compares it, or None if it names none.
    People paste what a URL shows (`mem.lan:8815`, `http://mem.lan/`): only the name is compared (any
    port is accepted, as for loopback), so the port, scheme and path are dropped rather than never matching."""
    text = value.strip()
    if "://" in text:
        text = text.partition("://")[2]
    text = text.split("/", 1)[0]
    try:
        return str(ipaddress.ip_address(text.strip("[]")))  # a bare IPv6 address holds colons too
    except ValueError:
        parsed = split_host(text)
    return parsed[0] if parsed else None


def is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(header: str, extra: frozenset[str] = frozenset()) -> bool:
    """Is this Host header one of ours: loopback (127.0.0.0/8, ::1, localhost) or an --allow-host name?"""
    parsed = split_host(header)
    if parsed is None:
        return False
    name = parsed[0]
    return is_loopback(name) or name in extra


def session_value(token: str) -> str:
    """What the cookie holds: derived from the token, so the token itself is never stored in the browser."""
    return hmac.new(token.encode(), b"mem console session", hashlib.sha256).hexdigest()


class LocalGuard:
    """Applies the rules above around an ASGI app."""

    def __init__(
        self,
        app: ASGIApp,
        token: str | None = None,
        allow_hosts: frozenset[str] = frozenset(),
        mcp_path: str | None = None,
    ) -> None:
        self.app = app
        self.mcp_path = mcp_path
        self.token = token or None
        self.session = session_value(token) if token else None
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)

    async def __call__(self, scope: Scope, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets here
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status = refusal[0]
            await _send_error(send, scope, *refusal, [(b"allow", self._methods(scope))] if status == 405 else None)
            return
        # `?token=` is stripped by a redirect even for a browser already logged in: never left in history.
        redirect = self._login_redirect(scope, headers) if self.token else None
        if redirect is not None:
            await _send(send, 303, b"", [(b"location", redirect.encode("ascii")), _cookie(self.session)])
            return
        if self.token and not self._authorized(headers):
            await _send_error(send, scope, 401, *self._unauthorized(scope, headers), [(b"www-authenticate", b"Bearer")])
            return
        if scope.get("method") == "HEAD" and not self._is_mcp(scope):  # routes are GET's: its headers, no body
            scope, send = {**scope, "method": "GET"}, _without_body(send)
        await self.app(scope, receive, _with_headers(send))

    def _methods(self, scope: Scope) -> bytes:
        """The `Allow` header of a 405 (RFC 9110 requires it): what this path does take."""
        return b"GET, POST, DELETE" if self._is_mcp(scope) else b"GET, HEAD"

    def _is_mcp(self, scope: Scope) -> bool:
        return bool(self.mcp_path) and scope.get("path", "").rstrip("/") == self.mcp_path

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        if not host_allowed(headers.get("host", ""), self.allow_hosts):
            return (
                421,
                "this server answers only to its local host names",
                "open http://127.0.0.1:<port>/, or start `mem serve --allow-host NAME` for a name you trust",
            )
        if headers.get("sec-fetch-site") == "cross-site":
            return 403, "cross-site requests are refused", "open the console from its own address"
        if self._is_mcp(scope):
            return self._mcp_refusal(scope, headers)
        if scope.get("method") not in ("GET", "HEAD"):
            return 405, "this API is read-only: GET and HEAD only", "change memory with the `mem` commands"
        if len(scope.get("query_string", b"")) > MAX_QUERY_BYTES:
            return 414, f"the query string is over {MAX_QUERY_BYTES} bytes", "ask a shorter question"
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES or "transfer-encoding" in headers:
            return 413, "request bodies are not accepted", ""
        return None

    def _mcp_refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """The MCP endpoint: its methods, bounded JSON bodies, and an Origin (if any) that is ours."""
        origin = headers.get("origin")
        if origin is not None and not host_allowed(origin.partition("://")[2], self.allow_hosts):
            return 403, "requests from other origins are refused", "MCP clients send no Origin, or their own host"
        if scope.get("method") not in ("GET", "POST", "DELETE"):
            return 405, "the MCP endpoint takes GET, POST and DELETE", ""
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MCP_BODY_BYTES or "transfer-encoding" in headers:
            return 413, f"MCP request bodies are at most {MCP_BODY_BYTES} bytes, with a Content-Length", ""
        return None

    def _unauthorized(self, scope: Scope, headers: dict[str, str]) -> tuple[str, str]:
        """What a 401 says: a user sending a stale token (a token file changed, an old login cookie) is
        told it does not match, not to send one."""
        given = headers.get("authorization") or COOKIE in headers.get("cookie", "")
        given = given or any(k == "token" for k, _ in parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        how = "open the console once with `?token=<token>`, or send `Authorization: Bearer <token>`"
        if given:
            return "the token does not match", f"use the token `mem serve` was started with: {how}"
        return "a token is required", how

    def _authorized(self, headers: dict[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a malformed cookie header is simply no session
            return False
        held = cookie.get(COOKIE)
        return held is not None and hmac.compare_digest(held.value.encode(), self.session.encode())

    def _login_redirect(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """`?token=…` with the right token: where to send the browser once the cookie is set."""
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if not self._all_the_token([v for k, v in pairs if k == "token"]):
            return None
        rest = urlencode([(k, v) for k, v in pairs if k != "token"])
        return same_site_path(scope.get("path", "/")) + (f"?{rest}" if rest else "")

    def _all_the_token(self, given: list[str]) -> bool:
        """A login link pasted twice (`?token=T&token=T`) is still a login; one wrong value is not."""
        return bool(given) and all(hmac.compare_digest(v.encode(), self.token.encode()) for v in given)


def same_site_path(path: str) -> str:
    """A decoded request path made safe to send back in `Location`: one leading slash (an open
    redirect otherwise), percent-encoded again (the header must be ASCII with no CR/LF)."""
    return "/" + quote(LEADING_SLASHES.sub("", path), safe=PATH_SAFE)


def _cookie(session: str) -> tuple[bytes, bytes]:
    return b"set-cookie", f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/".encode()


def _without_body(send: Callable) -> Callable:
    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return wrapped


def _with_headers(send: Callable) -> Callable:
    async def wrapped(message: dict) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped


async def _send(send: Callable, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _send_error(
    send: Callable,
    scope: Scope,
    status: int,
    message: str,
    hint: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """A refusal as the app words its errors: the HTML error page at a console address, else the JSON."""
    if is_console_path(scope.get("path", "")):
        shown_hint = f"<p>hint: {html.escape(hint)}</p>" if hint else ""
        body = ERROR_PAGE.format(message=html.escape(message), hint=shown_hint).encode()
        kind = b"text/html; charset=utf-8"
    else:
        body, kind = json.dumps({"error": message, "hint": hint}).encode(), b"application/json"
    await _send(send, status, body, [(b"content-type", kind), *(headers or [])])
