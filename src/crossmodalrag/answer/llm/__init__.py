"""Language-model backends and the choice among them.

With `CMRAG_LLM_PROVIDER=auto` (the default) the first of these that applies is used:
1. `CMRAG_LLM_MODEL_PATH` is set: that GGUF file, in process (llamacpp);
2. `CMRAG_LLM_BASE_URL` is set: the OpenAI-compatible server there;
3. a GGUF installed by `mem models install --llm` and llama-cpp-python: in process;
4. an Ollama server answering on 127.0.0.1:11434;
otherwise there is no model, and `mem ask` gives the evidence answer and says why.
"""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.answer.llm.base import LLM, Generation, LLMError, LLMUnavailable, Message
from crossmodalrag.answer.llm.http import Endpoint
from crossmodalrag.config import Settings, read_environment
from crossmodalrag.errors import ConfigError

__all__ = ["LLM", "Generation", "LLMError", "LLMUnavailable", "Message", "load_llm", "choose_provider"]

PROBE_SECONDS = 0.3  # a local Ollama accepts a connection in well under a millisecond


def installed_gguf(settings: Settings) -> Path | None:
    """The newest GGUF under `<models dir>/llm`, put there by `mem models install --llm`."""
    folder = settings.models_dir / "llm"
    found = sorted(folder.glob("*.gguf"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return found[-1] if found else None


def _named(settings: Settings, name: str, value: str) -> str:
    """`CMRAG_LLM_PROVIDER=ollama`, or `[llm] provider in FILE = ollama`: where a chosen value came from."""
    origin = settings.origin(name)
    return f"{origin}={value}" if origin.startswith("CMRAG_") else f"{origin} = {value}"


def choose_provider(settings: Settings) -> tuple[str, str]:
    """(provider, why) for the configured or automatically chosen backend; provider may be "none"."""
    if settings.llm_provider != "auto":
        return settings.llm_provider, _named(settings, "llm_provider", settings.llm_provider)
    if settings.llm_model_path:
        return "llamacpp", f"{settings.origin('llm_model_path')} is set"
    if settings.llm_base_url:
        return "openai", f"{settings.origin('llm_base_url')} is set"
    from crossmodalrag.answer.llm.llamacpp import llamacpp_installed

    gguf = installed_gguf(settings)
    if gguf and llamacpp_installed():
        return "llamacpp", f"{gguf.name} is installed and llama-cpp-python is available"
    from crossmodalrag.answer.llm import ollama

    probe = Endpoint(ollama.DEFAULT_URL, PROBE_SECONDS, PROBE_SECONDS, {}, attempts=1)  # no backoff for a probe
    try:
        probe.get_json("/api/version")
        return "ollama", f"an Ollama server answers at {ollama.DEFAULT_URL}"
    except LLMError:
        pass
    from crossmodalrag.index.models import left_behind, stray_gguf

    why = "none is configured"
    if (found := left_behind(settings)) and (stray := stray_gguf(found)):  # a moved database left it behind
        why = f"{stray} is not beside the database"
    if gguf:
        why = f"{gguf.name} is installed but llama-cpp-python is not"
    return "none", why


def load_llm(settings: Settings) -> LLM:
    """The configured backend, ready to stream. Raises LLMUnavailable (or ConfigError) with a hint."""
    provider, why = choose_provider(settings)
    if provider == "none":
        raise LLMUnavailable(
            f"no language model ({why})",
            "run `mem models install --llm`, or set CMRAG_LLM_PROVIDER (ollama, openai, llamacpp); see `mem doctor`",
        )
    timeouts = (settings.llm_connect_timeout, settings.llm_timeout)
    if provider == "ollama":
        from crossmodalrag.answer.llm.ollama import DEFAULT_URL, OllamaLLM

        endpoint = Endpoint(settings.llm_base_url or DEFAULT_URL, *timeouts, {})
        return OllamaLLM(endpoint, settings.llm_model, settings.llm_keep_alive, settings.llm_context_tokens)
    if provider == "openai":
        from crossmodalrag.answer.llm.openai_compat import DEFAULT_URL, OpenAICompatLLM, api_base

        endpoint = Endpoint(api_base(settings.llm_base_url or DEFAULT_URL), *timeouts, _auth_headers(settings))
        return OpenAICompatLLM(endpoint, settings.llm_model)
    from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM

    path = settings.llm_model_path or installed_gguf(settings)
    if settings.llm_model_path and not Path(path).is_file():
        raise _setting_names_nothing(settings)
    if not path:
        raise LLMUnavailable(
            "the llamacpp backend needs a GGUF file", "set CMRAG_LLM_MODEL_PATH or run `mem models install --llm`"
        )
    return LlamaCppLLM(
        Path(path),
        settings.llm_context_tokens,
        settings.llm_timeout,
        settings.llm_threads,
        cache_dir=settings.models_dir / "llm" / "cache",
        repack=settings.llm_repack,
    )


def _setting_names_nothing(settings: Settings) -> LLMUnavailable:
    """CMRAG_LLM_MODEL_PATH names no file: the hint said to install a model when one was installed,
    and the setting (which wins over it) was the thing to fix."""
    from crossmodalrag.index.models import unset

    origin = settings.origin("llm_model_path")
    installed = installed_gguf(settings)
    hint = (
        f"{unset(origin)} to use the installed {installed}, or point it at a GGUF file"
        if installed
        else f"point {origin} at a GGUF file, or {unset(origin)} and run `mem models install --llm`"
    )
    return LLMUnavailable(f"no GGUF model at {settings.llm_model_path} (from {origin}): no such file", hint)


def _auth_headers(settings: Settings) -> dict[str, str]:
    """A bearer key read from the variable the config names; the key itself is never configured."""
    if not settings.llm_api_key_env:
        return {}
    key = read_environment(Path.cwd()).get(settings.llm_api_key_env)  # the environment, or ./.env
    if not key:
        raise ConfigError(
            f"CMRAG_LLM_API_KEY_ENV names {settings.llm_api_key_env}, which is not set",
            f"export {settings.llm_api_key_env}=… or unset CMRAG_LLM_API_KEY_ENV",
        )
    return {"Authorization": f"Bearer {key}"}
