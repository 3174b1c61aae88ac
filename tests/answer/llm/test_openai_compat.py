"""OpenAICompatLLM against a local server streaming server-sent events as OpenAI-compatible servers do
(`data: {chunk}` events with choices[0].delta.content, a usage chunk, `data: [DONE]`)."""

from __future__ import annotations

import time

import pytest

from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.base import Generation, LLMError, LLMOutOfTime, LLMUnavailable
from crossmodalrag.answer.llm.http import Endpoint
from crossmodalrag.answer.llm.openai_compat import OpenAICompatLLM, api_base
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import ConfigError
from tests.answer.llm.conftest import (
    OPENAI_MODEL,
    StubServer,
    openai_chunk,
    reply_hang,
    reply_json,
    reply_stream,
    serve_openai,
    sse,
)

PIECES = ["Nothing", " in your", " notes says", " so."]
MESSAGES = [{"role": "user", "content": "What did I decide about caching?"}]
KEY_VAR = "CMRAG_TEST_LLM_KEY"


@pytest.fixture
def server(stub: StubServer) -> StubServer:
    return serve_openai(stub, PIECES)


def make(url: str, model: str | None = OPENAI_MODEL) -> OpenAICompatLLM:
    return OpenAICompatLLM(Endpoint(api_base(url), 2.0, 5.0, {}), model)


def test_pieces_stream_in_order_and_usage_is_parsed(server: StubServer):
    llm = make(server.url)
    assert list(llm.stream(MESSAGES, Generation())) == PIECES
    assert llm.usage == {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35}


def test_the_request_carries_model_messages_and_generation(server: StubServer):
    list(make(server.url).stream(MESSAGES, Generation(max_tokens=12, temperature=0.0, stop=["</answer>"])))
    [seen] = server.hits("/v1/chat/completions")
    assert seen.method == "POST"
    assert seen.json() == {
        "model": OPENAI_MODEL,
        "messages": MESSAGES,
        "stream": True,
        "max_tokens": 12,
        "temperature": 0.0,
        "stop": ["</answer>"],
    }
    assert "authorization" not in seen.headers


def test_no_stop_unless_asked(server: StubServer):
    list(make(server.url).stream(MESSAGES, Generation()))
    assert "stop" not in server.hits("/v1/chat/completions")[0].json()


def test_the_bearer_key_comes_from_the_named_variable(server: StubServer, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "sk-test-abc123")
    llm = load_llm(Settings(llm_provider="openai", llm_base_url=server.url, llm_api_key_env=KEY_VAR))
    assert "".join(llm.stream(MESSAGES, Generation())) == "".join(PIECES)
    [seen] = server.hits("/v1/chat/completions")
    assert seen.headers["authorization"] == "Bearer sk-test-abc123"
    assert server.hits("/v1/models")[0].headers["authorization"] == "Bearer sk-test-abc123"


def test_the_key_variable_may_live_in_dot_env(server: StubServer, isolated_env):
    (isolated_env / ".env").write_text(f"{KEY_VAR}=sk-from-dotenv\n", encoding="utf-8")
    llm = load_llm(Settings(llm_provider="openai", llm_base_url=server.url, llm_api_key_env=KEY_VAR))
    list(llm.stream(MESSAGES, Generation()))
    assert server.hits("/v1/chat/completions")[0].headers["authorization"] == "Bearer sk-from-dotenv"


def test_no_key_variable_no_authorization_header(server: StubServer, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "sk-set-but-not-named")
    llm = load_llm(Settings(llm_provider="openai", llm_base_url=server.url))
    list(llm.stream(MESSAGES, Generation()))
    assert all("authorization" not in seen.headers for seen in server.requests)


def test_a_named_variable_that_is_not_set_is_a_config_error(server: StubServer, monkeypatch):
    monkeypatch.delenv(KEY_VAR, raising=False)
    with pytest.raises(ConfigError) as caught:
        load_llm(Settings(llm_provider="openai", llm_base_url=server.url, llm_api_key_env=KEY_VAR))
    assert KEY_VAR in caught.value.message and KEY_VAR in caught.value.hint
    assert server.requests == []


def test_settings_from_the_environment_reach_the_endpoint(server: StubServer, monkeypatch):
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "openai")
    monkeypatch.setenv("CMRAG_LLM_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("CMRAG_LLM_API_KEY_ENV", KEY_VAR)
    monkeypatch.setenv(KEY_VAR, "sk-env")
    monkeypatch.setenv("CMRAG_LLM_CONNECT_TIMEOUT", "1.5")
    monkeypatch.setenv("CMRAG_LLM_TIMEOUT", "42")
    llm = load_llm(load_settings())
    assert isinstance(llm, OpenAICompatLLM)
    assert (llm.endpoint.base_url, llm.endpoint.connect_timeout, llm.endpoint.read_timeout) == (
        server.url + "/v1",
        1.5,
        42.0,
    )
    assert llm.endpoint.headers == {"Authorization": "Bearer sk-env"}


def test_a_rejected_key_is_an_error_that_points_at_the_variable(stub: StubServer, monkeypatch, sleeps):
    error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    stub.on("POST", "/v1/chat/completions", reply_json(error, status=401))
    monkeypatch.setenv(KEY_VAR, "sk-wrong")
    llm = load_llm(Settings(llm_provider="openai", llm_base_url=stub.url, llm_api_key_env=KEY_VAR, llm_model="m"))
    with pytest.raises(LLMError) as caught:
        list(llm.stream(MESSAGES, Generation()))
    assert not isinstance(caught.value, LLMUnavailable)
    assert "Incorrect API key provided" in caught.value.message
    assert "sk-wrong" not in str(caught.value)
    assert "CMRAG_LLM_API_KEY_ENV" in caught.value.hint
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1"),
        ("https://gateway.example.com/openai", "https://gateway.example.com/openai/v1"),
    ],
)
def test_api_base_adds_v1_when_missing(url, expected):
    assert api_base(url) == expected


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_load_llm_reaches_v1_whichever_way_the_url_is_written(server: StubServer, suffix):
    llm = load_llm(Settings(llm_provider="openai", llm_base_url=server.url + suffix, llm_model="m"))
    list(llm.stream(MESSAGES, Generation()))
    assert [seen.path for seen in server.requests] == ["/v1/chat/completions"]


