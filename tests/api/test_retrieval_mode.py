"""`mem stats`, /stats, /health and the Stats page say which embedding model retrieval uses, or that it
is lexical only and why: they listed stored vectors as if used while every answer was word-only."""

from __future__ import annotations

import sqlite3

import pytest
from fastapi.testclient import TestClient

from crossmodalrag.api.app import create_app
from crossmodalrag.cli.main import main
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.index.models import OFFLINE_NAME, ModelUnavailable
from crossmodalrag.retrieval import semantic as semantic_module
from crossmodalrag.store import open_store
from tests.api.helpers import BASE, cli_json, server_settings
from tests.fakes import HashingEmbedder

ACTIVE = HashingEmbedder(name="fake/active")
OTHER = HashingEmbedder(name=OFFLINE_NAME)  # vectors of the offline model, which this machine lacks


@pytest.fixture
def two_models_db(sample_db, tmp_path):
    db = tmp_path / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    with open_store(db) as store:
        embed_missing(store, ACTIVE)
        embed_missing(store, OTHER)  # the latest vectors: the ones a notice names
    return db


def test_the_model_in_use_is_named_and_marked(two_models_db, monkeypatch, capsys) -> None:
    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: ACTIVE)
    with TestClient(create_app(server_settings(two_models_db)), base_url=BASE) as client:
        stats = client.get("/stats").json()
        assert stats["retrieval"] == {"mode": "hybrid", "embedding_model": "fake/active", "notice": None}
        assert client.get("/health").json()["retrieval"] == stats["retrieval"]
        page = client.get("/ui/stats").text
    assert "Retrieval: hybrid, words and fake/active." in page
    assert page.count(">in use<") == 1 and page.index("fake/active") < page.index(">in use<")
    assert cli_json(capsys, "stats", "--db-path", str(two_models_db))["retrieval"] == stats["retrieval"]
    assert main(["stats", "--db-path", str(two_models_db)]) == 0
    assert "retrieval: hybrid with fake/active\n" in capsys.readouterr().out


def test_vectors_no_model_can_read_say_retrieval_is_lexical_and_why(two_models_db, monkeypatch, capsys) -> None:
    def unavailable(settings):
        raise ModelUnavailable("embedding model BAAI/bge-small-en-v1.5 is not cached and the model hub is unreachable")

    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)
    monkeypatch.setattr(embed_module, "load_embedder", unavailable)
    with TestClient(create_app(server_settings(two_models_db)), base_url=BASE) as client:
        retrieval = client.get("/stats").json()["retrieval"]
        assert client.get("/health").json()["retrieval"] == retrieval
        page = client.get("/ui/stats").text
    assert retrieval["mode"] == "lexical" and retrieval["embedding_model"] is None
    assert retrieval["notice"].startswith("lexical retrieval only: the stored vectors were made by")
    assert "mem models install --offline" in retrieval["notice"] and "in use" not in page
    assert "Retrieval: lexical retrieval only: the stored vectors were made by" in page
    capsys.readouterr()
    assert cli_json(capsys, "stats", "--db-path", str(two_models_db))["retrieval"] == retrieval


def test_one_chunk_without_vectors_is_one_chunk(two_models_db, monkeypatch) -> None:
    """The notice said "1 chunks have no vectors yet"."""
    from tests.retrieval.helpers import add_docs, note

    with open_store(two_models_db) as store:
        add_docs(store, note("late", "the zebracorn migration finished"))  # stored, never embedded
    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: ACTIVE)
    with TestClient(create_app(server_settings(two_models_db)), base_url=BASE) as client:
        notice = client.get("/stats").json()["retrieval"]["notice"]
    assert notice == "1 chunk has no vectors yet; run `mem reindex-embeddings`"
