"""Any OpenAI-compatible server (llama.cpp's, vLLM, LM Studio, Ollama's /v1): streamed server-sent events."""

from __future__ import annotations

import json
from typing import Iterator

from crossmodalrag.answer.llm.base import Generation, LLMError, Message
from crossmodalrag.answer.llm.http import Endpoint

DEFAULT_URL = "http://127.0.0.1:8080/v1"


def api_base(url: str) -> str:
    """Servers are documented both with and without the /v1 suffix: accept either."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


class OpenAICompatLLM:
    provider = "openai"

    def __init__(self, endpoint: Endpoint, model: str | None) -> None:
        self.endpoint = endpoint
        self._model = model
        self.usage: dict[str, int] = {}

    @property
    def model(self) -> str:
        """The configured model, else the first one the server lists (single-model servers need none)."""
        if not self._model:
            listed = [m.get("id") for m in self.endpoint.get_json("/models").get("data", []) if m.get("id")]
            self._model = listed[0] if listed else "default"
        return self._model

    def check(self) -> str:
        listed = [m.get("id") for m in self.endpoint.get_json("/models").get("data", [])]
        return f"OpenAI-compatible server at {self.endpoint.base_url} answers; models: {', '.join(map(str, listed))}"

    def stream(self, messages: list[Message], generation: Generation) -> Iterator[str]:
        payload = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "max_tokens": generation.max_tokens,
            "temperature": generation.temperature,
            **({"stop": generation.stop} if generation.stop else {}),
            **({"response_format": _schema_format(generation.json_schema)} if generation.json_schema else {}),
        }
        self.usage = {}
        finished = False
        for line in self.endpoint.stream_lines("/chat/completions", payload, generation.deadline):
            if not line.startswith("data:"):
                continue  # SSE comments, event names and keep-alives
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                event = json.loads(data)
            except ValueError:
                raise LLMError(f"the server sent an event that is not JSON: {data[:80]!r}") from None
            if event.get("error"):
                error = event["error"]
                raise LLMError(
                    f"the server failed: {error.get('message', error) if isinstance(error, dict) else error}"
                )
            if event.get("usage"):
                self.usage = {k: int(v) for k, v in event["usage"].items() if k.endswith("_tokens")}
            for choice in event.get("choices") or []:
                finished = finished or bool(choice.get("finish_reason"))
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    yield piece
        if not finished:
            raise LLMError(f"the answer from {self.endpoint.base_url} ended without [DONE] or a finish reason")


def _schema_format(schema: dict) -> dict:
    """OpenAI's structured-output form; servers that ignore it get repaired and validated output."""
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