def test_an_error_event_is_an_error(stub: StubServer):
    events = sse(openai_chunk(content="Partial"), {"error": {"message": "context length exceeded", "code": 400}})
    stub.on("POST", "/v1/chat/completions", reply_stream(events, "text/event-stream"))
    received = []
    with pytest.raises(LLMError) as caught:
        for piece in make(stub.url).stream(MESSAGES, Generation()):
            received.append(piece)
    assert received == ["Partial"]
    assert "context length exceeded" in caught.value.message


def test_an_error_event_given_as_a_string_is_an_error(stub: StubServer):
    stub.on("POST", "/v1/chat/completions", reply_stream(sse({"error": "overloaded"}), "text/event-stream"))
    with pytest.raises(LLMError, match="overloaded"):
        list(make(stub.url).stream(MESSAGES, Generation()))


def test_an_event_that_is_not_json_is_an_error(stub: StubServer):
    stub.on("POST", "/v1/chat/completions", reply_stream(sse("{truncated"), "text/event-stream"))
    with pytest.raises(LLMError, match="not JSON"):
        list(make(stub.url).stream(MESSAGES, Generation()))


def test_sse_comments_event_names_and_role_only_deltas_are_skipped(stub: StubServer):
    events = [
        ": ping\n\n",
        "event: message\n",
        *sse(openai_chunk(role="assistant"), openai_chunk(content="ok"), openai_chunk(finish_reason="stop")),
        "data:[DONE]\n\n",  # no space after the colon is valid SSE
    ]
    stub.on("POST", "/v1/chat/completions", reply_stream(events, "text/event-stream"))
    llm = make(stub.url)
    assert list(llm.stream(MESSAGES, Generation())) == ["ok"]
    assert llm.usage == {}


def test_nothing_after_done_is_read(stub: StubServer):
    events = sse(openai_chunk(content="kept"), "[DONE]", openai_chunk(content="ignored"))
    stub.on("POST", "/v1/chat/completions", reply_stream(events, "text/event-stream"))
    assert list(make(stub.url).stream(MESSAGES, Generation())) == ["kept"]


def test_a_finish_reason_without_done_ends_the_answer_cleanly(stub: StubServer):
    events = sse(openai_chunk(content="short"), openai_chunk(finish_reason="length"))
    stub.on("POST", "/v1/chat/completions", reply_stream(events, "text/event-stream", close_delimited=True))
    assert list(make(stub.url).stream(MESSAGES, Generation())) == ["short"]


def test_an_answer_cut_off_without_done_is_an_error(stub: StubServer):
    events = sse(openai_chunk(role="assistant"), openai_chunk(content="The cache"), openai_chunk(content=" was"))
    stub.on("POST", "/v1/chat/completions", reply_stream(events, "text/event-stream", close_delimited=True))
    received = []
    with pytest.raises(LLMError, match="ended without"):
        for piece in make(stub.url).stream(MESSAGES, Generation()):
            received.append(piece)
    assert received == ["The cache", " was"]


def test_the_default_model_is_the_first_listed(stub: StubServer):
    serve_openai(stub, PIECES, models=("qwen2.5-coder-1.5b", "other"))
    llm = make(stub.url, model=None)
    list(llm.stream(MESSAGES, Generation()))
    list(llm.stream(MESSAGES, Generation()))
    assert [seen.json()["model"] for seen in stub.hits("/v1/chat/completions")] == ["qwen2.5-coder-1.5b"] * 2
    assert len(stub.hits("/v1/models")) == 1


def test_a_server_listing_no_model_gets_a_placeholder(stub: StubServer):
    serve_openai(stub, PIECES, models=())
    llm = make(stub.url, model=None)
    assert llm.model == "default"
    assert list(llm.stream(MESSAGES, Generation())) == PIECES


def test_a_configured_model_skips_the_listing(server: StubServer):
    list(make(server.url, model="my-model").stream(MESSAGES, Generation()))
    assert server.hits("/v1/models") == []
    assert server.hits("/v1/chat/completions")[0].json()["model"] == "my-model"


def test_check_lists_the_models(stub: StubServer):
    serve_openai(stub, PIECES, models=("a", "b"))
    line = make(stub.url).check()
    assert stub.url + "/v1" in line and "a, b" in line


def test_a_stopped_server_is_unavailable(closed_url: str, sleeps):
    with pytest.raises(LLMUnavailable):
        make(closed_url).check()
    with pytest.raises(LLMUnavailable):
        next(make(closed_url).stream(MESSAGES, Generation()))


def test_a_server_silent_past_the_generations_deadline_is_out_of_time(stub: StubServer):
    """build-memory's --max-minutes reaches the HTTP wait, not only the gaps between pieces."""
    stub.on("POST", "/v1/chat/completions", reply_hang())
    with pytest.raises(LLMOutOfTime):
        list(make(stub.url).stream(MESSAGES, Generation(max_tokens=8, deadline=time.monotonic() + 0.3)))
