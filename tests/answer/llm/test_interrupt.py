"""Ctrl-C inside llama.cpp's computation (answer/llm/interrupt.py), with SmolLM2-135M: the decode
stops within a graph node, a KeyboardInterrupt follows, and the model keeps answering."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

from crossmodalrag.answer.llm.base import Generation, LLMError
from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM
from tests.llm import require_llama_cpp, smollm_gguf

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smollm() -> LlamaCppLLM:
    require_llama_cpp()
    llm = LlamaCppLLM(smollm_gguf(), 2048, 60.0)
    llm.check()
    return llm


def interrupt_once_decoding(main: int, done: threading.Event) -> None:
    """SIGINT to this process once the main thread is inside llama-cpp-python's decode call (never,
    if the test ends first)."""
    while (frame := sys._current_frames().get(main)) is None or frame.f_code.co_name != "decode":
        if done.wait(0.001):
            return
    os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_stops_a_decode_midway_and_the_model_answers_after(smollm: LlamaCppLLM):
    import llama_cpp

    llama = smollm._load()
    llama.reset()
    prompt = llama.tokenize(b"A long note about parsers, caches and tokenizers. " * 40)[:500]  # one batch
    done = threading.Event()
    sender = threading.Thread(target=interrupt_once_decoding, args=(threading.main_thread().ident, done), daemon=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt), smollm.interruptible():
            llama.eval(prompt)
    finally:
        done.set()
        sender.join()
    # aborted: llama.cpp dropped the batch's cells (a finished decode would hold positions 0..499)
    assert llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(llama._ctx.ctx), 0) == -1
    assert llama.n_tokens == 0 and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert list(smollm.stream([{"role": "user", "content": "Name one colour."}], Generation(max_tokens=4)))


def test_an_error_from_an_aborted_computation_surfaces_as_the_interrupt(smollm: LlamaCppLLM):
    with pytest.raises(KeyboardInterrupt), smollm.interruptible() as ctrl_c:
        ctrl_c.requested = True  # as the handler records it inside llama.cpp's callback
        raise LLMError("llama.cpp: llama_decode returned 2")


def test_ctrl_c_outside_the_computation_raises_at_once(smollm: LlamaCppLLM):
    with pytest.raises(KeyboardInterrupt), smollm.interruptible() as ctrl_c:
        signal.raise_signal(signal.SIGINT)
    assert ctrl_c.requested and ctrl_c.abort(None)
