"""A real HTTP server on a loopback port, scripted per route, for testing the LLM backends' wire code.

`StubServer` runs `http.server.ThreadingHTTPServer` in a thread on port 0 and records every request it
receives. Each route gets a list of replies used in turn (the last one repeats), so "503, 503, then
200" is one line. Replies are plain functions of (handler, stub, seen): JSON documents, streamed bodies
(chunked, or delimited by closing the connection) that may end normally, hang or drop mid-stream,
hanging before any header, and closing without answering.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from crossmodalrag.answer.llm import http as http_module
from crossmodalrag.answer.llm import ollama as ollama_module
from crossmodalrag.answer.llm.http import Endpoint

HANG_SECONDS = 10.0  # how long a hanging reply waits at most; closing the stub ends it at once
OLLAMA_MODEL = "qwen2.5:1.5b"
OPENAI_MODEL = "local-model"


@dataclass
class Seen:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


Reply = Callable[[BaseHTTPRequestHandler, "StubServer", Seen], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, like real model servers

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self.server.stub.dispatch(self)  # type: ignore[attr-defined]

    do_POST = do_GET


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class StubServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[Seen] = []
        self.routes: dict[tuple[str, str], list[Reply]] = {}
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        kind = _IPv6Server if ":" in host else ThreadingHTTPServer
        self.httpd = kind((host, 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.stub = self  # type: ignore[attr-defined]
        port = self.httpd.server_address[1]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def on(self, method: str, path: str, *replies: Reply) -> StubServer:
        """Answer `method path` with these replies in turn; the last one repeats."""
        self.routes[(method, path)] = list(replies)
        return self

    def hits(self, path: str, method: str | None = None) -> list[Seen]:
        return [seen for seen in self.requests if seen.path == path and method in (None, seen.method)]

    def dispatch(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        seen = Seen(handler.command, handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)
        with self._lock:
            self.requests.append(seen)
            replies = self.routes.get((handler.command, handler.path))
            if replies is None:
                reply = reply_json({"error": f"no route for {handler.command} {handler.path}"}, status=404)
            else:
                reply = replies.pop(0) if len(replies) > 1 else replies[0]
        try:
            reply(handler, self, seen)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # the client gave up first, as some tests intend

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


# Replies -------------------------------------------------------------------------------------------


def reply_json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A complete JSON (or, given bytes/str, raw) document."""

    def send(handler: BaseHTTPRequestHandler, stub: StubServer, seen: Seen) -> None:
        data = (
            body.encode() if isinstance(body, str) else body if isinstance(body, bytes) else json.dumps(body).encode()
        )
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    return send


def reply_stream(
    chunks: list[str | bytes] | Callable[[Seen], list[str | bytes]],
    content_type: str,
    *,
    then: str = "end",
    close_delimited: bool = False,
    pause: float = 0.0,
) -> Reply:
    """A 200 whose body is sent chunk by chunk, flushed after each.

    then: "end" finishes the body properly, "hang" stops sending but keeps the connection open,
    "drop" closes the connection without finishing the body, "keep" returns with the body open
    for the caller to continue. close_delimited sends an HTTP/1.0
    style body (no length, no chunking: the end is the connection closing), where a drop looks
    exactly like a normal end to the HTTP layer.
    """

    def send(handler: BaseHTTPRequestHandler, stub: StubServer, seen: Seen) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        if close_delimited:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for chunk in chunks(seen) if callable(chunks) else chunks:
            data = chunk.encode() if isinstance(chunk, str) else chunk
            handler.wfile.write(data if close_delimited else b"%x\r\n%s\r\n" % (len(data), data))
            handler.wfile.flush()
            if pause:
                stub.stopping.wait(pause)
        if then == "hang":
            stub.stopping.wait(HANG_SECONDS)
            _drop(handler)
        elif then == "drop":
            _drop(handler)
        elif then == "end" and not close_delimited:
            handler.wfile.write(b"0\r\n\r\n")

    return send


def reply_hang() -> Reply:
    """Read the request, then send nothing at all (not even a status line)."""

    def send(handler: BaseHTTPRequestHandler, stub: StubServer, seen: Seen) -> None:
        stub.stopping.wait(HANG_SECONDS)
        _drop(handler)

    return send


def reply_close() -> Reply:
    """Read the request, then close the connection without answering."""

    def send(handler: BaseHTTPRequestHandler, stub: StubServer, seen: Seen) -> None:
        _drop(handler)

    return send


def _drop(handler: BaseHTTPRequestHandler) -> None:
    handler.close_connection = True
    try:
        handler.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# Protocol stand-ins --------------------------------------------------------------------------------


