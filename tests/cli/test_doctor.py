"""`mem doctor`: read-only, and it says in plain words why retrieval is lexical only."""

from __future__ import annotations

import json
import sqlite3

from crossmodalrag.cli.main import main
from crossmodalrag.doctor import diagnose
from tests.conftest import write_note


def doctor_json(capsys) -> tuple[int, dict]:
    code = main(["doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_missing_database_is_a_problem_and_nothing_is_created(capsys, db_path):
    code, report = doctor_json(capsys)
    assert code == 1 and not db_path.exists()
    assert report["database"]["exists"] is False and "mem init-db" in report["problems"][0]


def test_facts_about_a_healthy_lexical_memory(capsys, tmp_path, db_path):
    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    before = db_path.stat().st_mtime_ns
    code, report = doctor_json(capsys)
    database = report["database"]
    assert database["integrity"] == "ok" and database["schema_version"] >= 3
    assert database["chunks"] == 1 and database["sources"] == {"note": 1}
    assert db_path.stat().st_mtime_ns == before  # read-only
    assert any(e.startswith("retrieval is lexical only because") for e in report["explanations"])
    assert code == 0


def test_json_keys_are_exactly_the_documented_ones(capsys, tmp_path, db_path):
    """docs/json-contract.md lists these top-level keys and SQLite's database object."""
    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    capsys.readouterr()
    _, report = doctor_json(capsys)
    assert list(report) == [
        "config_file", "connectors", "extras", "database", "embeddings", "llm", "problems", "explanations"
    ]  # fmt: skip
    assert set(report["database"]) == {"path", "exists", "size_mb", "schema_version", "integrity", "sources", "chunks"}
    assert {"provider", "why", "ready"} <= set(report["llm"]) and {"model", "path"} <= set(report["embeddings"])


def test_a_damaged_file_is_named_by_doctor_and_refused_by_init_db_and_verify(capsys, tmp_path, db_path):
    for name in "abcdefgh":  # enough rows for pages past the schema's
        write_note(tmp_path / "vault", f"{name}.md", f"# {name}\n" + "words of a note " * 300)
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    with db_path.open("r+b") as handle:  # the schema page stays readable, a table page does not
        handle.seek(4096 * 3)
        handle.write(b"\0" * 8192)
    capsys.readouterr()
    for command in (["doctor"], ["init-db"], ["verify"]):
        assert main(command) == 1, command
        out, err = capsys.readouterr()
        said = (out + err).splitlines()
        assert any("damaged" in line and "restore a backup" in line for line in said), command
        assert not any(line.startswith("error: unexpected") for line in said), command


def test_a_backup_examined_by_doctor_is_left_with_nothing_beside_it(capsys, monkeypatch, tmp_path):
    """As `mem stats` leaves it: an empty -wal and -shm left behind made `mem restore` take it for a file in use."""
    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    assert main(["backup", str(tmp_path / "copies" / "memory.db")]) == 0
    backup = tmp_path / "copies" / "memory.db"
    before = backup.read_bytes()
    monkeypatch.setenv("CMRAG_DB_PATH", str(backup))
    capsys.readouterr()
    code, report = doctor_json(capsys)
    assert code == 0 and report["database"]["integrity"] == "ok"
    assert sorted(p.name for p in backup.parent.iterdir()) == ["memory.db", "memory.db.sha256"]
    assert backup.read_bytes() == before


def test_a_folder_at_the_database_path_is_named_as_one(capsys, db_path):
    db_path.mkdir()
    for command in (["doctor"], ["init-db"], ["stats"], ["ask", "x", "--no-llm"]):
        assert main(command) == 1, command
        out, err = capsys.readouterr()
        assert f"{db_path} is a folder, not a database file" in out + err, command


def test_another_applications_file_and_an_empty_file_are_named_as_such_not_damaged(capsys, db_path):
    with sqlite3.connect(db_path) as browser:
        browser.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    code, report = doctor_json(capsys)
    assert code == 1 and "another application's SQLite database" in report["problems"][0]
    assert "integrity" not in report["database"] and "restore" not in report["problems"][0]
    db_path.unlink()
    db_path.touch()
    code, report = doctor_json(capsys)
    assert (
        code == 1
        and report["problems"][0] == f"{db_path} is empty, no memory yet: run `mem init-db` or `mem seed-sample`"
    )
    assert db_path.stat().st_size == 0  # doctor writes nothing


def test_without_the_extra_doctor_names_the_install(monkeypatch, db_path):
    from crossmodalrag import doctor
    from crossmodalrag.config import Settings

    monkeypatch.setattr(doctor, "find_spec", lambda name: None)
    report = diagnose(Settings(db_path=db_path)).to_dict()
    assert set(report["extras"]) == {"embeddings", "ann", "pdf", "ocr", "tesseract", "llm"}
    assert not any(report["extras"].values())
    assert any('pip install -e ".[embeddings]"' in e for e in report["explanations"])


def test_text_output_is_readable(capsys):
    main(["doctor"])
    out = capsys.readouterr().out
    assert out.startswith("database: ") and "embedding model:" in out


def test_doctor_says_why_ask_gives_the_evidence_answer(capsys, monkeypatch):
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")
    _, report = doctor_json(capsys)
    assert report["llm"]["provider"] == "none" and report["llm"]["ready"] is False
    assert any(e.startswith("ask gives the evidence answer") for e in report["explanations"])


def test_doctor_reports_an_unreachable_model_server_as_a_problem(capsys, monkeypatch):
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "openai")
    monkeypatch.setenv("CMRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # the discard port: nothing listens
    _, report = doctor_json(capsys)
    assert report["llm"]["ready"] is False and "cannot connect" in report["llm"]["detail"]
    assert any("language model does not answer" in p for p in report["problems"])
    assert any("falls back to the evidence answer" in e for e in report["explanations"])


def test_doctor_says_when_a_configured_repository_overlaps_a_vault(tmp_path):
    from crossmodalrag.config import Settings

    vault = tmp_path / "vault"
    vault.mkdir()
    overlapping = Settings(db_path=tmp_path / "m.db", notes_paths=[vault], git_paths=[tmp_path])
    separate = Settings(db_path=tmp_path / "m.db", notes_paths=[vault], git_paths=[tmp_path / "code"])
    said = [e for e in diagnose(overlapping).explanations if "overlaps the vault" in e]
    assert len(said) == 1 and str(vault) in said[0]
    assert not [e for e in diagnose(separate).explanations if "overlaps" in e]


def test_a_database_from_a_newer_program_is_a_problem_with_a_hint_that_works(capsys, db_path):
    import sqlite3

    assert main(["init-db"]) == 0
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)")
    capsys.readouterr()
    code, report = doctor_json(capsys)
    assert code == 1 and any("schema version 99 is newer" in p and "git pull" in p for p in report["problems"])
    assert main(["stats"]) == 1
    assert "pip install -U" not in capsys.readouterr().err


def test_configured_paths_sync_would_fail_on_are_problems(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("OBSIDIAN_VAULT_PATH_1", str(tmp_path / "gone"))
    monkeypatch.setenv("REPO_PATH_1", str(tmp_path))
    (tmp_path / "notes.txt").write_text("x")
    monkeypatch.setenv("PDF_PATH_1", str(tmp_path / "notes.txt"))
    assert main(["init-db"]) == 0
    capsys.readouterr()
    code, report = doctor_json(capsys)
    problems = " | ".join(report["problems"])
    assert code == 1 and "gone does not exist" in problems and "is not a git repository" in problems
    assert "is a file but no PDF" in problems
    assert main(["doctor"]) == 1
    assert "[" not in capsys.readouterr().out.split("connectors:")[1].splitlines()[0]  # paths, not a Python list


def test_a_model_that_cannot_load_comes_with_what_to_run(capsys, monkeypatch):
    from crossmodalrag.index import embed
    from crossmodalrag.index.models import ModelUnavailable

    def unavailable(settings):
        raise ModelUnavailable("embedding model BAAI/bge-small-en-v1.5 is not cached and the model hub is unreachable")

    monkeypatch.setattr(embed, "load_embedder", unavailable)
    assert main(["init-db"]) == 0
    capsys.readouterr()
    _, report = doctor_json(capsys)
    (why,) = [e for e in report["explanations"] if "cannot load" in e]
    assert "mem models install --offline" in why


def test_a_missing_embedding_model_folder_is_named_by_its_path_not_its_last_name(capsys, monkeypatch, tmp_path):
    """CMRAG_EMBED_MODEL_PATH=/nope/model: doctor's line said only "embedding model: model"."""
    monkeypatch.setenv("CMRAG_EMBED_MODEL_PATH", str(tmp_path / "nope" / "model"))
    assert main(["init-db"]) == 0
    capsys.readouterr()
    assert main(["doctor"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"embedding model: model (folder {tmp_path / 'nope' / 'model'})" in lines


def test_a_damaged_text_index_is_a_problem_that_init_db_rebuild_index_mends(capsys, tmp_path, db_path):
    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    write_note(tmp_path / "vault", "b.md", "# B\ngamma delta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    with sqlite3.connect(db_path) as conn:  # a chunk's row gone from the index: words never find it
        conn.execute("DELETE FROM chunks_fts WHERE rowid = (SELECT MIN(id) FROM chunks)")
    capsys.readouterr()
    code, report = doctor_json(capsys)
    assert code == 1 and report["database"]["integrity"] == "text index damaged"
    assert report["problems"] == [
        "1 chunks are missing from the text index (words never find them); "
        "`mem init-db --rebuild-index` builds it again from the stored chunks"
    ]
    for damage in ("DELETE FROM chunks_fts_docsize", "UPDATE chunks_fts_data SET block = zeroblob(length(block))"):
        assert main(["init-db", "--rebuild-index"]) == 0
        assert "text index rebuilt from the stored chunks: 2 in" in capsys.readouterr().err
        code, report = doctor_json(capsys)
        assert code == 0 and report["database"]["integrity"] == "ok"
        assert main(["ask", "alpha", "--no-llm", "--json"]) == 0 and json.loads(capsys.readouterr().out)["evidence"]
        with sqlite3.connect(db_path) as conn:  # pages that no longer match what they index
            conn.execute(damage)
        assert "the text index is damaged" in doctor_json(capsys)[1]["problems"][0]


def test_an_ask_over_a_damaged_text_index_points_to_the_rebuild_that_loses_nothing(capsys, tmp_path, db_path):
    """It said only "restore a backup", which loses every change since the backup."""
    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    with sqlite3.connect(db_path) as conn:  # the index's term pages gone, its structure record kept
        conn.execute("DELETE FROM chunks_fts_data WHERE id > 10")
    capsys.readouterr()
    assert main(["ask", "alpha", "--no-llm"]) == 1
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("error: the database is damaged") and "`mem init-db --rebuild-index`" in error


def test_on_a_terminal_doctor_says_which_long_check_it_is_in_then_clears_the_line(tmp_path, db_path, monkeypatch):
    """At 335k chunks its two integrity checks ran 20-29 s without a word."""
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    write_note(tmp_path / "vault", "a.md", "# A\nalpha beta")
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    main(["doctor"])
    shown = terminal.getvalue()
    assert "doctor: checking the database file (" in shown and "doctor: checking the text index (1 chunk)" in shown
    assert shown.endswith("\r\033[K")  # cleared before the report


def test_an_onnxruntime_telemetry_queue_left_by_earlier_runs_is_named(monkeypatch, tmp_path, db_path):
    from crossmodalrag.config import Settings

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert not any("telemetry" in line for line in diagnose(Settings(db_path=db_path)).explanations)
    (tmp_path / "home" / ".cache" / "Microsoft" / "DeveloperTools" / ".onnxruntime").mkdir(parents=True)
    [said] = [line for line in diagnose(Settings(db_path=db_path)).explanations if "telemetry" in line]
    assert ".onnxruntime holds onnxruntime telemetry" in said and "delete the folder" in said


def test_a_damaged_file_is_reported_with_json_when_the_embedding_model_loads(capsys, monkeypatch, tmp_path, db_path):
    """The vector check opened the store unguarded: doctor failed with the error whose hint is `mem doctor`."""
    from crossmodalrag.index import embed
    from tests.fakes import HashingEmbedder

    monkeypatch.setattr(embed, "load_embedder", lambda settings: HashingEmbedder())
    monkeypatch.setattr("crossmodalrag.doctor.find_spec", lambda name: True)  # the embeddings extra installed
    for name in "abcdefgh":
        write_note(tmp_path / "vault", f"{name}.md", f"# {name}\n" + "words of a note " * 300)
    assert main(["ingest-notes", str(tmp_path / "vault")]) == 0
    with db_path.open("r+b") as handle:
        handle.truncate(db_path.stat().st_size // 2)
    capsys.readouterr()
    code, report = doctor_json(capsys)
    assert code == 1 and report["database"]["integrity"] == "damaged"
    assert any("damaged" in problem for problem in report["problems"])
    assert report["embeddings"]["loadable"] is True and report["embeddings"]["vectors_checked"] is False
