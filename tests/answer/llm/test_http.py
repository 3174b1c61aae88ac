"""The HTTP layer of the remote backends against a real local server: URL policy, retries, timeouts, streams."""

from __future__ import annotations

import gc
import http.client
import socket
import threading
import time
import warnings

import pytest

from crossmodalrag.answer.llm import http as http_module
from crossmodalrag.answer.llm.base import LLMError, LLMOutOfTime, LLMUnavailable
from crossmodalrag.answer.llm.http import MAX_ATTEMPTS, Endpoint, check_url
from crossmodalrag.errors import ConfigError
from tests.answer.llm.conftest import (
    HANG_SECONDS,
    StubServer,
    reply_close,
    reply_hang,
    reply_json,
    reply_stream,
)


def endpoint(url: str, read_timeout: float = 5.0, headers: dict[str, str] | None = None) -> Endpoint:
    return Endpoint(url, 2.0, read_timeout, headers or {})


# check_url -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:11434", "http://127.0.0.1:11434"),
        ("http://127.0.0.2:8080/v1/", "http://127.0.0.2:8080/v1"),
        ("http://localhost:8080/v1", "http://localhost:8080/v1"),
        ("HTTP://LOCALHOST:8080", "HTTP://LOCALHOST:8080"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("https://203.0.113.7:8443", "https://203.0.113.7:8443"),
    ],
)
def test_check_url_allows_loopback_http_and_any_https(url, expected):
    assert check_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/v1",
        "http://192.168.1.10:11434",
        "http://10.0.0.2:8080",
        "http://0.0.0.0:8080",  # every interface, not loopback
        "http://localhost.example.com:8080",
        "http://[2001:db8::1]:8080",
    ],
)
def test_check_url_refuses_plain_http_to_another_host(url):
    with pytest.raises(ConfigError) as caught:
        check_url(url)
    assert "plain HTTP" in caught.value.message
    assert "https://" in caught.value.hint


@pytest.mark.parametrize(
    "url",
    [
        "https://user:sk-secret-123@api.example.com/v1",
        "http://sk-secret-123@127.0.0.1:8080",
        "https://:sk-secret-123@h",
    ],
)
def test_check_url_refuses_credentials_without_repeating_them(url):
    with pytest.raises(ConfigError) as caught:
        check_url(url)
    assert "credentials" in caught.value.message
    assert "CMRAG_LLM_API_KEY_ENV" in caught.value.hint
    assert "sk-secret-123" not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "127.0.0.1:8080",  # no scheme
        "localhost:11434",
        "ftp://127.0.0.1/models",
        "file:///tmp/model.gguf",
        "http://",
        "http:///v1",
        "http://127.0.0.1:notaport",
        "http://127.0.0.1:99999",
    ],
)
def test_check_url_refuses_garbage(url):
    with pytest.raises(ConfigError):
        check_url(url)


def test_endpoint_applies_the_policy():
    with pytest.raises(ConfigError):
        Endpoint("http://example.com", 1.0, 1.0, {})


# Requests and retries ------------------------------------------------------------------------------


def test_get_json_sends_headers_under_the_base_path(stub: StubServer):
    stub.on("GET", "/v1/models", reply_json({"data": [{"id": "m"}]}))
    got = endpoint(stub.url + "/v1/", headers={"Authorization": "Bearer k"}).get_json("/models")
    assert got == {"data": [{"id": "m"}]}
    [seen] = stub.requests
    assert (seen.method, seen.path) == ("GET", "/v1/models")
    assert seen.headers["authorization"] == "Bearer k"
    assert seen.headers["accept"] == "application/json"


def test_503_twice_then_200_succeeds_after_backing_off(stub: StubServer, sleeps: list[float]):
    busy = reply_json({"error": "loading model"}, status=503)
    stub.on("GET", "/api/version", busy, busy, reply_json({"version": "1"}))
    assert endpoint(stub.url).get_json("/api/version") == {"version": "1"}
    assert len(stub.requests) == 3
    assert sleeps == [http_module.BACKOFF_SECONDS, http_module.BACKOFF_SECONDS * 2]


def test_a_real_backoff_also_ends_in_success(stub: StubServer):
    """The same without the recorded sleeps: the waits really happen and the answer arrives."""
    stub.on("GET", "/x", reply_json({}, status=502), reply_json({"ok": True}))
    assert endpoint(stub.url).get_json("/x") == {"ok": True}
    assert len(stub.requests) == 2


