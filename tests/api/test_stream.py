"""/ask/stream: token events, then exactly one final event, whatever happens; a client that leaves stops
generation; concurrent askers queue for the one model. The models here are stand-ins (unit tests)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient

from crossmodalrag.answer.llm import LLMError
from crossmodalrag.api.app import create_app
from tests.api.helpers import BASE, SlowLLM, running_server, server_settings, without_timing

QUESTION = "Why did I change the parser?"
ANSWER = "The regex parser backtracked catastrophically on nested brackets [E1], so it became a tokenizer [E2]."


def events_of(response) -> list[dict]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def app_with(sample_db, llm):
    return create_app(server_settings(sample_db), llm_loader=lambda settings: llm)


def test_tokens_then_exactly_one_answer_matching_ask(sample_db) -> None:
    with TestClient(app_with(sample_db, SlowLLM(ANSWER)), base_url=BASE) as client:
        streamed = events_of(client.get("/ask/stream", params={"q": QUESTION}))
        asked = client.get("/ask", params={"q": QUESTION}).json()
    kinds = [event["type"] for event in streamed]
    assert kinds[-1] == "answer" and kinds.count("answer") == 1 and "error" not in kinds
    assert kinds[:-1] and set(kinds[:-1]) == {"token"}
    final = streamed[-1]
    assert "".join(e["text"] for e in streamed[:-1]).strip() == ANSWER
    assert final["mode"] == "llm" and final["llm"] == {"provider": "fake", "model": "slow-scripted"}
    assert [c["id"] for c in final["citations"]] == ["E1", "E2"]
    kept = final.pop("kept")  # the id the console keeps to show this answer again (test_kept_answers.py)
    assert isinstance(kept, str) and kept
    assert without_timing(final) == without_timing(asked)


def test_a_streamed_answer_leaves_its_excerpt_order_on_the_shared_model(sample_db) -> None:
    """The stream wraps the model per request; what the answer records for the next question's KV
    cache reuse (the excerpts its prompt opened with) must reach the model itself, as with /ask."""
    model = SlowLLM(ANSWER)
    with TestClient(app_with(sample_db, model), base_url=BASE) as client:
        final = events_of(client.get("/ask/stream", params={"q": QUESTION}))[-1]
    assert final["mode"] == "llm"
    assert model.last_evidence == [item["chunk_id"] for item in final["evidence"]]


def test_a_failing_model_still_ends_with_the_evidence_answer(sample_db) -> None:
    broken = SlowLLM(ANSWER)
    broken.fail, broken.fail_after = LLMError("server went away"), 3
    with TestClient(app_with(sample_db, broken), base_url=BASE) as client:
        streamed = events_of(client.get("/ask/stream", params={"q": QUESTION}))
    assert [e["type"] for e in streamed].count("answer") == 1 and streamed[-1]["type"] == "answer"
    assert streamed[-1]["mode"] == "evidence"
    assert any("server went away" in notice for notice in streamed[-1]["notices"])


def test_weak_retrieval_abstains_without_calling_the_model(sample_db) -> None:
    model = SlowLLM(ANSWER)
    with TestClient(app_with(sample_db, model), base_url=BASE) as client:
        streamed = events_of(client.get("/ask/stream", params={"q": "quantum chromodynamics of penguins"}))
    assert [e["type"] for e in streamed] == ["answer"]
    assert streamed[0]["abstained"] and streamed[0]["abstention_reason"] == "weak_retrieval"
    assert model.calls == []


def test_an_unexpected_failure_is_a_final_error_event(sample_db, monkeypatch) -> None:
    app = app_with(sample_db, SlowLLM(ANSWER))

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(app.app.state.asker, "ask", explode)
    with TestClient(app, base_url=BASE) as client:
        streamed = events_of(client.get("/ask/stream", params={"q": QUESTION}))
    assert streamed == [
        {"type": "error", "error": "unexpected RuntimeError: disk on fire", "hint": "see the server log"}
    ]


def test_no_llm_stream_is_one_answer_event(client) -> None:
    streamed = events_of(client.get("/ask/stream", params={"q": QUESTION, "no_llm": "true"}))
    assert [e["type"] for e in streamed] == ["answer"] and streamed[0]["mode"] == "evidence"


def test_a_client_that_disconnects_stops_generation_within_a_second(sample_db) -> None:
    model = SlowLLM(" ".join(["word [E1]"] * 400), delay=0.02)  # 800 tokens: 16 s if nobody stops it
    with running_server(app_with(sample_db, model)) as url:
        with httpx.Client(timeout=10) as http:
            with http.stream("GET", f"{url}/ask/stream", params={"q": QUESTION}) as response:
                lines = response.iter_lines()
                first = [json.loads(next(lines)) for _ in range(3)]
            left_at = time.monotonic()
        assert [e["type"] for e in first] == ["token"] * 3
        assert model.closed.wait(2.0), "generation went on after the client left"
        stopped_after = time.monotonic() - left_at
        produced = model.produced
        time.sleep(0.3)
        assert model.produced == produced  # nothing more was generated
    assert stopped_after < 1.0
    assert produced < 200


def test_a_client_that_hangs_up_on_ask_stops_its_generation(sample_db) -> None:
    """/ask (not streamed) kept generating for nobody, and retried calls queued behind it."""
    import socket
    from urllib.parse import quote, urlsplit

    model = SlowLLM(" ".join(["word [E1]"] * 400), delay=0.02)  # 800 tokens: 16 s if nobody stops it
    with running_server(app_with(sample_db, model)) as url:
        address = urlsplit(url)
        with socket.create_connection((address.hostname, address.port)) as raw:
            raw.sendall(f"GET /ask?q={quote(QUESTION)} HTTP/1.1\r\nHost: {address.netloc}\r\n\r\n".encode())
            while model.produced < 3:  # the answer is being written: now hang up
                if model.closed.is_set():
                    pytest.fail("generation ended before the client could hang up")
                time.sleep(0.01)
        assert model.closed.wait(60), "generation never ended"
        produced = model.produced
        assert model.usage == {}, "the whole answer was generated for a client that had left"
    assert produced < 800


def test_concurrent_askers_queue_for_the_one_model(sample_db) -> None:
    model = SlowLLM("A cited answer [E1] in eight words or so.", delay=0.01)
    results: list[list[dict]] = []
    with running_server(app_with(sample_db, model)) as url:

        def ask() -> None:
            with httpx.Client(timeout=30) as http:
                response = http.get(f"{url}/ask/stream", params={"q": QUESTION})
                results.append(events_of(response))

        askers = [threading.Thread(target=ask) for _ in range(4)]
        for thread in askers:
            thread.start()
        for thread in askers:
            thread.join(30)
    assert len(results) == 4
    for events in results:
        assert events[-1]["type"] == "answer" and events[-1]["mode"] == "llm"
    assert model.most_active == 1  # never two generations at once


@pytest.mark.parametrize("params", [{"q": ""}, {"q": "x", "top_k": "0"}, {"q": "x", "modality": "video"}])
def test_bad_parameters_are_refused_before_streaming(client, params) -> None:
    assert client.get("/ask/stream", params=params).status_code == 422
