"""`mem sync`: every configured connector in one incremental pass, per-connector reports, failures kept apart."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.sync import configured_paths, sync
from tests.conftest import commit_files, write_note
from tests.pdfs import write_pdf

CONNECTOR_KEYS = {
    "status",
    "paths",
    "added",
    "updated",
    "unchanged",
    "removed",
    "moved",
    "empty",
    "failed",
    "chunks",
    "failures",
    "notices",
    "skipped",
}


@pytest.fixture(autouse=True)
def no_file_connectors(monkeypatch):
    """conftest clears the notes and git variables; the PDF and image ones must not leak in either."""
    import os

    for key in list(os.environ):
        if key.startswith(("PDF_PATH", "IMAGE_PATH")):
            monkeypatch.delenv(key)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write_note(root, "parser.md", "# Parser rewrite\nWe replaced regexes with a tokenizer.\n")
    write_note(root, "cache.md", "# Render cache\nThe LRU cache served stale HTML.\n")
    return root


@pytest.fixture
def history(repo: Path) -> Path:
    commit_files(repo, {"parser.py": "def parse():\n    return 1\n"}, "Add the parser")
    commit_files(
        repo, {"parser.py": "def parse():\n    return 2\n"}, "Fix the parser", date="2025-02-01T12:00:00+00:00"
    )
    return repo


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str) -> tuple[int, dict, str]:
    code, out, err = run(capsys, "sync", "--json", *argv)
    return code, json.loads(out), err


def source_uris(db_path: Path) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        return {uri for (uri,) in conn.execute("SELECT uri FROM sources")}


def source_ids(db_path: Path) -> dict[str, int]:
    with sqlite3.connect(db_path) as conn:
        return dict(conn.execute("SELECT uri, id FROM sources"))


def configure(monkeypatch, **paths: Path) -> None:
    variables = {"notes": "OBSIDIAN_VAULT_PATH", "git": "REPO_PATH", "pdf": "PDF_PATH", "image": "IMAGE_PATH"}
    for name, path in paths.items():
        monkeypatch.setenv(f"{variables[name]}_1", str(path))


def test_one_pass_over_every_connector_then_a_second_pass_changes_nothing(
    capsys, monkeypatch, vault, history, tmp_path, db_path
):
    pytest.importorskip("pypdfium2")
    papers = tmp_path / "papers"
    write_pdf(papers / "spec.pdf", ["Rate limits are 100 requests per minute."])
    configure(monkeypatch, notes=vault, git=history, pdf=papers)

    code, data, err = run_json(capsys)
    assert code == 0 and "Traceback" not in err
    assert list(data["connectors"]) == ["notes", "git", "pdf"]
    for part in data["connectors"].values():
        assert set(part) == CONNECTOR_KEYS and part["status"] == "ok"
    assert [data["connectors"][name]["added"] for name in ("notes", "git", "pdf")] == [2, 2, 1]
    assert data["added"] == 5 and data["failed"] == 0 and data["embedded"] == 0
    assert data["connectors"]["notes"]["paths"] == [str(vault.resolve())]
    assert "sync notes: 2 added" in err and "sync git: 2 added" in err and "sync: 5 added" in err
    stored = source_uris(db_path)
    assert len(stored) == 5 and str(papers.resolve() / "spec.pdf") in stored

    code, again, _ = run_json(capsys)
    assert code == 0
    assert (again["added"], again["updated"], again["removed"], again["chunks"]) == (0, 0, 0, 0)
    assert again["unchanged"] == 5
    assert source_uris(db_path) == stored


@pytest.mark.integration
def test_images_are_synced_with_real_ocr(capsys, monkeypatch, tmp_path):
    pytest.importorskip("rapidocr")
    from tests.images import write_text_image

    screens = tmp_path / "screens"
    write_text_image(screens / "board.png", ["Ship the tokenizer"], size=(600, 160))
    configure(monkeypatch, image=screens)
    code, data, _ = run_json(capsys)
    assert code == 0 and data["connectors"]["image"]["added"] == 1
    code, data, _ = run_json(capsys)
    assert data["connectors"]["image"]["unchanged"] == 1 and data["added"] == 0


def test_edits_and_deletions_are_applied_and_a_missing_vault_removes_nothing(capsys, monkeypatch, vault, db_path):
    configure(monkeypatch, notes=vault)
    run(capsys, "sync")
    (vault / "cache.md").unlink()
    write_note(vault, "parser.md", "# Parser rewrite\nNow with a hand-written lexer.\n")
    code, data, _ = run_json(capsys)
    assert code == 0 and (data["updated"], data["removed"], data["unchanged"]) == (1, 1, 0)

    shutil.rmtree(vault)  # an unmounted drive or a moved folder must not wipe the memory
    code, data, err = run_json(capsys)
    assert code == 1 and data["removed"] == 0 and data["connectors"]["notes"]["status"] == "failed"
    assert "no such folder" in data["failures"][0] and "error: " in err
    assert source_uris(db_path) == {str(vault.resolve() / "parser.md")}


def test_a_vault_and_a_repository_moved_and_configured_anew_keep_their_ids_and_are_not_stored_twice(
    capsys, monkeypatch, vault, history, tmp_path, db_path
):
    """The config names the new folders; the old ones are gone: the same notes and commits, moved."""
    configure(monkeypatch, notes=vault, git=history)
    run(capsys, "sync")
    ids = source_ids(db_path)
    vault.rename(tmp_path / "Documents-notes")
    history.rename(tmp_path / "src-repo")
    write_note(tmp_path / "Documents-notes", "cache.md", "# Render cache\nNow served fresh.\n")  # edited too
    configure(monkeypatch, notes=tmp_path / "Documents-notes", git=tmp_path / "src-repo")
    code, data, err = run_json(capsys)
    assert code == 0 and data["connectors"]["git"]["moved"] == 2 and data["connectors"]["notes"]["moved"] == 1
    stored = source_uris(db_path)
    assert str(tmp_path / "Documents-notes" / "parser.md") in stored and len(stored) == 5
    after = source_ids(db_path)
    new_places = {str(vault / "parser.md"): str(tmp_path / "Documents-notes" / "parser.md")}
    new_places.update((uri, uri.replace(str(history), str(tmp_path / "src-repo"))) for uri in ids if "@" in uri)
    assert len(new_places) == 3 and all(after[new] == ids[old] for old, new in new_places.items())
    # cache.md, edited as it moved, is a new note: its old copy is said to be left behind, with the way out
    (left,) = [notice for notice in data["notices"] if "gone from disk" in notice]
    assert left.startswith(f"{vault}: 1 source stored from it") and f"mem forget --path {vault}" in left
    assert f"note: {left}" in err
    assert run(capsys, "forget", "--path", str(vault), "--yes")[0] == 0
    assert not [notice for notice in run_json(capsys)[1]["notices"] if "gone from disk" in notice]


def test_a_bad_path_fails_its_connector_and_the_others_still_sync(capsys, monkeypatch, vault, history, tmp_path):
    monkeypatch.setenv("REPO_PATH_1", str(tmp_path / "no-such-repo"))
    monkeypatch.setenv("REPO_PATH_2", str(history))
    monkeypatch.setenv("PDF_PATH_1", str(tmp_path / "missing.pdf"))
    configure(monkeypatch, notes=vault)

    code, data, err = run_json(capsys)
    assert code == 1 and "Traceback" not in err
    parts = data["connectors"]
    assert parts["notes"]["status"] == "ok" and parts["notes"]["added"] == 2
    assert parts["git"]["status"] == "failed" and parts["git"]["added"] == 2 and parts["git"]["failed"] == 1
    assert "no-such-repo" in parts["git"]["failures"][0]
    assert parts["pdf"]["status"] == "failed" and "missing.pdf" in parts["pdf"]["failures"][0]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and all("hint:" in line for line in errors)


def test_a_connector_whose_extra_is_missing_is_skipped_with_a_note(capsys, monkeypatch, vault, tmp_path):
    from crossmodalrag.connectors import pdf

    def missing(*args, **kwargs):
        raise MissingExtraError("PDF support is not installed", 'pip install -e ".[pdf]"')

    monkeypatch.setattr(pdf, "extractor_version_or_raise", missing)
    papers = tmp_path / "papers"
    papers.mkdir()
    configure(monkeypatch, notes=vault, pdf=papers)

    code, data, err = run_json(capsys)
    assert code == 0
    skipped = data["connectors"]["pdf"]
    assert skipped["status"] == "skipped" and skipped["failed"] == 0
    assert skipped["skipped"] == 'PDF support is not installed (hint: pip install -e ".[pdf]")'
    assert data["connectors"]["notes"]["added"] == 2
    assert 'note: pdf skipped: PDF support is not installed (hint: pip install -e ".[pdf]")' in err
    assert "sync pdf:" not in err  # no summary line for a connector that did not run


def test_only_syncs_the_chosen_connectors(capsys, monkeypatch, vault, history, db_path):
    configure(monkeypatch, notes=vault, git=history)
    code, data, _ = run_json(capsys, "--only", "git")
    assert code == 0 and list(data["connectors"]) == ["git"]
    assert all("@" in uri for uri in source_uris(db_path))
    code, data, _ = run_json(capsys, "--only", "notes", "git")
    assert list(data["connectors"]) == ["notes", "git"] and data["connectors"]["git"]["unchanged"] == 2


def test_only_a_connector_that_is_not_configured_is_an_error(capsys, monkeypatch, vault):
    configure(monkeypatch, notes=vault)
    for name in ("image", "images"):  # also as the [connectors] table spells it
        code, out, err = run(capsys, "sync", "--only", name)
        assert code == 1 and out == ""
        assert err.startswith("error: nothing to sync: no image connector is configured") and "IMAGE_PATH_1" in err


def test_only_rejects_an_unknown_connector(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sync", "--only", "email"])
    assert exit_info.value.code == 2


def test_debounce_without_watch_is_refused_not_ignored(capsys, db_path):
    code, _, err = run(capsys, "sync", "--debounce", "5")
    assert (
        code == 1 and err == "error: --debounce applies to --watch only (hint: add --watch, or leave --debounce out)\n"
    )
    assert not db_path.exists()


def test_nothing_configured_is_one_error_line_and_creates_no_database(capsys, db_path):
    code, out, err = run(capsys, "sync")
    assert code == 1 and out == ""
    assert err.startswith("error: nothing to sync: no connector is configured (hint: set OBSIDIAN_VAULT_PATH_1")
    assert err.count("\n") == 1 and not db_path.exists()


def test_max_commits_flag_overrides_the_setting(capsys, monkeypatch, history):
    commit_files(history, {"notes.txt": "third\n"}, "Third commit", date="2025-03-01T12:00:00+00:00")
    configure(monkeypatch, git=history)
    monkeypatch.setenv("CMRAG_GIT_MAX_COMMITS", "2")
    _, data, _ = run_json(capsys, "--max-commits", "1")
    assert data["connectors"]["git"]["added"] == 1
    _, data, _ = run_json(capsys)
    assert data["connectors"]["git"]["added"] == 1 and data["connectors"]["git"]["unchanged"] == 1
    _, data, _ = run_json(capsys, "--max-commits", "0")  # 0 = all
    assert data["connectors"]["git"]["added"] == 1 and data["connectors"]["git"]["unchanged"] == 2


def test_toml_connectors_and_configured_globs_are_used(capsys, monkeypatch, vault, isolated_env, db_path):
    write_note(vault, "private/diary.md", "# Diary\nNot for the memory.\n")
    (isolated_env / "crossmodalrag.toml").write_text(
        f'[connectors]\nnotes = ["{vault}"]\nnotes_exclude = ["private/**"]\n', encoding="utf-8"
    )
    code, data, _ = run_json(capsys)
    assert code == 0 and data["connectors"]["notes"]["added"] == 2
    assert not any("diary" in uri for uri in source_uris(db_path))


def test_dotenv_connectors_are_used(capsys, vault, isolated_env):
    (isolated_env / ".env").write_text(f"OBSIDIAN_VAULT_PATH_1={vault}\n", encoding="utf-8")
    code, data, _ = run_json(capsys)
    assert code == 0 and data["connectors"]["notes"]["added"] == 2


def test_the_library_reports_progress_and_each_connector_when_done(store, vault, history):
    settings = Settings(db_path=store.path, notes_paths=[vault], git_paths=[history, history])
    steps, done = [], []

    class Recorder:
        def step(self, connector, report):
            steps.append(connector)

        def done(self, result):
            done.append((result.connector, result.status))

    report = sync(store, settings, progress=Recorder())
    assert done == [("notes", "ok"), ("git", "ok")]
    assert set(steps) == {"notes", "git"}
    assert report.connectors[1].paths == [history.resolve()]  # a path listed twice is synced once
    assert report.total.added == 4 and not report.failed
    assert report.to_dict()["connectors"]["git"]["added"] == 2


def test_configured_paths_raises_a_hinted_error_when_empty():
    with pytest.raises(CMRAGError) as error:
        configured_paths(Settings(), ("git", "pdf"))
    assert "no git or pdf connector" in error.value.message and "REPO_PATH_1, PDF_PATH_1" in error.value.hint


def test_the_cli_offers_exactly_the_library_connectors():
    from crossmodalrag import sync as library
    from crossmodalrag.cli import sync as cli

    assert cli.CONNECTORS == library.CONNECTORS  # duplicated so `mem --help` need not import the ingest stack


def test_a_sync_with_nothing_changed_embeds_chunks_an_interrupted_run_left_without_vectors(
    capsys, monkeypatch, vault, db_path
):
    from types import SimpleNamespace

    from crossmodalrag.cli import sync as sync_cli

    calls = []
    monkeypatch.setattr(
        sync_cli, "embed_new_chunks", lambda store, settings: calls.append(1) or SimpleNamespace(chunks=1)
    )
    configure(monkeypatch, notes=vault)
    assert run_json(capsys)[0] == 0 and calls == [1]  # new chunks: embedded
    assert run_json(capsys)[1]["embedded"] == 0 and calls == [1]  # nothing changed, no vectors used: nothing to do
    with sqlite3.connect(db_path) as conn:  # the memory uses vectors, and the run that wrote them was cut short
        conn.execute(
            "INSERT INTO embedding_models (name, sha256, dim, max_tokens, created_at) VALUES ('m', 's', 4, 8, 0)"
        )
    code, data, _ = run_json(capsys)
    assert code == 0 and data["unchanged"] == 2 and data["embedded"] == 1 and calls == [1, 1]
