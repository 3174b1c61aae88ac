"""Ollama's native API: POST /api/chat streams one JSON object per line."""

from __future__ import annotations

import json
from typing import Iterator

from crossmodalrag.answer.llm.base import Generation, LLMError, LLMUnavailable, Message
from crossmodalrag.answer.llm.http import Endpoint

DEFAULT_URL = "http://127.0.0.1:11434"


class OllamaLLM:
    provider = "ollama"

    def __init__(self, endpoint: Endpoint, model: str | None, keep_alive: str, context_tokens: int) -> None:
        self.endpoint = endpoint
        self._model = model
        self.keep_alive = keep_alive
        self.context_tokens = context_tokens
        self.usage: dict[str, int] = {}

    @property
    def model(self) -> str:
        """The configured model, else the first one the server has pulled."""
        if not self._model:
            models = [m.get("name") for m in self.endpoint.get_json("/api/tags").get("models", []) if m.get("name")]
            if not models:
                raise LLMUnavailable(
                    "Ollama has no models pulled", "run `ollama pull qwen2.5:1.5b` or set CMRAG_LLM_MODEL"
                )
            self._model = models[0]
        return self._model

    def check(self) -> str:
        available = [m.get("name") for m in self.endpoint.get_json("/api/tags").get("models", [])]
        if self._model and self._model not in available and f"{self._model}:latest" not in available:
            raise LLMError(
                f"Ollama at {self.endpoint.base_url} has no model {self._model!r}",
                f"run `ollama pull {self._model}` (available: {', '.join(map(str, available)) or 'none'})",
            )
        return f"ollama at {self.endpoint.base_url} answers; model {self.model}"

    def stream(self, messages: list[Message], generation: Generation) -> Iterator[str]:
        payload = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "keep_alive": self.keep_alive,
            "options": {
                "temperature": generation.temperature,
                "num_predict": generation.max_tokens,
                "num_ctx": self.context_tokens,
                **({"stop": generation.stop} if generation.stop else {}),
            },
            **({"format": generation.json_schema} if generation.json_schema else {}),
        }
        self.usage = {}
        for line in self.endpoint.stream_lines("/api/chat", payload, generation.deadline):
            try:
                event = json.loads(line)
            except ValueError:
                raise LLMError(f"Ollama sent a line that is not JSON: {line[:80]!r}") from None
            if event.get("error"):
                raise LLMError(f"Ollama: {event['error']}", "check CMRAG_LLM_MODEL and `ollama ps`")
            piece = (event.get("message") or {}).get("content")
            if piece:
                yield piece
            if event.get("done"):
                self.usage = {
                    "prompt_tokens": int(event.get("prompt_eval_count") or 0),
                    "completion_tokens": int(event.get("eval_count") or 0),
                }
                return
        raise LLMError(f"Ollama's answer ended before it was done (the connection to {self.endpoint.base_url} closed)")
