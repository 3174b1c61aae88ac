"""In-process generation with llama-cpp-python from a local GGUF file (the `[llm]` extra).

Beyond streaming an answer this backend gives two things the HTTP backends cannot:
- `support_margins`: the model as a yes/no judge, read from the logits of its first answer token
  (logsumexp of the "yes" spellings minus that of the "no" spellings), with no sampling;
- prompt reuse: llama.cpp keeps the evaluated tokens in its KV cache, and every call here starts
  from the longest prefix it shares with what is already there. The answer prompt's fixed start
  (system message and the user turn's opening) is also saved to disk once and loaded back whenever
  the cache holds something else (a fresh `mem ask` process, or the judge's prompts in between);
  and the states after the last few calls are kept in memory (`KEPT_STATES`): the sentence checks
  after an answer start from the gate's evaluated excerpt instead of reading it again, and in a chat
  a follow-up whose prompt opens like an earlier one's (the same leading excerpts) starts from it.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import math
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from crossmodalrag.answer.llm.base import Generation, LLMError, LLMOutOfTime, LLMUnavailable, Message
from crossmodalrag.answer.llm.interrupt import stopped_at
from crossmodalrag.cpu import auto_threads
from crossmodalrag.errors import MissingExtraError

_LOADED: dict[tuple[str, int], object] = {}
MIN_CACHED_TOKENS = 64
# The last gate, answer and sentence check: a chat's next question can share a prefix with any of
# them. A state costs ~29 KB a token (~20 MB for an answer) and milliseconds to copy.
KEPT_STATES = 3
YES = ("yes", "Yes", "YES", " yes", " Yes")
NO = ("no", "No", "NO", " no", " No")

# A prompt past the context: the excerpts, or the question itself (a pasted 20 KB question fills it alone).
FIT_HINT = "ask a shorter question, or lower CMRAG_LLM_EVIDENCE_CHARS, or raise CMRAG_LLM_CONTEXT_TOKENS"


@atexit.register
def _close_models() -> None:
    """Free models before interpreter teardown: llama-cpp's own finaliser fails noisily that late."""
    while _LOADED:
        _LOADED.popitem()[1].close()


def llamacpp_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("llama_cpp") is not None


