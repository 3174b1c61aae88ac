"""Answering questions for the server: the same library calls as `mem ask`, one model at a time.

Each request borrows a read-only connection from a small pool. Generation is serialised (one model in memory:
llama.cpp's context is not thread-safe, and two generations on 2 cores only slow each other down),
so concurrent askers queue on a lock instead of crashing. The blocking generation runs in a worker
thread; a cancel flag, checked between tokens, stops it when the client goes away.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable, Iterator

from crossmodalrag.agent.recall import with_recall
from crossmodalrag.answer.evidence import ask_without_llm, open_retriever, with_retriever_notices
from crossmodalrag.answer.llm import LLM, load_llm
from crossmodalrag.answer.synthesize import ask_with_llm
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.memory.retrieve import at_level, with_nodes
from crossmodalrag.store.readonly import ReaderPool
from crossmodalrag.types import Answer


def with_match(settings: Settings, match: str | None) -> Settings:
    """The server's settings with a request's `match` mode (what `mem ask --match` sets), or unchanged."""
    return settings if match is None else replace(settings, match=match)


class AskCancelled(Exception):
    """The client went away: generation stopped. Deliberately not an LLMError, so no fallback answer
    is built for nobody."""


class CancellableLLM:
    """Wraps a backend so generation stops at the next token once `cancelled` is set."""

    def __init__(self, inner: LLM, cancelled: threading.Event) -> None:
        self.inner = inner
        self.cancelled = cancelled

    def __getattr__(self, name: str) -> Any:  # provider, model, usage and whatever else callers read
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """What an answer leaves on the model (`last_evidence`: the excerpts its KV cache opens with)
        must outlive this one request's wrapper, or the next question cannot reuse the cache."""
        if name in ("inner", "cancelled"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def stream(self, messages, generation) -> Iterator[str]:
        if self.cancelled.is_set():
            raise AskCancelled()
        pieces = iter(self.inner.stream(messages, generation))
        try:
            for piece in pieces:
                if self.cancelled.is_set():
                    raise AskCancelled()
                yield piece
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()  # a generator-based backend stops decoding here


class Asker:
    """Answers questions against one database with one (lazily loaded, cached) language model."""

    def __init__(self, settings: Settings, llm_loader: Callable[[Settings], LLM] | None = None) -> None:
        self.settings = settings
        self.llm_loader = llm_loader or load_llm
        self.model_turn = threading.Lock()
        self._llm: LLM | None = None
        self.readers = ReaderPool(settings)

    def ask(
        self,
        query: str,
        top_k: int | None = None,
        profile: str | None = None,
        modalities: tuple[str, ...] = (),
        no_llm: bool = False,
        on_text: Callable[[str], None] | None = None,
        cancelled: threading.Event | None = None,
        match: str | None = None,
        level: str = "evidence",
        strategy: str | None = None,
        after: str | None = None,
        before: str | None = None,
    ) -> Answer:
        """What `mem ask --json` computes for the same options. Raises CMRAGError, AskCancelled.
        The opt-in session judge (`recall_judge_sessions`) is the CLI's alone, as with MCP: it would
        hold the one model for ~10 s per question before the answer's own turn."""
        settings = with_match(self.settings, match)
        with self.readers.reader() as store:
            retriever = open_retriever(store, settings, top_k, profile, modalities=modalities)
            retriever = with_recall(retriever, strategy or retriever.strategy, after, before, names=("after", "before"))
            retriever = at_level(retriever, level, settings)
            standing = list(retriever.notices)
            if no_llm:
                answer = ask_without_llm(retriever, query)
            else:
                with self.model_turn:  # queued askers wait here, in their worker threads
                    if cancelled is not None and cancelled.is_set():
                        raise AskCancelled()
                    llm = self._model()
                    if llm is not None and cancelled is not None:
                        llm = CancellableLLM(llm, cancelled)
                    answer = ask_with_llm(retriever, query, settings, on_text, llm=llm)
            return with_nodes(with_retriever_notices(answer, retriever, standing, len(standing)), retriever)

    def _model(self) -> LLM | None:
        """The backend, loaded once. None when it cannot be: ask_with_llm then tries itself, fails the
        same way, and puts the reason in the answer's notices (exactly as `mem ask` does)."""
        if self._llm is None:
            try:
                self._llm = self.llm_loader(self.settings)
            except CMRAGError:
                return None
        return self._llm
