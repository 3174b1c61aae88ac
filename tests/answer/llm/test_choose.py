"""Which backend `auto` picks, and what load_llm builds or says when there is none.

The conftest points the Ollama probe at a closed port for every test, so an Ollama that happens to run
on this machine cannot change the outcome; the probe tests point it at a stand-in instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crossmodalrag.answer.llm import choose_provider, installed_gguf, load_llm
from crossmodalrag.answer.llm import llamacpp as llamacpp_module
from crossmodalrag.answer.llm import ollama as ollama_module
from crossmodalrag.answer.llm.base import LLMUnavailable
from crossmodalrag.answer.llm.llamacpp import LlamaCppLLM
from crossmodalrag.answer.llm.ollama import OllamaLLM
from crossmodalrag.answer.llm.openai_compat import OpenAICompatLLM
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.errors import ConfigError
from tests.answer.llm.conftest import StubServer, reply_hang, reply_json, serve_ollama


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(db_path=tmp_path / "data" / "memory.db")


@pytest.fixture
def with_llama_cpp(monkeypatch):
    monkeypatch.setattr(llamacpp_module, "llamacpp_installed", lambda: True)


@pytest.fixture
def without_llama_cpp(monkeypatch):
    monkeypatch.setattr(llamacpp_module, "llamacpp_installed", lambda: False)


def install_gguf(settings: Settings, name: str = "model.gguf", mtime: float | None = None) -> Path:
    path = settings.models_dir / "llm" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF")  # choosing never opens the file
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.mark.parametrize("provider", ["ollama", "openai", "llamacpp", "none"])
def test_an_explicit_provider_wins_over_everything(settings: Settings, provider, with_llama_cpp):
    settings.llm_provider = provider
    settings.llm_model_path = "/models/x.gguf"
    settings.llm_base_url = "http://127.0.0.1:8080"
    install_gguf(settings)
    assert choose_provider(settings) == (provider, f"CMRAG_LLM_PROVIDER={provider}")


def test_a_model_path_means_llamacpp(settings: Settings):
    settings.llm_model_path = "/models/x.gguf"
    settings.llm_base_url = "http://127.0.0.1:8080"  # the path comes first
    assert choose_provider(settings) == ("llamacpp", "CMRAG_LLM_MODEL_PATH is set")


def test_a_base_url_means_openai(settings: Settings, with_llama_cpp):
    settings.llm_base_url = "http://127.0.0.1:8080"
    install_gguf(settings)  # the configured server comes before an installed model
    assert choose_provider(settings) == ("openai", "CMRAG_LLM_BASE_URL is set")


def test_an_installed_gguf_with_llama_cpp_means_llamacpp(settings: Settings, with_llama_cpp):
    gguf = install_gguf(settings, "qwen.gguf")
    provider, why = choose_provider(settings)
    assert provider == "llamacpp" and "qwen.gguf" in why
    llm = load_llm(settings)
    assert isinstance(llm, LlamaCppLLM) and llm.model_path == gguf


def test_the_newest_installed_gguf_is_used(settings: Settings):
    install_gguf(settings, "old.gguf", mtime=1_600_000_000)
    install_gguf(settings, "new.gguf", mtime=1_700_000_000)
    install_gguf(settings, "between.gguf", mtime=1_650_000_000)
    (settings.models_dir / "llm" / "notes.txt").write_text("not a model")
    assert installed_gguf(settings).name == "new.gguf"


def test_nothing_installed_means_no_gguf(settings: Settings):
    assert installed_gguf(settings) is None
    (settings.models_dir / "llm").mkdir(parents=True)
    assert installed_gguf(settings) is None


def test_a_gguf_without_llama_cpp_says_so(settings: Settings, without_llama_cpp, sleeps):
    install_gguf(settings, "qwen.gguf")
    provider, why = choose_provider(settings)
    assert provider == "none" and "qwen.gguf" in why and "llama-cpp-python" in why


def test_an_ollama_server_is_found_by_the_probe(settings: Settings, stub: StubServer, monkeypatch, without_llama_cpp):
    serve_ollama(stub, ["hi"])
    monkeypatch.setattr(ollama_module, "DEFAULT_URL", stub.url)
    provider, why = choose_provider(settings)
    assert provider == "ollama" and stub.url in why
    assert [seen.path for seen in stub.requests] == ["/api/version"]
    llm = load_llm(settings)
    assert isinstance(llm, OllamaLLM) and llm.endpoint.base_url == stub.url
    assert llm.keep_alive == settings.llm_keep_alive and llm.context_tokens == settings.llm_context_tokens


def test_an_installed_gguf_comes_before_the_probe(settings: Settings, stub: StubServer, monkeypatch, with_llama_cpp):
    serve_ollama(stub, ["hi"])
    monkeypatch.setattr(ollama_module, "DEFAULT_URL", stub.url)
    install_gguf(settings)
    assert choose_provider(settings)[0] == "llamacpp"
    assert stub.requests == []


@pytest.mark.parametrize(
    "reply",
    [
        reply_json({"detail": "Not Found"}, status=404),  # another server on the port
        reply_json("<html>hello</html>"),  # 200 but not JSON
        reply_json({}, status=503),
    ],
    ids=["404", "not-json", "503"],
)
def test_something_else_on_the_ollama_port_is_not_ollama(settings, stub, monkeypatch, without_llama_cpp, sleeps, reply):
    stub.on("GET", "/api/version", reply)
    monkeypatch.setattr(ollama_module, "DEFAULT_URL", stub.url)
    assert choose_provider(settings) == ("none", "none is configured")
    assert len(stub.requests) == 1 and sleeps == []  # a probe, not a retry loop


def test_a_silent_listener_on_the_ollama_port_is_not_waited_for(settings, stub, monkeypatch, without_llama_cpp, sleeps):
    stub.on("GET", "/api/version", reply_hang())
    monkeypatch.setattr(ollama_module, "DEFAULT_URL", stub.url)
    assert choose_provider(settings)[0] == "none"
    assert len(stub.requests) == 1 and sleeps == []


def test_the_probe_of_a_closed_port_does_not_back_off(settings: Settings, without_llama_cpp, sleeps, connects):
    """Every `mem ask` without a model runs this probe: one attempt, no retry sleeps."""
    assert choose_provider(settings) == ("none", "none is configured")
    assert connects == ["/api/version"] and sleeps == []


def test_nothing_at_all_is_unavailable_with_a_hint(settings: Settings, without_llama_cpp, sleeps):
    with pytest.raises(LLMUnavailable) as caught:
        load_llm(settings)
    assert "no language model" in caught.value.message and "none is configured" in caught.value.message
    assert "mem models install --llm" in caught.value.hint and "CMRAG_LLM_PROVIDER" in caught.value.hint


def test_provider_none_is_unavailable(settings: Settings):
    settings.llm_provider = "none"
    with pytest.raises(LLMUnavailable, match="CMRAG_LLM_PROVIDER=none"):
        load_llm(settings)


def test_llamacpp_without_any_gguf_is_unavailable(settings: Settings, with_llama_cpp):
    settings.llm_provider = "llamacpp"
    with pytest.raises(LLMUnavailable) as caught:
        load_llm(settings)
    assert "CMRAG_LLM_MODEL_PATH" in caught.value.hint


def test_a_model_path_naming_no_file_says_so_and_names_the_installed_model(settings: Settings, tmp_path: Path):
    """The hint said to install a model while one was installed: the setting, which wins over it,
    is what to fix."""
    settings.llm_model_path = str(tmp_path / "nope.gguf")
    with pytest.raises(LLMUnavailable) as caught:
        load_llm(settings)
    assert (
        caught.value.message == f"no GGUF model at {tmp_path / 'nope.gguf'} (from CMRAG_LLM_MODEL_PATH): no such file"
    )
    assert "run `mem models install --llm`" in caught.value.hint
    installed = install_gguf(settings)
    with pytest.raises(LLMUnavailable) as caught:
        load_llm(settings)
    assert (
        caught.value.hint == f"unset CMRAG_LLM_MODEL_PATH to use the installed {installed}, or point it at a GGUF file"
    )


def test_a_model_path_is_loaded_lazily(settings: Settings, tmp_path: Path):
    pytest.importorskip("llama_cpp")
    path = tmp_path / "not-really.gguf"
    path.write_bytes(b"not a model")
    settings.llm_model_path = str(path)
    llm = load_llm(settings)  # building the backend reads nothing: errors come with check() or stream()
    assert isinstance(llm, LlamaCppLLM) and llm.model == "not-really.gguf" and llm.provider == "llamacpp"


def test_a_relative_model_path_resolves_against_the_working_dir(isolated_env: Path, monkeypatch):
    pytest.importorskip("llama_cpp")
    (isolated_env / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("CMRAG_LLM_MODEL_PATH", "m.gguf")
    llm = load_llm(load_settings())
    assert isinstance(llm, LlamaCppLLM) and llm.model_path == isolated_env / "m.gguf"


def test_openai_defaults_to_a_local_server(settings: Settings):
    settings.llm_provider = "openai"
    llm = load_llm(settings)
    assert isinstance(llm, OpenAICompatLLM) and llm.endpoint.base_url == "http://127.0.0.1:8080/v1"


def test_ollama_defaults_to_its_local_port(settings: Settings, closed_url: str):
    settings.llm_provider = "ollama"
    llm = load_llm(settings)
    assert isinstance(llm, OllamaLLM) and llm.endpoint.base_url == closed_url  # DEFAULT_URL, patched


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_plain_http_to_a_remote_server_is_refused_before_any_request(settings: Settings, provider):
    settings.llm_provider = provider
    settings.llm_base_url = "http://gpu-box.lan:8080"
    with pytest.raises(ConfigError, match="plain HTTP"):
        load_llm(settings)


def test_an_unknown_provider_is_a_config_error(monkeypatch):
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "chatgpt")
    with pytest.raises(ConfigError):
        load_settings()
