"""In-process generation with llama-cpp-python from a local GGUF file (the `[llm]` extra)."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Iterator

from crossmodalrag.answer.llm.base import Generation, LLMError, LLMUnavailable, Message
from crossmodalrag.errors import MissingExtraError

_LOADED: dict[tuple[str, int, int], object] = {}


@atexit.register
def _close_models() -> None:
    """Free models before interpreter teardown: llama-cpp's own finaliser fails noisily that late."""
    while _LOADED:
        _LOADED.popitem()[1].close()


def llamacpp_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("llama_cpp") is not None


class LlamaCppLLM:
    provider = "llamacpp"

    def __init__(self, model_path: Path, context_tokens: int, timeout: float, threads: int = 0) -> None:
        if not llamacpp_installed():
            raise MissingExtraError(
                "the in-process LLM backend needs llama-cpp-python",
                'CMAKE_ARGS="-DLLAVA_BUILD=OFF" pip install -e ".[llm]"',
            )
        if not model_path.is_file():
            raise LLMUnavailable(
                f"no GGUF model at {model_path}", "set CMRAG_LLM_MODEL_PATH, or run `mem models install --llm`"
            )
        self.model_path = model_path
        self.model = model_path.name
        self.context_tokens = context_tokens
        self.timeout = timeout
        # llama.cpp's threads spin while they wait for each other: on a busy machine one thread per
        # core can make generation 10x slower, so CMRAG_LLM_THREADS=1 is the remedy there.
        self.threads = threads or os.cpu_count() or 2
        self.usage: dict[str, int] = {}

    def _load(self):
        key = (str(self.model_path), self.context_tokens, self.threads)
        if key not in _LOADED:
            from llama_cpp import Llama

            try:
                _LOADED[key] = Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.context_tokens,
                    n_threads=self.threads,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as error:
                raise LLMUnavailable(
                    f"llama.cpp cannot load {self.model_path}: {error}", "check that the file is a complete GGUF model"
                ) from None
        return _LOADED[key]

    def check(self) -> str:
        self._load()
        return f"llama.cpp loads {self.model_path}"

    def count_tokens(self, text: str) -> int:
        return len(self._load().tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def stream(self, messages: list[Message], generation: Generation) -> Iterator[str]:
        llama = self._load()
        deadline = time.monotonic() + self.timeout
        self.usage = {}
        completion = 0
        try:
            chunks = llama.create_chat_completion(
                messages=messages,
                max_tokens=generation.max_tokens,
                temperature=generation.temperature,
                stop=generation.stop or None,
                stream=True,
            )
            for chunk in chunks:
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    completion += 1
                    yield piece
                if time.monotonic() > deadline:
                    raise LLMError(
                        f"generation passed CMRAG_LLM_TIMEOUT ({self.timeout:g} s)", "raise it, or use a smaller model"
                    )
        except ValueError as error:  # e.g. the prompt does not fit the context window
            raise LLMError(
                f"llama.cpp: {error}", "lower CMRAG_LLM_EVIDENCE_CHARS or raise CMRAG_LLM_CONTEXT_TOKENS"
            ) from None
        self.usage = {"completion_tokens": completion}
