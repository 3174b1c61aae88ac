"""OpenAICompatLLM against a real OpenAI-compatible server: `python -m llama_cpp.server` serving
SmolLM2-135M (plumbing only: the model is too small to be judged on what it says)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.base import Generation, LLMUnavailable
from crossmodalrag.answer.llm.openai_compat import OpenAICompatLLM
from crossmodalrag.config import Settings
from tests.answer.llm.conftest import free_port
from tests.llm import require_llama_cpp, smollm_gguf

pytestmark = pytest.mark.integration

READY_SECONDS = 60.0
MESSAGES = [{"role": "user", "content": "Say hello."}]


class LlamaServer:
    """`python -m llama_cpp.server` on a free loopback port, its output in a log file."""

    def __init__(self, gguf: Path, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048"]
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def models(self) -> list[str]:
        """The ids GET /v1/models lists (plain http.client: no proxy settings can interfere)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", "/v1/models")
            response = conn.getresponse()
            if response.status != 200:
                raise OSError(f"status {response.status}")
            return [model["id"] for model in json.loads(response.read())["data"]]
        finally:
            conn.close()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {self.process.returncode}:\n{self.log()}")
            try:
                self.models()
                return
            except (OSError, ValueError, KeyError, http.client.HTTPException):
                time.sleep(0.2)
        self.stop()
        pytest.fail(f"llama_cpp.server was not ready within {READY_SECONDS:g} s:\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def start_server(folder: Path) -> LlamaServer:
    require_llama_cpp()
    pytest.importorskip("uvicorn", reason="llama-cpp-python's [server] extra is not installed")
    server = LlamaServer(smollm_gguf(), folder / "llama-server.log")
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[LlamaServer]:
    server = start_server(tmp_path_factory.mktemp("llama-server"))
    yield server
    server.stop()


def test_the_default_model_comes_from_the_listing(llama_server: LlamaServer, tmp_path: Path):
    llm = load_llm(Settings(db_path=tmp_path / "m.db", llm_provider="openai", llm_base_url=llama_server.url))
    assert isinstance(llm, OpenAICompatLLM)
    [listed] = llama_server.models()
    assert llm.model == listed and llm.model != "default"
    assert listed in llm.check()


def test_real_tokens_stream_from_the_server(llama_server: LlamaServer, tmp_path: Path):
    settings = Settings(db_path=tmp_path / "m.db", llm_provider="openai", llm_base_url=llama_server.url + "/v1")
    llm = load_llm(settings)
    pieces = list(llm.stream(MESSAGES, Generation(max_tokens=16, temperature=0.0)))
    assert pieces and all(isinstance(piece, str) and piece for piece in pieces)
    assert "".join(pieces).strip()
    assert len(pieces) <= 16  # the server streams one token per event and honours max_tokens


def test_a_stopped_server_is_unavailable(tmp_path: Path, sleeps):
    server = start_server(tmp_path)
    try:
        llm = load_llm(Settings(db_path=tmp_path / "m.db", llm_provider="openai", llm_base_url=server.url))
        assert llm.check()  # reachable while it runs
        model = llm.model
    finally:
        server.stop()
    assert server.process.returncode is not None
    with pytest.raises(LLMUnavailable) as caught:
        next(llm.stream(MESSAGES, Generation(max_tokens=4)))
    assert "cannot connect" in caught.value.message and server.url in caught.value.message
    assert llm.model == model  # remembered: no listing needed to report which model failed
