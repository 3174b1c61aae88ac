"""Models left in ./data/models when CMRAG_DB_PATH moved the database, and the hint when no model is
installed at all: every command names the real cause and a step that works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index import models
from crossmodalrag.ingest.notes import ingest_notes
from crossmodalrag.retrieval import semantic as semantic_module
from tests.conftest import write_note


def leave_models_in_the_working_directory(work: Path) -> Path:
    """What `mem models install --offline --llm` wrote before the database moved (contents faked)."""
    folder = work / "data" / "models"
    (folder / models.OFFLINE_DIR).mkdir(parents=True)
    (folder / models.OFFLINE_DIR / "model.onnx").write_bytes(b"x")
    (folder / "llm").mkdir()
    (folder / "llm" / "qwen.gguf").write_bytes(b"x")
    return folder.resolve()


def test_models_left_behind_by_a_moved_database_are_named_by_models_list_ask_and_the_loader(
    isolated_env, db_path, capsys
):
    """The database moved (CMRAG_DB_PATH): `mem models list` and doctor blamed the hub model
    BAAI/bge-small-en-v1.5 and "none is configured", ask named MiniLM; none said where the models were."""
    left = leave_models_in_the_working_directory(isolated_env)
    settings = Settings(db_path=db_path)
    assert models.left_behind(settings) == left
    assert models.left_behind(Settings()) is None  # the default database: its models are where they belong

    assert main(["models", "list", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert f"move {left} to {db_path.parent / 'models'}" in listing["left_behind"]
    assert "qwen.gguf is not beside the database" in listing["llm"]["why"]

    embed_module._FAILED.clear()
    with pytest.raises(models.ModelUnavailable) as raised:  # what doctor and reindex-embeddings show
        embed_module.load_embedder(settings)
    embed_module._FAILED.clear()
    assert raised.value.message.startswith(f"no embedding model in {db_path.parent / 'models'}")
    assert raised.value.hint.startswith(f"move {left} to ")


def test_with_no_model_installed_ask_says_to_install_one_before_reindexing(store, db_path, monkeypatch):
    """A lexical-only install: every ask said "run `mem reindex-embeddings`", which then failed for want
    of a model."""
    vault = db_path.parent / "vault"
    write_note(vault, "rate.md", "# Rate limits\n\nThe API rate limit is 100 requests per minute.\n")
    ingest_notes(store, [vault])
    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)
    notice = semantic_module.open_semantic(store, Settings(db_path=db_path)).notice
    assert notice == (
        "lexical retrieval only: no vectors yet and no embedding model installed"
        " (hint: run `mem models install --offline`, then `mem reindex-embeddings`)"
    )
    installed = models.offline_spec(Settings(db_path=db_path)).path
    installed.mkdir(parents=True)
    (installed / "model.onnx").write_bytes(b"x")
    assert semantic_module.open_semantic(store, Settings(db_path=db_path)).notice.endswith(
        "no vectors yet; run `mem reindex-embeddings`"
    )
