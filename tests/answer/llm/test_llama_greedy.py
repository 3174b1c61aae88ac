"""Greedy schema-constrained decoding with drafts (answer/llm/llama_greedy.py): the drafts save steps
but never change the output, the output follows the schema as compact JSON, and the KV cache is left
consistent for the next call. Real llama.cpp with SmolLM2-135M (plumbing: too small to be right)."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.answer.llm import Generation, llama_greedy
from crossmodalrag.answer.llm.llama_greedy import Drafter
from tests.llm import require_llama_cpp, smollm_gguf

SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "minItems": 2,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 30},
                    "kind": {"type": "string", "enum": ["fruit", "tool"]},
                },
                "required": ["name", "kind"],
            },
        }
    },
    "required": ["items"],
}
MESSAGES = [
    {"role": "system", "content": "Answer with JSON only."},
    {"role": "user", "content": "List things in this text: an apple, a hammer, a pear and a saw."},
]


def test_the_drafter_guesses_what_followed_the_last_occurrence_of_the_last_tokens() -> None:
    drafter = Drafter([1, 2, 3, 4, 5, 6, 9, 2, 3])
    assert drafter.guess() == [4, 5, 6, 9]  # (9, 2, 3) is new, (2, 3) was seen: 4 tokens after it
    drafter.push(4)
    assert drafter.guess() == [5, 6, 9, 2, 3, 4]  # (2, 3, 4) was seen: a 3-gram guesses 6 tokens
    assert Drafter([7, 8]).guess() == []  # nothing repeats yet


@pytest.fixture(scope="module")
def llm():
    require_llama_cpp()
    from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM

    return LlamaCppLLM(smollm_gguf(), context_tokens=2048, timeout=120.0, threads=1)


def _run(llm) -> tuple[str, dict]:
    text = "".join(llm.stream(MESSAGES, Generation(160, 0.0, json_schema=SCHEMA)))
    return text, dict(llm.usage)


def test_drafts_save_steps_but_never_change_the_output(llm, monkeypatch) -> None:
    drafted_text, drafted = _run(llm)
    monkeypatch.setattr(llama_greedy, "DRAFT_SIZES", {})
    plain_text, plain = _run(llm)
    assert drafted_text == plain_text and plain["drafted"] == 0
    assert drafted["completion_tokens"] == plain["completion_tokens"] and drafted["accepted"] > 0


def test_the_output_is_compact_json_inside_the_schema(llm) -> None:
    text, usage = _run(llm)
    data = json.loads(text)
    assert 2 <= len(data["items"]) <= 4 and all(i["kind"] in ("fruit", "tool") for i in data["items"])
    assert json.dumps(data, separators=(",", ":"), ensure_ascii=False) == text
    assert usage["prompt_tokens"] > 0 and usage["threads"] == 1


def test_the_next_call_reuses_the_prompt_and_plain_generation_still_works(llm) -> None:
    first, _ = _run(llm)
    again, usage = _run(llm)
    assert again == first and usage["prompt_evaluated"] == 1  # only the last prompt token is fed again
    plain = "".join(llm.stream(MESSAGES, Generation(8, 0.0)))  # create_chat_completion after our decoding
    assert plain