def test_429_with_retry_after_zero_is_retried(stub: StubServer, sleeps: list[float]):
    limited = reply_json({"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": "0"})
    stub.on("GET", "/x", limited, reply_json({"ok": True}))
    assert endpoint(stub.url).get_json("/x") == {"ok": True}
    assert len(stub.requests) == 2
    assert sleeps == [0.0, http_module.BACKOFF_SECONDS]


def test_a_long_retry_after_is_capped(stub: StubServer, sleeps: list[float]):
    limited = reply_json({}, status=429, headers={"Retry-After": "3600"})
    stub.on("GET", "/x", limited, reply_json({"ok": True}))
    assert endpoint(stub.url).get_json("/x") == {"ok": True}
    assert sleeps[0] == http_module.MAX_RETRY_AFTER_SECONDS


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_not_retried_and_point_at_the_key_variable(stub: StubServer, sleeps, status):
    stub.on("POST", "/v1/chat/completions", reply_json({"error": {"message": "Invalid API key"}}, status=status))
    with pytest.raises(LLMError) as caught:
        list(endpoint(stub.url + "/v1").stream_lines("/chat/completions", {"model": "m"}))
    assert not isinstance(caught.value, LLMUnavailable)
    assert len(stub.requests) == 1 and sleeps == []
    assert str(status) in caught.value.message and "Invalid API key" in caught.value.message
    assert "CMRAG_LLM_API_KEY_ENV" in caught.value.hint


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_are_not_retried(stub: StubServer, sleeps, status):
    stub.on("POST", "/api/chat", reply_json({"error": "model 'nope' not found"}, status=status))
    with pytest.raises(LLMError) as caught:
        list(endpoint(stub.url).stream_lines("/api/chat", {"model": "nope"}))
    assert not isinstance(caught.value, LLMUnavailable)
    assert len(stub.requests) == 1 and sleeps == []
    assert "model 'nope' not found" in caught.value.message
    assert "CMRAG_LLM_MODEL" in caught.value.hint


def test_an_html_error_page_is_summarised(stub: StubServer, sleeps):
    page = "<html>\n  <body>\n    <h1>Bad   Request</h1>\n" + "x" * 5000 + "</body></html>"
    stub.on("GET", "/x", reply_json(page, status=400))
    with pytest.raises(LLMError) as caught:
        endpoint(stub.url).get_json("/x")
    assert "<h1>Bad Request</h1>" in caught.value.message
    assert "\n" not in caught.value.message and len(caught.value.message) < 400


def test_persistent_500_gives_up_after_max_attempts(stub: StubServer, sleeps: list[float]):
    stub.on("GET", "/x", reply_json({"error": "CUDA out of memory"}, status=500))
    with pytest.raises(LLMUnavailable) as caught:
        endpoint(stub.url).get_json("/x")
    assert len(stub.requests) == MAX_ATTEMPTS
    assert len(sleeps) == MAX_ATTEMPTS - 1
    assert "500" in caught.value.message and "CUDA out of memory" in caught.value.message
    assert "mem doctor" in caught.value.hint


def test_connection_refused_gives_up_after_max_attempts(closed_url: str, sleeps, connects):
    with pytest.raises(LLMUnavailable) as caught:
        endpoint(closed_url).get_json("/api/tags")
    assert len(connects) == MAX_ATTEMPTS
    assert "cannot connect" in caught.value.message and closed_url in caught.value.message
    assert closed_url in caught.value.hint


def test_fewer_attempts_can_be_asked_for(closed_url: str, sleeps, connects):
    with pytest.raises(LLMUnavailable):
        Endpoint(closed_url, 1.0, 1.0, {}, attempts=1).get_json("/api/version")
    assert len(connects) == 1 and sleeps == []


