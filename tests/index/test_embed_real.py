"""The real offline MiniLM (assembled from PyPI packages), run by onnxruntime directly and through
fastembed: no network, real vectors, the same vectors on both paths."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index.models import install_offline
from crossmodalrag.index.onnx_embed import OnnxEmbedder

pytestmark = pytest.mark.integration
pytest.importorskip("fastembed")


@pytest.fixture(scope="module")
def offline_settings(tmp_path_factory):
    settings = Settings(db_path=tmp_path_factory.mktemp("models") / "m.db")
    install_offline(settings)
    return settings


@pytest.fixture(scope="module")
def real_embedder(offline_settings):
    return embed_module.FastEmbedder(
        embed_module.resolve_model(offline_settings), str(offline_settings.models_dir / "fastembed")
    )


@pytest.fixture(scope="module")
def direct_embedder(offline_settings):
    return OnnxEmbedder(embed_module.resolve_model(offline_settings))


def test_the_default_model_runs_without_importing_fastembed(offline_settings):
    """A cold process that embeds a query must not pay fastembed's import (~0.45 s)."""
    script = (
        "import sys; from pathlib import Path; from crossmodalrag.config import Settings;"
        "from crossmodalrag.index.embed import load_embedder, embed_queries;"
        f"embedder = load_embedder(Settings(db_path=Path({str(offline_settings.db_path)!r})));"
        "embed_queries(embedder, ['a question']);"
        "print(type(embedder).__name__, 'fastembed' in sys.modules)"
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["OnnxEmbedder", "False"]


def test_embedding_leaves_no_telemetry_behind(offline_settings, tmp_path):
    """onnxruntime on Linux queues a telemetry event (device id, OS, CPU, interpreter path) under
    ~/.cache/Microsoft for upload in every process that starts it, unless told not to: mem does."""
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "HF_HUB_DISABLE_TELEMETRY")}
    env["HOME"] = str(tmp_path)
    script = (
        "from pathlib import Path; from crossmodalrag.config import Settings;"
        "from crossmodalrag.index.embed import load_embedder, embed_queries;"
        f"embedder = load_embedder(Settings(db_path=Path({str(offline_settings.db_path)!r})));"
        "print(len(embed_queries(embedder, ['a question'])[0]))"
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert output.stdout.split() == ["384"]
    assert not (tmp_path / ".cache" / "Microsoft").exists()
    assert "telemetry" not in output.stderr


TEXTS = [
    "the parser was rewritten",
    "we replaced the regex parser with a tokenizer",
    "tomato soup",
    "",
    "literal [CLS] and [SEP] markers, Ünïcödé, 中文 and テスト " * 3,
    " ".join(f"token{i} is a word" for i in range(300)),  # past the 256-token window: truncated alike
]


def test_direct_onnx_vectors_equal_fastembeds(real_embedder, direct_embedder):
    assert direct_embedder.identity == real_embedder.identity
    # One padded batch, and each text alone (queries): the same float32 values, not just close ones.
    assert np.array_equal(direct_embedder.embed(TEXTS), real_embedder.embed(TEXTS))
    for text in TEXTS:
        assert np.array_equal(direct_embedder.embed([text]), real_embedder.embed_queries([text]))
    assert direct_embedder.split_to_window(TEXTS[-1]) == real_embedder.split_to_window(TEXTS[-1])
    assert direct_embedder.embed([]).shape == (0, 384)


def test_offline_model_loads_and_embeds_without_any_network(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a local model must not open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    settings = Settings(db_path=tmp_path / "m.db")
    install_offline(settings)
    embedder = OnnxEmbedder(embed_module.resolve_model(settings))
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
    window = real_embedder.identity.max_tokens
    assert all(len(real_embedder._untruncated.encode(p).ids) <= window for p in pieces)
    assert real_embedder.split_to_window("short text") == ["short text"]
    assert len(real_embedder._tokenizer.encode(text).ids) == window  # splitting left the shared window on


def test_a_corrupted_model_file_is_refused(tmp_path):
    settings = Settings(db_path=tmp_path / "m.db")
    path = install_offline(settings)
    with (path / "vocab.txt").open("a") as handle:
        handle.write("tampered\n")
    for load in (OnnxEmbedder, lambda spec: embed_module.FastEmbedder(spec, "")):
        with pytest.raises(embed_module.ModelUnavailable, match="fails its checksum"):
            load(embed_module.resolve_model(settings))


def test_a_question_holding_a_lone_surrogate_is_embedded_with_it_replaced(direct_embedder):
    """A byte that is not UTF-8 (JSON's "\\udcff" from an MCP client, a pipe) reaches the query as a lone
    surrogate; the tokenizers library refused the whole call (`mem chat` ended on it)."""
    from crossmodalrag.index.embed import embed_queries

    with pytest.raises(TypeError):  # the library's own behaviour, which the helper guards against
        direct_embedder.embed(["tokenizer \udcff parser"])
    vector = embed_queries(direct_embedder, ["tokenizer \udcff parser"])[0]
    assert vector.shape == (direct_embedder.identity.dim,) and abs(float(vector @ vector) - 1.0) < 1e-4
