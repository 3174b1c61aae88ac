"""OllamaLLM against a protocol-faithful stand-in for Ollama's native API.

Ollama itself cannot be installed on this machine (no binary from the registries we can reach), so
these tests run a local HTTP server that speaks the documented protocol (docs/api.md upstream):
POST /api/chat streams `application/x-ndjson`, one JSON object per line with `message.content` and
`done: false`, then a final object with `done: true` and the token counts `prompt_eval_count` and
`eval_count`; GET /api/tags lists pulled models; GET /api/version answers; an unknown model is a 404
with `{"error": …}`, and a failure mid-generation is a line `{"error": …}`.
"""

from __future__ import annotations

import time

import pytest

from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.base import Generation, LLMError, LLMOutOfTime, LLMUnavailable
from crossmodalrag.answer.llm.http import Endpoint
from crossmodalrag.answer.llm.ollama import OllamaLLM
from crossmodalrag.config import Settings, load_settings
from tests.answer.llm.conftest import (
    OLLAMA_MODEL,
    StubServer,
    ndjson,
    ollama_chat_events,
    reply_hang,
    reply_json,
    reply_stream,
    serve_ollama,
)

PIECES = ["The parser", " was rewritten", " in March", " [E1]."]
MESSAGES = [
    {"role": "system", "content": "Cite evidence."},
    {"role": "user", "content": "When was the parser rewritten?"},
]


@pytest.fixture
def ollama(stub: StubServer) -> StubServer:
    return serve_ollama(stub, PIECES)


def make(url: str, model: str | None = OLLAMA_MODEL, keep_alive: str = "5m", context_tokens: int = 4096) -> OllamaLLM:
    return OllamaLLM(Endpoint(url, 2.0, 5.0, {}), model, keep_alive, context_tokens)


def test_pieces_stream_in_order_and_join_to_the_answer(ollama: StubServer):
    llm = make(ollama.url)
    stream = llm.stream(MESSAGES, Generation(max_tokens=64))
    assert next(stream) == "The parser"
    assert [*stream] == PIECES[1:]
    assert llm.usage == {"prompt_tokens": 26, "completion_tokens": len(PIECES)}


def test_the_request_carries_model_messages_keep_alive_and_options(ollama: StubServer, monkeypatch):
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "ollama")
    monkeypatch.setenv("CMRAG_LLM_BASE_URL", ollama.url)
    monkeypatch.setenv("CMRAG_LLM_MODEL", OLLAMA_MODEL)
    monkeypatch.setenv("CMRAG_LLM_KEEP_ALIVE", "30m")
    monkeypatch.setenv("CMRAG_LLM_CONTEXT_TOKENS", "2048")
    llm = load_llm(load_settings())
    assert isinstance(llm, OllamaLLM) and llm.provider == "ollama" and llm.model == OLLAMA_MODEL
    text = "".join(llm.stream(MESSAGES, Generation(max_tokens=77, temperature=0.25, stop=["\n\n"])))
    assert text == "".join(PIECES)
    [seen] = ollama.hits("/api/chat")
    assert seen.method == "POST"
    assert seen.json() == {
        "model": OLLAMA_MODEL,
        "messages": MESSAGES,
        "stream": True,
        "keep_alive": "30m",
        "options": {"temperature": 0.25, "num_predict": 77, "num_ctx": 2048, "stop": ["\n\n"]},
    }


def test_no_stop_option_unless_asked(ollama: StubServer):
    list(make(ollama.url).stream(MESSAGES, Generation()))
    options = ollama.hits("/api/chat")[0].json()["options"]
    assert "stop" not in options and options["num_predict"] == Generation().max_tokens


def test_usage_comes_from_the_final_line(stub: StubServer):
    events = ollama_chat_events(OLLAMA_MODEL, ["a", "b"], prompt_eval_count=812, eval_count=97)
    stub.on("POST", "/api/chat", reply_stream(ndjson(*events), "application/x-ndjson"))
    llm = make(stub.url)
    assert list(llm.stream(MESSAGES, Generation())) == ["a", "b"]
    assert llm.usage == {"prompt_tokens": 812, "completion_tokens": 97}


def test_usage_is_reset_by_a_new_stream(ollama: StubServer, stub: StubServer):
    llm = make(ollama.url)
    list(llm.stream(MESSAGES, Generation()))
    assert llm.usage
    stub.on("POST", "/api/chat", reply_json({"error": "model is loading"}, status=400))
    with pytest.raises(LLMError):
        list(llm.stream(MESSAGES, Generation()))
    assert llm.usage == {}


