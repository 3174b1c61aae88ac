"""Ctrl-C that stops llama.cpp in the middle of a computation, for `mem chat` to abandon one answer;
and a deadline that does, for build-memory's --max-minutes (`stopped_at`).

Python handles a signal only between bytecodes, and one llama_decode call (a batch of up to 512
prompt tokens) ran 25 s and more on a busy machine: Ctrl-C seemed ignored, then ended the whole
session. llama.cpp asks an abort callback between the nodes of its compute graph, on the calling
thread; as that callback is Python code, the SIGINT handler runs inside it, and there it only
records the request: the callback then answers "abort", llama_decode returns at once (its KV cells
for the batch removed, llama-cpp-python's token count untouched, so the cache stays usable), and the
KeyboardInterrupt is raised when the computation is left. Elsewhere the handler raises it at once,
as Python's own does.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from types import FrameType
from typing import Iterator


class CtrlC:
    """Records a Ctrl-C; `abort` is the callback llama.cpp asks."""

    def __init__(self) -> None:
        import llama_cpp

        self.requested = False
        self.callback = llama_cpp.ggml_abort_callback(self.abort)  # kept: llama.cpp holds a bare pointer

    def abort(self, _data) -> bool:
        return self.requested

    def on_sigint(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if not _inside(frame, CtrlC.abort.__code__):
            raise KeyboardInterrupt
        # inside the callback: an exception there would only be printed by ctypes and ignored


def _inside(frame: FrameType | None, code) -> bool:
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


@contextmanager
def stopped_by_ctrl_c(llama) -> Iterator[CtrlC]:
    """While inside, Ctrl-C stops `llama`'s computation within a graph node and raises
    KeyboardInterrupt on leaving, also when the aborted call surfaced as another error (llama-cpp-python
    raises RuntimeError, which callers turn into LLMError). Does nothing off the main thread, where
    no signal handler can be set."""
    if threading.current_thread() is not threading.main_thread():
        yield CtrlC()
        return
    import llama_cpp

    ctrl_c = CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c.on_sigint)
    llama_cpp.llama_set_abort_callback(llama._ctx.ctx, ctrl_c.callback, None)
    log = logging.getLogger("llama-cpp-python")  # an aborted decode logs an error line; it was asked for
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield ctrl_c
    except Exception:
        if ctrl_c.requested:
            raise KeyboardInterrupt from None
        raise
    finally:
        llama_cpp.llama_set_abort_callback(llama._ctx.ctx, llama_cpp.ggml_abort_callback(0), None)
        signal.signal(signal.SIGINT, previous)
        log.setLevel(level)
    if ctrl_c.requested:  # the answer carried on past an aborted computation (e.g. without its checks)
        raise KeyboardInterrupt


@contextmanager
def stopped_at(llama, deadline: float | None) -> Iterator[None]:
    """While inside, llama.cpp abandons a computation once `deadline` passes: reading a long prompt
    is one blocking call, and it alone ran minutes past build-memory's --max-minutes (a 7.7 KB note,
    0.6 minutes asked, 2 taken). It asks the abort callback between the nodes of its compute graph;
    the aborted decode leaves the KV cache usable (see above) and surfaces as an error."""
    if deadline is None:
        yield
        return
    import llama_cpp

    callback = llama_cpp.ggml_abort_callback(lambda _data: time.monotonic() > deadline)  # kept while in use
    llama_cpp.llama_set_abort_callback(llama._ctx.ctx, callback, None)
    log = logging.getLogger("llama-cpp-python")  # an aborted decode logs an error line; it was asked for
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        llama_cpp.llama_set_abort_callback(llama._ctx.ctx, llama_cpp.ggml_abort_callback(0), None)
        log.setLevel(level)
