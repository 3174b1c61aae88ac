"""What every language-model backend offers: a streamed chat completion, and its errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Protocol

from crossmodalrag.errors import CMRAGError

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": …}


class LLMError(CMRAGError):
    """The model server or runtime failed, or refused the request."""


class LLMUnavailable(LLMError):
    """No model could be reached or loaded: callers fall back to the evidence answer."""


class LLMOutOfTime(LLMError):
    """The call was stopped at its caller's deadline (Generation.deadline): no fault of the model."""


@dataclass
class Generation:
    """Knobs of one completion."""

    max_tokens: int = 320
    temperature: float = 0.0
    stop: list[str] = field(default_factory=list)
    # A JSON schema the output must follow: enforced by a grammar where the backend has one
    # (llama.cpp, Ollama's `format`, OpenAI-compatible `response_format`); callers still validate.
    json_schema: dict | None = None
    # time.monotonic() by which the call must end (build-memory's --max-minutes), else LLMOutOfTime:
    # llama.cpp in process stops mid-computation; a model server's wait for its first byte and each
    # later one is cut at it; a reader of any stream stops between its pieces.
    deadline: float | None = None


class LLM(Protocol):
    provider: str  # "ollama" | "openai" | "llamacpp" | a fake's name in tests
    model: str
    usage: dict[str, int]  # token counts of the last completion, when the backend reports them

    def stream(self, messages: list[Message], generation: Generation) -> Iterator[str]:
        """Yield the answer's text piece by piece. Raises LLMUnavailable before the first piece
        when the model cannot be reached, LLMError on any other failure."""
        ...

    def check(self) -> str:
        """One line saying the model is ready. Raises LLMUnavailable / LLMError if it is not."""
        ...
