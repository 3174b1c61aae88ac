"""`mem serve` as a user starts it: a real process on a loopback port, with and without a token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.api.helpers import free_port

TOKEN = "a-long-enough-token-for-the-test-0123"


def start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "crossmodalrag", "serve", "--port", str(port), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx.get(url + "/health", timeout=1)
            return process, url
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError(f"mem serve did not start: {process.stderr.read()}")


def stop(process: subprocess.Popen) -> str:
    process.terminate()
    process.wait(10)
    return process.stderr.read()


def status_of_split_request(url: str, target: str) -> int:
    """The status of a GET sent in two pieces, as a network delivers a long request line (over loopback it
    arrives whole): uvicorn's h11 refused an unfinished head over 16 KB, the longest question's is 24 KB."""
    address = urlsplit(url)
    head = f"GET {target} HTTP/1.1\r\nHost: {address.netloc}\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection((address.hostname, address.port), timeout=30) as raw:
        raw.sendall(head[:20_000])
        time.sleep(0.5)  # let the server read the first piece alone (a pause, not a timed assertion)
        raw.sendall(head[20_000:])
        reply = raw.makefile("rb").readline()
    return int(reply.split()[1])


def test_serve_starts_on_loopback_and_answers(sample_db: Path) -> None:
    env = {**os.environ, "CMRAG_LLM_PROVIDER": "none"}
    process, url = start(["--db-path", str(sample_db)], env)
    try:
        assert httpx.get(url + "/health").json()["token_required"] is False
        answer = httpx.get(url + "/ask", params={"q": "Why did I change the parser?", "no_llm": "true"}).json()
        assert answer["evidence"] and answer["evidence"][0]["source_id"]
        assert status_of_split_request(url, "/ask?no_llm=true&q=" + quote("🚀" * 2000)) == 200
        assert httpx.get(url + "/", headers={"host": "evil.example"}).status_code == 421
    finally:
        stderr = stop(process)
    assert f"mem console at {url}/" in stderr and "Traceback" not in stderr


def test_serve_with_a_token_file_prints_the_login_url_without_it_and_requires_it(
    sample_db: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    env = {**os.environ, "CMRAG_LLM_PROVIDER": "none"}
    process, url = start(["--db-path", str(sample_db), "--token-file", str(token_file)], env)
    try:
        assert httpx.get(url + "/health").status_code == 401
        assert httpx.get(url + "/health", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
        with httpx.Client() as browser:
            login = browser.get(url + f"/?token={TOKEN}", follow_redirects=True)
            assert login.status_code == 200 and str(login.url) == url + "/"
            assert browser.get(url + "/sources").status_code == 200  # the cookie now stands for the token
    finally:
        stderr = stop(process)
    # the user has the token in the file: the log (journald, a container's) does not get it
    assert f"{url}/?token=<the token in {token_file}>" in stderr and TOKEN not in stderr


def test_a_port_in_use_or_a_host_not_of_this_machine_is_one_line_with_the_right_hint() -> None:
    import socket

    from crossmodalrag.cli.serve import _check_port
    from crossmodalrag.errors import CMRAGError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CMRAGError) as in_use:
            _check_port("127.0.0.1", port)
    assert in_use.value.hint == "pick another --port"
    with pytest.raises(CMRAGError) as foreign:
        _check_port("no.such.host.invalid", 0)
    assert "--host" in foreign.value.hint
    _check_port("[127.0.0.1]", 0)  # brackets, as an address is written in a url, are fine