def test_a_connect_timeout_is_not_retried(monkeypatch, sleeps, connects):
    def silent(*args, **kwargs):
        raise socket.timeout("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    with pytest.raises(LLMUnavailable) as caught:
        Endpoint("https://llm.example.com", 0.25, 5.0, {}).get_json("/v1/models")
    assert len(connects) == 1 and sleeps == []
    assert "within 0.25 s" in caught.value.message


def test_a_dropped_request_is_retried(stub: StubServer, sleeps):
    stub.on("GET", "/x", reply_close(), reply_json({"ok": True}))
    assert endpoint(stub.url).get_json("/x") == {"ok": True}
    assert len(stub.requests) == 2


def test_a_server_that_always_drops_the_request_is_unavailable(stub: StubServer, sleeps):
    stub.on("GET", "/x", reply_close())
    with pytest.raises(LLMUnavailable) as caught:
        endpoint(stub.url).get_json("/x")
    assert len(stub.requests) == MAX_ATTEMPTS
    assert "dropped the request" in caught.value.message


def test_invalid_json_is_an_error(stub: StubServer):
    stub.on("GET", "/x", reply_json("{not json"))
    with pytest.raises(LLMError) as caught:
        endpoint(stub.url).get_json("/x")
    assert not isinstance(caught.value, LLMUnavailable)
    assert "invalid JSON" in caught.value.message


def test_no_answer_within_the_read_timeout_is_not_retried(stub: StubServer, sleeps):
    """Waiting for a busy server three times over would multiply CMRAG_LLM_TIMEOUT."""
    stub.on("POST", "/api/chat", reply_hang())
    with pytest.raises(LLMError) as caught:
        list(endpoint(stub.url, read_timeout=0.3).stream_lines("/api/chat", {}))
    assert len(stub.requests) == 1 and sleeps == []
    assert "0.3 s" in caught.value.message
    assert "CMRAG_LLM_TIMEOUT" in caught.value.hint


def test_the_callers_deadline_cuts_the_wait_for_a_first_byte(stub: StubServer, sleeps):
    """build-memory's --max-minutes: a server still reading a long prompt must not hold the run for
    the whole read timeout (CMRAG_LLM_TIMEOUT, minutes) past its budget."""
    stub.on("POST", "/api/chat", reply_hang())
    deadline = time.monotonic() + 0.3
    with pytest.raises(LLMOutOfTime) as caught:
        list(endpoint(stub.url, read_timeout=HANG_SECONDS).stream_lines("/api/chat", {}, deadline))
    assert "--max-minutes" in caught.value.hint
    assert len(stub.requests) == 1 and sleeps == []


def test_a_stream_stalled_past_the_callers_deadline_is_out_of_time(stub: StubServer, sleeps):
    stub.on("POST", "/api/chat", reply_stream(['{"first": true}\n'], "application/x-ndjson", then="hang"))
    received = []
    with pytest.raises(LLMOutOfTime):
        lines = endpoint(stub.url, read_timeout=HANG_SECONDS).stream_lines("/api/chat", {}, time.monotonic() + 0.3)
        for line in lines:
            received.append(line)
    assert received == ['{"first": true}']


# Streams -------------------------------------------------------------------------------------------


def test_stream_lines_yields_stripped_non_blank_lines_as_they_arrive(stub: StubServer):
    chunks = ['{"a": 1}\n', "\n", '{"b":', ' 2}\r\n{"c": 3}\n', "   \n", '{"d": "é"}']  # split lines, CRLF, no final \n
    stub.on("POST", "/api/chat", reply_stream(chunks, "application/x-ndjson", pause=0.02))
    lines = list(endpoint(stub.url).stream_lines("/api/chat", {"model": "m", "stream": True}))
    assert lines == ['{"a": 1}', '{"b": 2}', '{"c": 3}', '{"d": "é"}']
    [seen] = stub.requests
    assert seen.json() == {"model": "m", "stream": True}
    assert seen.headers["content-type"] == "application/json"


def test_each_line_is_yielded_before_the_body_ends(stub: StubServer):
    """The second line is only sent once the test has received the first: a client that buffered
    the body would wait for it, and time out."""
    gate = threading.Event()

    def gated(handler, server, seen):
        reply_stream(["one\n"], "application/x-ndjson", then="keep")(handler, server, seen)
        gate.wait(HANG_SECONDS)
        handler.wfile.write(b"4\r\ntwo\n\r\n0\r\n\r\n")

    stub.on("POST", "/api/chat", gated)
    lines = endpoint(stub.url, read_timeout=HANG_SECONDS / 2).stream_lines("/api/chat", {})
    assert next(lines) == "one"
    gate.set()
    assert list(lines) == ["two"]


def test_stream_lines_sends_nothing_until_iterated(stub: StubServer):
    stub.on("POST", "/api/chat", reply_stream(["x\n"], "application/x-ndjson"))
    lines = endpoint(stub.url).stream_lines("/api/chat", {})
    assert stub.requests == []
    assert list(lines) == ["x"]


def test_a_stream_refused_by_the_server_raises_unavailable_before_any_line(closed_url: str, sleeps):
    lines = endpoint(closed_url).stream_lines("/api/chat", {})
    with pytest.raises(LLMUnavailable):
        next(lines)


def test_a_stream_that_stalls_past_the_read_timeout_is_an_error(stub: StubServer, sleeps):
    stub.on("POST", "/api/chat", reply_stream(['{"first": true}\n'], "application/x-ndjson", then="hang"))
    received = []
    with pytest.raises(LLMError) as caught:
        for line in endpoint(stub.url, read_timeout=0.3).stream_lines("/api/chat", {}):
            received.append(line)
    assert received == ['{"first": true}']
    assert not isinstance(caught.value, LLMUnavailable)
    assert "stopped sending for 0.3 s" in caught.value.message
    assert "CMRAG_LLM_TIMEOUT" in caught.value.hint
    assert len(stub.requests) == 1 and sleeps == []


def test_a_stream_dropped_mid_body_is_an_error(stub: StubServer, sleeps):
    stub.on("POST", "/api/chat", reply_stream(["one\n", "two\n"], "application/x-ndjson", then="drop"))
    received = []
    with pytest.raises(LLMError) as caught:
        for line in endpoint(stub.url).stream_lines("/api/chat", {}):
            received.append(line)
    assert received == ["one", "two"]
    assert not isinstance(caught.value, LLMUnavailable)
    assert "broke mid-answer" in caught.value.message
    assert len(stub.requests) == 1


def test_a_stream_dropped_before_its_first_chunk_is_an_error(stub: StubServer):
    stub.on("POST", "/api/chat", reply_stream([], "application/x-ndjson", then="drop"))
    with pytest.raises(LLMError, match="broke mid-answer"):
        list(endpoint(stub.url).stream_lines("/api/chat", {}))


def test_a_body_shorter_than_its_content_length_is_an_error(stub: StubServer):
    def short(handler, server, seen):
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        handler.wfile.write(b"first\nsecond")
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    stub.on("POST", "/api/chat", short)
    lines = endpoint(stub.url).stream_lines("/api/chat", {})
    assert next(lines) == "first"
    with pytest.raises(LLMError, match="broke mid-answer"):
        next(lines)


def test_a_complete_content_length_body_streams_to_its_end(stub: StubServer):
    stub.on("POST", "/api/chat", reply_json('{"a": 1}\n{"b": 2}'))
    assert list(endpoint(stub.url).stream_lines("/api/chat", {})) == ['{"a": 1}', '{"b": 2}']


def test_a_stream_dropped_inside_a_chunk_is_an_error(stub: StubServer):
    def half_a_chunk(handler, server, seen):
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        handler.wfile.write(b"6\r\nfirst\n\r\n40\r\nonly part of a 64-byte chunk")
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)

    stub.on("POST", "/api/chat", half_a_chunk)
    lines = endpoint(stub.url).stream_lines("/api/chat", {})
    assert next(lines) == "first"
    with pytest.raises(LLMError, match="broke mid-answer"):
        next(lines)


