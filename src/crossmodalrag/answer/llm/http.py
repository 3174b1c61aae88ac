"""HTTP for remote model servers: loopback-or-HTTPS policy, a short connect timeout, bounded retries.

Plain `http.client` keeps the core free of an HTTP dependency and lets the connect timeout (how
fast a dead server is noticed) differ from the read timeout (how long a generation may take).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import socket
import time
from typing import Iterator
from urllib.parse import urlsplit

from crossmodalrag.answer.llm.base import LLMError, LLMOutOfTime, LLMUnavailable
from crossmodalrag.errors import ConfigError

RETRY_STATUSES = {429, 500, 502, 503, 504}
MAX_ATTEMPTS = 3
BACKOFF_SECONDS = 0.3
MAX_RETRY_AFTER_SECONDS = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str) -> str:
    """The URL, if it is HTTPS or plain HTTP to loopback. Raises ConfigError otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"invalid LLM base URL {url!r}", "use http://127.0.0.1:PORT or https://HOST")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError:
        raise ConfigError(
            f"invalid port in LLM base URL {url!r}", "use http://127.0.0.1:PORT or https://HOST"
        ) from None
    if parts.username or parts.password:
        raise ConfigError(
            "the LLM base URL carries credentials",
            "put the key in an environment variable named by CMRAG_LLM_API_KEY_ENV",
        )
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError(
            f"refusing plain HTTP to {parts.hostname}: evidence from your memory would cross the network unencrypted",
            "use https:// for remote servers (plain http is allowed only to localhost)",
        )
    return url.rstrip("/")


class Endpoint:
    """One server: where it is, how long to wait for it, what to send with every request."""

    def __init__(
        self,
        base_url: str,
        connect_timeout: float,
        read_timeout: float,
        headers: dict[str, str],
        attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.base_url = check_url(base_url)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.headers = headers
        self.attempts = attempts

    def _connect(self, path: str, deadline: float | None) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(self.base_url + path)
        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        port = parts.port or (443 if parts.scheme == "https" else 80)  # http.client misreads "::1" without one
        conn = kind(parts.hostname, port, timeout=self.connect_timeout)
        conn.connect()
        conn.sock.settimeout(self._read_wait(deadline))  # connected: now allow for a slow generation
        return conn, parts.path + (f"?{parts.query}" if parts.query else "")

    def _read_wait(self, deadline: float | None) -> float:
        """How long one read may wait: the read timeout, cut to what is left before the caller's
        deadline (build-memory's --max-minutes), so a server still reading a long prompt cannot hold
        the run past it before its first byte. Each read of the stream waits at most this long."""
        if deadline is None:
            return self.read_timeout
        return max(0.05, min(self.read_timeout, deadline - time.monotonic()))

    def _timed_out(self, deadline: float | None, error: LLMError) -> LLMError:
        """The error for a read that timed out: the caller's deadline if it has passed, else `error`."""
        if deadline is not None and time.monotonic() >= deadline:
            return LLMOutOfTime("the model call was stopped at the time budget", "raise --max-minutes")
        return error

    def request(
        self, method: str, path: str, payload: dict | None = None, deadline: float | None = None
    ) -> http.client.HTTPResponse:
        """An open 200 response. Retries refused connections, 429 and 5xx with backoff.

        Raises LLMUnavailable when the server cannot be reached or stays overloaded, LLMError
        on any other status (auth, validation), which a retry would not fix, and LLMOutOfTime
        when `deadline` (time.monotonic()) passes before the answer starts.
        """
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.headers}
        problem = ""
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
            try:
                conn, target = self._connect(path, deadline)
            except socket.timeout:
                # A server that does not answer a connect within the timeout is not coming back in a second.
                raise LLMUnavailable(
                    f"no answer from {self.base_url} within {self.connect_timeout:g} s", _reach_hint(self.base_url)
                ) from None
            except OSError as error:
                problem = f"cannot connect to {self.base_url}: {error.strerror or error}"
                continue
            try:
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
            except socket.timeout:
                # Reached, but busy past the read timeout: a retry would only wait as long again.
                conn.close()
                busy = LLMError(f"{self.base_url} did not answer within {self.read_timeout:g} s", _timeout_hint())
                raise self._timed_out(deadline, busy) from None
            except (OSError, http.client.HTTPException) as error:
                conn.close()
                problem = f"{self.base_url} dropped the request: {error or type(error).__name__}"
                continue
            if response.status == 200:
                if conn.sock:  # one request per connection: the fd lives on until the response is read or closed
                    conn.sock.close()
                return response
            detail = _error_detail(response)
            conn.close()
            if response.status in RETRY_STATUSES:
                problem = f"{self.base_url} answered {response.status}: {detail}"
                retry_after = response.getheader("Retry-After")
                if retry_after and retry_after.isdigit():
                    time.sleep(min(float(retry_after), MAX_RETRY_AFTER_SECONDS))
                continue
            hint = (
                "check the key in the variable named by CMRAG_LLM_API_KEY_ENV" if response.status in (401, 403) else ""
            )
            raise LLMError(f"{self.base_url}{path} answered {response.status}: {detail}", hint or _model_hint())
        raise LLMUnavailable(problem, _reach_hint(self.base_url))

    def get_json(self, path: str) -> dict:
        """GET a small JSON document. Raises LLMUnavailable / LLMError like `request`."""
        response = self.request("GET", path)
        try:
            return json.loads(response.read())
        except (OSError, ValueError) as error:
            raise LLMError(f"{self.base_url}{path} sent invalid JSON: {error}") from None

    def stream_lines(self, path: str, payload: dict, deadline: float | None = None) -> Iterator[str]:
        """POST, then yield the response body line by line as it arrives (NDJSON or SSE)."""
        response = self.request("POST", path, payload, deadline)
        pending = b""
        try:
            # read1, not readline: http.client's readline takes a chunked body cut at a chunk boundary
            # for its end, while read1 raises IncompleteRead.
            while block := response.read1(65536):
                *lines, pending = (pending + block).split(b"\n")
                for line in lines:
                    if text := line.decode("utf-8", "replace").strip():
                        yield text
            if response.length:  # a Content-Length body that ended short
                raise http.client.IncompleteRead(pending, response.length)
            if text := pending.decode("utf-8", "replace").strip():
                yield text
        except socket.timeout:
            stalled = LLMError(f"{self.base_url} stopped sending for {self.read_timeout:g} s", _timeout_hint())
            raise self._timed_out(deadline, stalled) from None
        except (OSError, http.client.HTTPException) as error:
            raise LLMError(f"the connection to {self.base_url} broke mid-answer: {error}") from None
        finally:
            response.close()


def _error_detail(response: http.client.HTTPResponse) -> str:
    try:
        raw = response.read(2000).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return response.reason
    try:
        data = json.loads(raw)
        error = data.get("error", data) if isinstance(data, dict) else data
        if isinstance(error, dict):
            error = error.get("message", error)
        raw = str(error)
    except ValueError:
        pass
    return " ".join(raw.split())[:300] or response.reason


def _reach_hint(base_url: str) -> str:
    return (
        f"start the model server at {base_url}, or set CMRAG_LLM_PROVIDER / CMRAG_LLM_BASE_URL; `mem doctor` checks it"
    )


def _model_hint() -> str:
    return "check CMRAG_LLM_MODEL against the models the server offers"


def _timeout_hint() -> str:
    return "raise CMRAG_LLM_TIMEOUT, or use a smaller model"