def gguf_problem(path: Path) -> str:
    """Why llama.cpp refused a file, in the user's terms: its own error says only "Failed to load
    model from file", and with verbose=False the reason (a bad header, tensors past the end) is muted."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        return f"it cannot be read ({error.strerror or error})"
    if magic != b"GGUF":
        return "it is not a GGUF file (it does not start with the GGUF header)"
    return "it starts like a GGUF model but is incomplete or damaged, e.g. a download cut short"


class LlamaCppLLM:
    provider = "llamacpp"

    def __init__(
        self,
        model_path: Path,
        context_tokens: int,
        timeout: float,
        threads: int = 0,
        cache_dir: Path | None = None,
        repack: bool = False,
    ) -> None:
        if not llamacpp_installed():
            raise MissingExtraError(
                "the in-process LLM backend needs llama-cpp-python",
                'CMAKE_ARGS="$(scripts/llama-cmake-args)" pip install -e ".[llm]"',
            )
        if not model_path.is_file():
            raise LLMUnavailable(
                f"no GGUF model at {model_path}", "set CMRAG_LLM_MODEL_PATH, or run `mem models install --llm`"
            )
        self.model_path = model_path
        self.model = model_path.name
        self.context_tokens = context_tokens
        self.timeout = timeout
        self.configured_threads = threads  # 0: adapt to the cores free at each call (see cpu.py)
        self.threads = threads or 0
        self.cache_dir = cache_dir
        self.repack = repack
        self.usage: dict[str, int] = {}
        self._states: list[KVSnapshot] = []  # the KV cache after the last calls, oldest first

    def _load(self):
        key = (str(self.model_path), self.context_tokens, self.repack)
        if key not in _LOADED:
            from llama_cpp import Llama

            threads = auto_threads(self.configured_threads)
            try:
                with _weights_repacked(self.repack):
                    _LOADED[key] = Llama(
                        model_path=str(self.model_path),
                        n_ctx=self.context_tokens,
                        n_threads=threads,
                        n_threads_batch=threads,
                        verbose=False,
                    )
            except (ValueError, RuntimeError, OSError):
                raise LLMUnavailable(
                    f"llama.cpp cannot load {self.model_path}: {gguf_problem(self.model_path)}",
                    "point at a complete GGUF model: download it again, or run `mem models install --llm --force`",
                ) from None
        return _LOADED[key]

    def _ready(self, messages: list[Message]):
        """The loaded model with its thread count set for this call and its KV cache holding the
        longest start of `messages` at hand: a kept state's, or the system prompt's from disk."""
        import llama_cpp

        llama = self._load()
        self.threads = auto_threads(self.configured_threads)  # one measurement serves a burst (cpu.py)
        llama_cpp.llama_set_n_threads(llama._ctx.ctx, self.threads, self.threads)
        if self._states:
            self._resume(llama, _template_tokens(llama, messages))
        if self.cache_dir is not None and messages and messages[0]["role"] == "system":
            PromptCache(llama, self.cache_dir, self.model_path).restore(messages[0])
        return llama

    def _resume(self, llama, tokens: list[int]) -> None:
        """Restore the kept state sharing the longest prefix with `tokens`, if it shares more than
        the KV cache holds now."""
        held = shared_prefix(llama.input_ids[: llama.n_tokens], tokens)
        shares = [(shared_prefix(state.tokens, tokens), index) for index, state in enumerate(self._states)]
        best, index = max(shares, default=(0, -1))
        if best > held:
            self._states[index].restore(llama)

    def _keep(self, llama) -> None:
        self._states = [*self._states[1 - KEPT_STATES :], KVSnapshot(llama)]

    def interruptible(self):
        """A context in which Ctrl-C stops the model mid-computation (answer/llm/interrupt.py)."""
        from crossmodalrag.answer.llm.interrupt import stopped_by_ctrl_c

        return stopped_by_ctrl_c(self._load())

    def check(self) -> str:
        self._load()
        return f"llama.cpp loads {self.model_path}"

    def count_tokens(self, text: str) -> int:
        return len(self._load().tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def stream(self, messages: list[Message], generation: Generation) -> Iterator[str]:
        llama = self._ready(messages)
        deadline = min(time.monotonic() + self.timeout, generation.deadline or math.inf)
        self.usage = {}
        try:
            with stopped_at(llama, generation.deadline):
                if generation.json_schema and generation.temperature == 0 and not generation.stop:
                    yield from self._stream_json(llama, messages, generation, deadline)
                else:
                    yield from self._stream_chat(llama, messages, generation)
        except (LLMError, RuntimeError):
            if generation.deadline is not None and time.monotonic() > generation.deadline:
                raise LLMOutOfTime("the model call was stopped at the time budget", "raise --max-minutes") from None
            raise
        finally:
            self._keep(llama)  # also when the reader stops early: the KV cache holds what was evaluated

    def _stream_chat(self, llama, messages: list[Message], generation: Generation) -> Iterator[str]:
        completion = 0
        # The clock starts at the first token: reading the prompt cannot be interrupted in process,
        # and on a busy machine it alone took more than the whole budget (a 700-token prompt at load
        # 25); what the timeout guards against is a generation that crawls or runs on.
        deadline = math.inf
        try:
            chunks = llama.create_chat_completion(
                messages=messages,
                max_tokens=generation.max_tokens,
                temperature=generation.temperature,
                stop=generation.stop or None,
                stream=True,
                # llama-cpp-python builds a grammar only from this form (not OpenAI's json_schema one).
                response_format={"type": "json_object", "schema": generation.json_schema}
                if generation.json_schema
                else None,
            )
            for chunk in chunks:
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    completion += 1
                    yield piece
                if deadline == math.inf:
                    deadline = time.monotonic() + self.timeout
                elif time.monotonic() > deadline:
                    raise LLMError(
                        f"generation passed CMRAG_LLM_TIMEOUT ({self.timeout:g} s)", "raise it, or use a smaller model"
                    )
        except ValueError as error:  # e.g. the prompt does not fit the context window
            raise LLMError(f"llama.cpp: {error}", FIT_HINT) from None
        self.usage = {"completion_tokens": completion, "threads": self.threads}

    def _stream_json(self, llama, messages: list[Message], generation: Generation, deadline: float) -> Iterator[str]:
        """Greedy schema-constrained output through llama_greedy: compact JSON, each token cheaper."""
        from crossmodalrag.answer.llm.llama_greedy import greedy_json

        stats: dict[str, int] = {}
        yield from greedy_json(
            llama, chat_tokens(llama, messages), generation.json_schema, generation.max_tokens, deadline, stats
        )
        self.usage = {**stats, "threads": self.threads}

    def support_margins(self, prompts: list[list[Message]]) -> list[float]:
        """For each chat prompt ending in a yes/no question: logsumexp(yes) - logsumexp(no) over the
        logits of the first answer token. Prompts sharing a prefix (with each other or with the last
        answer) only evaluate what differs. Raises LLMError when a prompt does not fit."""
        import llama_cpp
        import numpy as np

        if not prompts:
            return []
        llama = self._ready(prompts[0])
        yes, no = _answer_tokens(llama, YES), _answer_tokens(llama, NO)
        margins = []
        for messages in prompts:
            tokens = chat_tokens(llama, messages)
            if len(tokens) >= llama.n_ctx():
                raise LLMError(
                    f"a verification prompt of {len(tokens)} tokens does not fit the context ({llama.n_ctx()})",
                    FIT_HINT,
                )
            self._resume(llama, tokens)  # e.g. the answer went in between: back to the gate's excerpt
            reuse = min(shared_prefix(llama.input_ids[: llama.n_tokens], tokens), len(tokens) - 1)
            llama.n_tokens = reuse
            llama.eval(tokens[reuse:])
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(llama.n_vocab(),))
            margins.append(_logsumexp(logits[yes]) - _logsumexp(logits[no]))
        self._keep(llama)
        return margins


@contextmanager
def _weights_repacked(repack: bool):
    """Load models inside this block with llama.cpp's repacked weight buffers on or off.

    llama.cpp copies Q4_K weights into an interleaved layout at load by default ("extra buffer
    types"). On these AVX-512 cores that layout generates ~1.3x faster but reads prompts ~1.5x slower
    than the plain mmapped weights, and the copy adds ~0.6 s to every load (bench/llama_repack.py);
    an answer here reads ~10 prompt tokens (evidence, judge prompts) for each one it generates, so
    off is the default. llama-cpp-python has no argument for it: its default model parameters are
    swapped for the length of the load (a version without the field loads as it always did)."""
    from llama_cpp import llama_cpp as api

    default = api.llama_model_default_params
    if repack or not any(name == "use_extra_bufts" for name, _ in default()._fields_):
        yield
        return

    def plain():
        params = default()
        params.use_extra_bufts = False
        return params

    api.llama_model_default_params = plain
    try:
        yield
    finally:
        api.llama_model_default_params = default


class KVSnapshot:
    """The KV cache of llama-cpp-python's one sequence and the tokens it holds, copied in memory
    (~29 KB a token for Qwen2.5-1.5B; taking or restoring it costs milliseconds, reading the tokens
    again ~10 ms each). `Llama.save_state` would also copy a logits buffer of n_batch x n_vocab floats."""

    def __init__(self, llama) -> None:
        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(llama._ctx.ctx, 0)
        self.data = (ctypes.c_uint8 * size)()
        self.size = llama_cpp.llama_state_seq_get_data(llama._ctx.ctx, self.data, size, 0)
        self.tokens = list(llama.input_ids[: llama.n_tokens])

    def restore(self, llama) -> None:
        """Put the copied state back; the logits are not restored (callers evaluate at least one token)."""
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llama._ctx.ctx), 0, -1, -1)
        if llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, self.data, self.size, 0):
            llama.input_ids[: len(self.tokens)] = self.tokens
            llama.n_tokens = len(self.tokens)
        else:
            llama.reset()  # nothing half-restored is ever reused


class PromptCache:
    """The KV state after the fixed start of every prompt (system message and the user turn's
    opening), kept in a file keyed by the model file, the context size and those tokens."""

    def __init__(self, llama, folder: Path, model_path: Path) -> None:
        self.llama, self.folder, self.model_path = llama, folder, model_path

    def restore(self, system: Message) -> bool:
        """Make the KV cache start with the fixed prefix: it may already (a follow-up question), else
        the saved state is loaded (or computed and saved). False when there is nothing worth it."""
        import llama_cpp

        prefix = self._fixed_tokens(system)
        if len(prefix) < MIN_CACHED_TOKENS:
            return False  # cheaper to evaluate than to load (the judge's one-line system prompt)
        if shared_prefix(self.llama.input_ids[: self.llama.n_tokens], prefix) == len(prefix):
            return True
        stat = self.model_path.stat()
        key = f"{self.model_path.name}|{stat.st_size}|{stat.st_mtime_ns}|{self.llama.n_ctx()}|{prefix}"
        path = self.folder / f"prompt-{hashlib.sha256(key.encode()).hexdigest()[:20]}.kv"
        if path.is_file():
            capacity = self.llama.n_ctx()
            tokens = (llama_cpp.llama_token * capacity)()
            count = ctypes.c_size_t(0)
            ok = llama_cpp.llama_state_load_file(
                self.llama._ctx.ctx, str(path).encode(), tokens, capacity, ctypes.byref(count)
            )
            if ok and list(tokens[: count.value]) == prefix:
                self.llama.input_ids[: len(prefix)] = prefix
                self.llama.n_tokens = len(prefix)
                self.llama._requires_eval = True
                return True
            self.llama.reset()  # a stale or foreign file: recompute below
        self.llama.reset()
        self.llama.eval(prefix)
        self._save(path, prefix)
        return True

    def _fixed_tokens(self, system: Message) -> list[int]:
        """Computed once per system message: every model call asks (two template renders)."""
        known = self.llama.__dict__.setdefault("_cmrag_fixed_tokens", {})
        if system["content"] not in known:
            first = chat_tokens(self.llama, [system, {"role": "user", "content": "A"}])
            second = chat_tokens(self.llama, [system, {"role": "user", "content": "B"}])
            known[system["content"]] = first[: shared_prefix(first, second)]
        return known[system["content"]]

    def _save(self, path: Path, prefix: list[int]) -> None:
        import llama_cpp

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, scratch = tempfile.mkstemp(dir=self.folder, suffix=".partial")
            os.close(handle)
            array = (llama_cpp.llama_token * len(prefix))(*prefix)
            if llama_cpp.llama_state_save_file(self.llama._ctx.ctx, scratch.encode(), array, len(prefix)):
                os.replace(scratch, path)
            else:
                os.unlink(scratch)
        except OSError:
            pass  # a read-only models folder only costs the re-read next time


def chat_tokens(llama, messages: list[Message]) -> list[int]:
    """The tokens `create_chat_completion` evaluates for `messages` (the GGUF's own chat template)."""
    from llama_cpp import llama_chat_format

    formatter = getattr(llama, "_cmrag_formatter", None)
    if formatter is None:
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise LLMError(f"{llama.model_path} has no chat template", "use an instruction-tuned GGUF model")
        eos, bos = llama.token_eos(), llama.token_bos()
        formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
            bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
        )
        llama._cmrag_formatter = formatter
    result = formatter(messages=messages)
    return llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)


def _template_tokens(llama, messages: list[Message]) -> list[int]:
    """`chat_tokens`, or none for a model without a chat template (llama-cpp-python then answers in
    a fallback format, which no kept state is matched against)."""
    try:
        return chat_tokens(llama, messages)
    except LLMError:
        return []


def shared_prefix(first, second) -> int:
    count = 0
    for a, b in zip(first, second, strict=False):  # the shorter one bounds the prefix
        if a != b:
            break
        count += 1
    return count


def _answer_tokens(llama, spellings: tuple[str, ...]) -> list[int]:
    """Token ids of the spellings that are one token in this vocabulary."""
    ids = []
    for word in spellings:
        tokens = llama.tokenize(word.encode("utf-8"), add_bos=False, special=False)
        if len(tokens) == 1 and tokens[0] not in ids:
            ids.append(tokens[0])
    if not ids:
        raise LLMError(f"{llama.model_path} has no single-token {spellings[0]!r}", "use another model for verification")
    return ids


def _logsumexp(values) -> float:
    top = float(values.max())
    return top + math.log(float(sum(math.exp(float(v) - top) for v in values)))