def test_an_error_line_mid_stream_is_an_error(stub: StubServer):
    first = next(ollama_chat_events(OLLAMA_MODEL, ["The parser"]))
    lines = ndjson(first, {"error": "an unknown error was encountered while running the model"})
    stub.on("POST", "/api/chat", reply_stream(lines, "application/x-ndjson"))
    received = []
    with pytest.raises(LLMError) as caught:
        for piece in make(stub.url).stream(MESSAGES, Generation()):
            received.append(piece)
    assert received == ["The parser"]
    assert not isinstance(caught.value, LLMUnavailable)
    assert "an unknown error was encountered" in caught.value.message


def test_a_line_that_is_not_json_is_an_error(stub: StubServer):
    stub.on("POST", "/api/chat", reply_stream(["<html>proxy error</html>\n"], "application/x-ndjson"))
    with pytest.raises(LLMError, match="not JSON"):
        list(make(stub.url).stream(MESSAGES, Generation()))


def test_an_answer_cut_off_before_done_is_an_error(stub: StubServer):
    """A body delimited by closing the connection ends the same way whether finished or not: only
    the missing `done: true` line tells a crashed server from a finished answer."""
    events = list(ollama_chat_events(OLLAMA_MODEL, ["The parser", " was"]))[:-1]
    stub.on("POST", "/api/chat", reply_stream(ndjson(*events), "application/x-ndjson", close_delimited=True))
    received = []
    with pytest.raises(LLMError, match="ended before it was done"):
        for piece in make(stub.url).stream(MESSAGES, Generation()):
            received.append(piece)
    assert received == ["The parser", " was"]


def test_a_model_that_is_not_pulled_is_an_error_carrying_ollamas_message(ollama: StubServer, sleeps):
    with pytest.raises(LLMError) as caught:
        list(make(ollama.url, model="llama3.2").stream(MESSAGES, Generation()))
    assert not isinstance(caught.value, LLMUnavailable)
    assert 'model "llama3.2" not found, try pulling it first' in caught.value.message
    assert len(ollama.hits("/api/chat")) == 1 and sleeps == []


def test_a_stopped_server_is_unavailable_before_any_piece(closed_url: str, sleeps):
    stream = make(closed_url).stream(MESSAGES, Generation())
    with pytest.raises(LLMUnavailable):
        next(stream)


def test_the_model_defaults_to_the_first_pulled_one(stub: StubServer):
    serve_ollama(stub, PIECES, models=("llama3.2:3b", OLLAMA_MODEL))
    llm = make(stub.url, model=None)
    assert llm.model == "llama3.2:3b"
    list(llm.stream(MESSAGES, Generation()))
    list(llm.stream(MESSAGES, Generation()))
    assert [seen.json()["model"] for seen in stub.hits("/api/chat")] == ["llama3.2:3b", "llama3.2:3b"]
    assert len(stub.hits("/api/tags")) == 1  # asked once, then remembered


def test_load_llm_without_a_model_asks_the_server(ollama: StubServer):
    llm = load_llm(Settings(llm_provider="ollama", llm_base_url=ollama.url))
    assert llm.model == OLLAMA_MODEL
    assert "".join(llm.stream(MESSAGES, Generation())) == "".join(PIECES)


def test_no_pulled_model_is_unavailable(stub: StubServer):
    serve_ollama(stub, PIECES, models=())
    with pytest.raises(LLMUnavailable) as caught:
        make(stub.url, model=None).model  # noqa: B018
    assert "ollama pull" in caught.value.hint


def test_check_names_the_server_and_model(ollama: StubServer):
    line = make(ollama.url).check()
    assert ollama.url in line and OLLAMA_MODEL in line


def test_check_accepts_a_model_named_without_its_latest_tag(stub: StubServer):
    serve_ollama(stub, PIECES, models=("phi3:latest",))
    assert "phi3" in make(stub.url, model="phi3").check()


def test_check_fails_when_the_configured_model_is_missing(ollama: StubServer):
    with pytest.raises(LLMError) as caught:
        make(ollama.url, model="mistral:7b").check()
    assert "mistral:7b" in caught.value.message
    assert "ollama pull mistral:7b" in caught.value.hint and OLLAMA_MODEL in caught.value.hint


def test_check_on_a_stopped_server_is_unavailable(closed_url: str, sleeps):
    with pytest.raises(LLMUnavailable):
        make(closed_url).check()


def test_a_server_silent_past_the_generations_deadline_is_out_of_time(stub: StubServer):
    """build-memory's --max-minutes reaches the HTTP wait, not only the gaps between pieces."""
    stub.on("POST", "/api/chat", reply_hang())
    with pytest.raises(LLMOutOfTime):
        list(make(stub.url).stream(MESSAGES, Generation(max_tokens=8, deadline=time.monotonic() + 0.3)))