def test_connections_are_closed_not_left_to_the_garbage_collector(stub: StubServer):
    stub.on("GET", "/x", reply_json({"ok": True}))
    stub.on("POST", "/s", reply_stream(["a\n", "b\n"], "application/x-ndjson"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert endpoint(stub.url).get_json("/x") == {"ok": True}
        assert list(endpoint(stub.url).stream_lines("/s", {})) == ["a", "b"]
        abandoned = endpoint(stub.url).stream_lines("/s", {})
        assert next(abandoned) == "a"
        abandoned.close()  # a consumer that stops early
        del abandoned
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


# IPv6 loopback ----------------------------------------------------------------------------------------


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_loopback_server():
    server = StubServer(host="::1")
    try:
        server.on("GET", "/api/version", reply_json({"version": "6"}))
        assert endpoint(server.url).get_json("/api/version") == {"version": "6"}
    finally:
        server.close()


def test_an_ipv6_literal_without_a_port_uses_the_scheme_default(monkeypatch, sleeps):
    """http.client would read "::1" without a port as host ":" port 1."""
    dialled = []

    def record(conn: http.client.HTTPConnection) -> None:
        dialled.append((conn.host, conn.port))
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(http.client.HTTPConnection, "connect", record)
    with pytest.raises(LLMUnavailable):
        Endpoint("http://[::1]", 1.0, 1.0, {}, attempts=1).get_json("/api/version")
    with pytest.raises(LLMUnavailable):
        Endpoint("https://[2001:db8::1]/v1", 1.0, 1.0, {}, attempts=1).get_json("/models")
    assert dialled == [("::1", 80), ("2001:db8::1", 443)]
