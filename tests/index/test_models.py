"""Model resolution, pinned checksums, and failing fast (never hanging) when a model is not here."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index import models
from crossmodalrag.index.models import ModelSpec, ModelUnavailable, resolve_model, verify


def settings_at(tmp_path: Path, **values) -> Settings:
    return Settings(db_path=tmp_path / "m.db", **values)


def test_resolution_order(tmp_path):
    assert resolve_model(settings_at(tmp_path)).name == "BAAI/bge-small-en-v1.5"  # nothing installed
    offline = models.offline_spec(settings_at(tmp_path))
    offline.path.mkdir(parents=True)
    (offline.path / "model.onnx").write_bytes(b"x")
    chosen = resolve_model(settings_at(tmp_path))
    assert chosen.name == models.OFFLINE_NAME and chosen.max_tokens == 256 and chosen.pinned
    assert resolve_model(settings_at(tmp_path, embed_model="BAAI/bge-small-en-v1.5")).path is None
    local = resolve_model(settings_at(tmp_path, embed_model_path=str(tmp_path / "mine")))
    assert local.path == tmp_path / "mine" and local.name == "mine"
    moved = resolve_model(settings_at(tmp_path, embed_model_path=str(tmp_path / "elsewhere" / models.OFFLINE_DIR)))
    assert (moved.name, moved.engine, moved.path) == (offline.name, "onnx", tmp_path / "elsewhere" / models.OFFLINE_DIR)


def test_a_local_model_fastembed_cannot_name_is_one_clear_error(tmp_path):
    pytest.importorskip("fastembed")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"x")
    with pytest.raises(ModelUnavailable, match="set CMRAG_EMBED_MODEL"):
        embed_module.FastEmbedder(resolve_model(settings_at(tmp_path, embed_model_path=str(folder))), str(tmp_path))


def test_a_file_that_fails_its_pinned_checksum_is_an_error(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not the real weights")
    spec = ModelSpec("x", folder, {"model.onnx": "0" * 64})
    with pytest.raises(ModelUnavailable, match="fails its checksum"):
        verify(spec)
    with pytest.raises(ModelUnavailable, match="no ONNX model"):
        verify(ModelSpec("x", tmp_path / "empty"))


def test_an_uncached_hub_model_fails_in_seconds_when_offline(tmp_path, monkeypatch):
    pytest.importorskip("fastembed")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(models, "HUB_HOST", ("hub.invalid", 443))  # resolves nowhere, like a closed network
    embed_module._FAILED.clear()
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match="not cached and the model hub is unreachable"):
        embed_module.load_embedder(settings_at(tmp_path, embed_model="BAAI/bge-small-en-v1.5"))
    assert time.monotonic() - started < 10  # fastembed's own retry loop takes ~40 s
    with pytest.raises(ModelUnavailable):  # remembered: the second command does not wait again
        embed_module.load_embedder(settings_at(tmp_path, embed_model="BAAI/bge-small-en-v1.5"))
    embed_module._FAILED.clear()


def test_hub_probe_times_out_quickly(monkeypatch):
    def refuse(*args, **kwargs):
        raise socket.timeout("timed out")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert models.hub_reachable(timeout=0.1) is False


def test_without_the_extra_the_error_names_the_install(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_fastembed(name, *args, **kwargs):
        if name == "fastembed":
            raise ImportError("No module named 'fastembed'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fastembed)
    embed_module._FAILED.clear()
    with pytest.raises(ModelUnavailable, match="embeddings extra") as info:
        embed_module.FastEmbedder(ModelSpec("x", tmp_path), "")
    assert 'pip install -e ".[embeddings]"' in info.value.hint


def test_an_import_of_the_extra_cut_short_by_ctrl_c_is_a_ctrl_c_not_a_missing_extra():
    """numpy turns a Ctrl-C during its import into an ImportError: a second Ctrl-C while `mem sync
    --watch` stopped said "the embeddings extra is not installed"."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("cannot load module more than once per process") from None
    except ImportError as error:
        with pytest.raises(KeyboardInterrupt):
            embed_module.extra_import_failed(error, ("pytest",))


def test_an_installed_extra_that_fails_to_import_is_not_called_missing():
    broken = embed_module.extra_import_failed(ImportError("\n\nIMPORTANT: numpy C-extensions failed\n"), ("pytest",))
    assert (
        broken.message
        == "the embeddings extra is installed but failed to import (IMPORTANT: numpy C-extensions failed)"
    )
    missing = embed_module.extra_import_failed(ImportError("No module"), ("pytest", "no_such_module_here"))
    assert missing.message == "the embeddings extra is not installed" and "pip install" in missing.hint