def ndjson(*events: dict) -> list[str]:
    return [json.dumps(event) + "\n" for event in events]


def sse(*events: dict | str) -> list[str]:
    """Server-sent events: dicts become `data: {json}`, strings are sent as given (e.g. "[DONE]")."""
    return [f"data: {event if isinstance(event, str) else json.dumps(event)}\n\n" for event in events]


def ollama_chat_events(model: str, pieces: list[str], prompt_eval_count: int = 26, eval_count: int | None = None):
    """What Ollama's POST /api/chat streams (docs/api.md, "Chat request (streaming)")."""
    created = "2025-01-01T12:00:00.000000000Z"
    for piece in pieces:
        message = {"role": "assistant", "content": piece}
        yield {"model": model, "created_at": created, "message": message, "done": False}
    yield {
        "model": model,
        "created_at": created,
        "message": {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": "stop",
        "total_duration": 4_883_583_458,
        "load_duration": 1_334_875,
        "prompt_eval_count": prompt_eval_count,
        "prompt_eval_duration": 342_546_000,
        "eval_count": len(pieces) if eval_count is None else eval_count,
        "eval_duration": 4_535_599_000,
    }


def serve_ollama(stub: StubServer, pieces: list[str], models: tuple[str, ...] = (OLLAMA_MODEL,)) -> StubServer:
    """Ollama's native API as documented: /api/version, /api/tags, and /api/chat streaming NDJSON,
    answering 404 {"error": …} for a model that is not pulled, as Ollama does."""
    stub.on("GET", "/api/version", reply_json({"version": "0.5.7"}))
    tags = [
        {"name": m, "model": m, "size": 986_061_892, "digest": "a" * 64, "details": {"format": "gguf"}} for m in models
    ]
    stub.on("GET", "/api/tags", reply_json({"models": tags}))

    def chat(handler: BaseHTTPRequestHandler, server: StubServer, seen: Seen) -> None:
        model = seen.json().get("model", "")
        if model not in models and f"{model}:latest" not in models:
            error = {"error": f'model "{model}" not found, try pulling it first'}
            return reply_json(error, status=404)(handler, server, seen)
        events = ollama_chat_events(model, pieces)
        reply_stream(ndjson(*events), "application/x-ndjson", pause=0.01)(handler, server, seen)

    return stub.on("POST", "/api/chat", chat)


def openai_chunk(content: str | None = None, finish_reason: str | None = None, role: str | None = None) -> dict:
    delta = {k: v for k, v in (("role", role), ("content", content)) if v is not None}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1735732800,
        "model": "m",
        "choices": [choice],
    }


def openai_events(pieces: list[str], usage: dict | None = None) -> list[str]:
    """What an OpenAI-compatible server streams for /v1/chat/completions with stream=true."""
    events: list[dict | str] = [openai_chunk(role="assistant", content="")]
    events += [openai_chunk(content=piece) for piece in pieces]
    events.append(openai_chunk(finish_reason="stop"))
    if usage is not None:  # stream_options.include_usage: one last chunk with no choices
        events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage})
    events.append("[DONE]")
    return [": keep-alive\n\n", *sse(*events)]


def serve_openai(stub: StubServer, pieces: list[str], models: tuple[str, ...] = (OPENAI_MODEL,)) -> StubServer:
    data = [{"id": m, "object": "model", "created": 1735732800, "owned_by": "me"} for m in models]
    stub.on("GET", "/v1/models", reply_json({"object": "list", "data": data}))
    usage = {"prompt_tokens": 31, "completion_tokens": len(pieces), "total_tokens": 31 + len(pieces)}
    return stub.on("POST", "/v1/chat/completions", reply_stream(openai_events(pieces, usage), "text/event-stream"))


# Fixtures ------------------------------------------------------------------------------------------


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    yield server
    server.close()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff and Retry-After waits of the HTTP layer, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(http_module, "time", SimpleNamespace(sleep=recorded.append, monotonic=time.monotonic))
    return recorded


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Paths of every connection attempt the HTTP layer makes."""
    attempts: list[str] = []
    real = Endpoint._connect

    def counting(self: Endpoint, path: str, deadline: float | None):
        attempts.append(path)
        return real(self, path, deadline)

    monkeypatch.setattr(Endpoint, "_connect", counting)
    return attempts


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def closed_url() -> str:
    """A loopback URL where nothing listens: connections are refused."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(autouse=True)
def no_real_ollama(monkeypatch: pytest.MonkeyPatch, closed_url: str) -> None:
    """No test may find an Ollama that happens to run on this machine's 11434."""
    monkeypatch.setattr(ollama_module, "DEFAULT_URL", closed_url)
