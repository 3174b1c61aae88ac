"""Helpers for the API and console tests: settings, the CLI twin of a route, a stand-in model, a real server."""

from __future__ import annotations

import json
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings, load_settings

BASE = "http://127.0.0.1:8765"


def server_settings(db: Path, **overrides) -> Settings:
    """Settings a server gets: no language model unless a test passes one in (no network, no probe)."""
    return load_settings({"db_path": db, "llm_provider": "none", **overrides})


def cli_json(capsys: pytest.CaptureFixture, *args: str) -> dict:
    """What `mem <args> --json` prints, run in process."""
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def without_timing(payload: dict) -> dict:
    """Two runs of the same ask differ only in how long they took."""
    return {k: v for k, v in payload.items() if k not in ("timing", "type")}


class SlowLLM:
    """A stand-in model for unit tests (never a real one): streams `text` word by word, `delay`
    seconds apart, and records how far it got and whether its generator was closed."""

    provider = "fake"
    model = "slow-scripted"

    def __init__(self, text: str, delay: float = 0.0) -> None:
        self.text = text
        self.delay = delay
        self.usage: dict[str, int] = {}
        self.produced = 0
        self.closed = threading.Event()
        self.active = 0
        self.most_active = 0
        self.lock = threading.Lock()
        self.calls: list[list[dict]] = []
        self.fail_after: int | None = None
        self.fail: Exception | None = None

    def check(self) -> str:
        return "ready"

    def stream(self, messages, generation):
        self.calls.append(messages)
        if generation.max_tokens <= 3:  # a yes/no judgement (the answer layer's verifier): agree, at once
            yield "yes"
            return
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            words = self.text.split(" ")
            for index, word in enumerate(words):
                if self.fail is not None and index == self.fail_after:
                    raise self.fail
                if self.delay:
                    time.sleep(self.delay)
                self.produced += 1
                yield word + " "
            self.usage = {"completion_tokens": len(words)}
        finally:
            with self.lock:
                self.active -= 1
            self.closed.set()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_server(app) -> Iterator[str]:
    """`app` served by uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
