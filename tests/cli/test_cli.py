"""The `mem` command line: exit codes, streams, JSON contract, and error lines."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from tests.conftest import write_note

EVIDENCE_KEYS = {
    "id",
    "source_uri",
    "source_type",
    "modality",
    "title",
    "locator",
    "timestamp",
    "excerpt",
    "score",
    "components",
}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write_note(
        root, "parser.md", "---\ndate: 2025-03-01\n---\n# Parser rewrite\nWe replaced regexes with a tokenizer.\n"
    )
    write_note(root, "cache.md", "# Render cache\nThe LRU cache served stale HTML after config changes.\n")
    return root


def test_ingest_then_ask_json_contract(capsys, vault):
    code, _, err = run(capsys, "ingest-notes", str(vault))
    assert code == 0 and "2 added" in err
    code, out, _ = run(capsys, "ask", "why the tokenizer?", "--no-llm", "--json")
    data = json.loads(out)
    assert code == 0
    assert {"query", "answer", "abstained", "abstention_reason", "top_score", "evidence", "timing"} <= set(data)
    assert data["abstained"] is False and data["abstention_reason"] is None
    first = data["evidence"][0]
    assert EVIDENCE_KEYS <= set(first)
    assert first["id"] == "E1" and first["source_uri"] == str(vault / "parser.md")
    assert first["locator"] == "parser.md" and first["timestamp"].startswith("2025-03-01")
    assert {"lexical", "recency", "title", "bm25"} <= set(first["components"])
    assert data["timing"]["total_seconds"] >= 0


def test_ask_text_cites_numbered_evidence_and_explain_shows_components(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    code, out, err = run(capsys, "ask", "stale cache", "--no-llm", "--explain")
    assert code == 0
    assert "[E1] Render cache — cache.md (note" in out
    assert "score = 0.85×lexical" in out and "×recency" in out and "×title" in out
    assert "[retrieval: lexical" in err  # the status line is not data


def test_ask_abstains_on_an_unanswerable_question(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    code, out, _ = run(capsys, "ask", "What is the capital of France?", "--no-llm", "--json")
    data = json.loads(out)
    assert code == 0 and data["abstained"] is True
    assert data["abstention_reason"] == "weak_retrieval" and data["evidence"] == []


def test_explain_after_a_retrieval_abstention_shows_what_came_closest(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    question = "What did AMCOR say about the render cache?"  # AMCOR: in no note
    code, out, _ = run(capsys, "ask", question, "--no-llm", "--explain")
    assert code == 0 and out.startswith(
        'No answer: nothing in memory matches this question well enough (nothing in memory mentions "AMCOR")'
    )
    assert "Closest, not enough to answer:\n[C1] Render cache — cache.md (note" in out and "score = 0.85×lexical" in out
    assert "Closest" not in run(capsys, "ask", question, "--no-llm")[1]  # only with --explain
    data = json.loads(run(capsys, "ask", question, "--no-llm", "--json")[1])
    assert data["evidence"] == [] and data["citations"] == [] and data["closest"][0]["id"] == "C1"
    assert json.loads(run(capsys, "ask", "stale cache", "--no-llm", "--json")[1])["closest"] == []


def test_debug_without_a_model_shows_the_retrieval_diagnostics(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    code, out, err = run(capsys, "ask", "stale cache", "--no-llm", "--debug")
    assert code == 0 and out.startswith("Found") and "\n--- retrieval ---\n" in err and '"coverage": 1.0' in err
    data = json.loads(run(capsys, "ask", "stale cache", "--no-llm", "--debug", "--json")[1])
    assert data["debug"]["retrieval"]["hits"][0]["locator"] == "cache.md"


def test_ask_without_a_database_is_a_one_line_error(capsys, db_path):
    code, out, err = run(capsys, "ask", "anything", "--no-llm")
    assert code == 1 and out == ""
    assert err.startswith("error: no memory database at") and "hint:" in err and err.count("\n") == 1
    assert not db_path.exists()


def test_ingest_notes_without_paths_or_config_is_an_error(capsys):
    code, _, err = run(capsys, "ingest-notes")
    assert code == 1 and "OBSIDIAN_VAULT_PATH_1" in err


def test_ingest_notes_reads_configured_vaults_from_dotenv(capsys, vault, isolated_env):
    (isolated_env / ".env").write_text(f"OBSIDIAN_VAULT_PATH_1={vault}\n", encoding="utf-8")
    code, _, err = run(capsys, "ingest-notes")
    assert code == 0 and "2 added" in err


def test_a_bad_note_is_one_error_line_and_exit_1_while_the_rest_ingests(capsys, vault):
    write_note(vault, "damaged.md", b"caf\xc3\xa9, damaged: caf\xe9")  # UTF-8 with a bad byte
    code, _, err = run(capsys, "ingest-notes", str(vault), "--json")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "not valid UTF-8" in errors[0] and "hint:" in errors[0]
    assert "Traceback" not in err


def test_ingest_json_summary(capsys, vault):
    code, out, _ = run(capsys, "ingest-notes", str(vault), "--json", "--exclude", "cache.md")
    assert code == 0
    assert json.loads(out) == {
        "added": 1,
        "updated": 0,
        "unchanged": 0,
        "removed": 0,
        "moved": 0,
        "empty": 0,
        "failed": 0,
        "chunks": 1,
        "failures": [],
        "notices": [],
        "embedded": 0,
    }


def test_an_empty_note_exits_0_and_a_real_failure_still_exits_1(capsys, vault):
    write_note(vault, "Untitled.md", "")
    code, out, err = run(capsys, "ingest-notes", str(vault), "--json")
    assert code == 0 and json.loads(out)["empty"] == 1 and "error:" not in err
    write_note(vault, "damaged.md", b"caf\xc3\xa9, damaged: caf\xe9")  # UTF-8 with a bad byte
    code, out, _ = run(capsys, "ingest-notes", str(vault), "--json")
    assert code == 1 and json.loads(out)["failed"] == 1 and json.loads(out)["empty"] == 1


def test_an_emptied_vault_is_refused_until_allow_mass_delete(capsys, tmp_path):
    vault = tmp_path / "drive"
    for name in ("a.md", "b.md", "c.md"):
        write_note(vault, name, f"# {name}\nsome words\n")
    assert run(capsys, "ingest-notes", str(vault))[0] == 0
    for note in vault.glob("*.md"):
        note.unlink()
    code, _, err = run(capsys, "ingest-notes", str(vault), "--json")
    assert code == 1 and "--allow-mass-delete" in err
    code, out, _ = run(capsys, "ingest-notes", str(vault), "--json", "--allow-mass-delete")
    assert code == 0 and json.loads(out)["removed"] == 3


def test_eval_loads_queries_and_warns_about_bad_gold(capsys, vault, tmp_path):
    run(capsys, "ingest-notes", str(vault))
    queries = tmp_path / "q.json"

    def load(gold: str):
        rows = [
            {"query_text": "[t] tokenizer regexes", "expected_source_uris": [str(vault / "parser.md")]},
            {"query_text": "[t] stale html", "expected_source_uris": [gold]},
        ]
        queries.write_text(json.dumps(rows), encoding="utf-8")
        return run(capsys, "eval", "--load-queries", str(queries), "--query-prefix", "[t]", "--json")

    # a relative path could never match, and no command removes a stored query: refused, nothing stored
    code, out, err = load("cache.md")
    assert code == 1 and out == "" and "relative gold uri 'cache.md'" in err and "nothing was loaded" in err
    assert "no eval queries" in run(capsys, "eval", "--query-prefix", "[t]")[2]
    code, out, err = load(str(vault / "gone.md"))  # absolute: it may be ingested later, so a warning
    assert code == 0
    report = json.loads(out)
    assert report["overall"]["answerable"] == 2 and report["per_query"][0]["metrics"]["hit_rate"] == 1.0
    assert f"warning: gold uri '{vault / 'gone.md'}' matches no ingested source" in err


def test_eval_without_queries_is_an_error(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    code, _, err = run(capsys, "eval", "--query-prefix", "[nothing]")
    assert code == 1 and "no eval queries" in err and "seed-sample" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["ask"],
        ["eval", "--top-k", "0"],
        ["ingest-git", "--max-commits", "-1"],
        ["frobnicate"],
        ["recall", "--top", "-3"],
        ["timeline", "--limit", "0"],
        ["log", "--limit", "x"],
        ["memories", "--limit", "0"],
        ["memories", "--limit", "501"],  # the help says at most 500: refused, not quietly cut
        ["sources", "--limit", "501"],
        ["events", "--limit", "99999999999999999999999"],  # past what SQLite can bind
        ["drift", "--min-support", "99999999999999999999"],
        ["build-memory", "--max-minutes", "nan"],  # would never stop
        ["build-memory", "--max-minutes", "-5"],
        ["ingest-notes", ""],  # an unset $VAULT: not the current folder, whose other sources would go
        ["ingest-pdf", "papers", " "],
        ["ingest-chat", ""],
        ["forget", "--path", "", "--yes"],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


def test_a_question_that_reads_as_an_option_is_told_how_to_ask_it(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "-zebrafish"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "mem ask --no-llm -- '-word'" in err.splitlines()[-1]


@pytest.mark.parametrize("command", ["ingest-git", "sync"])
def test_the_help_of_max_commits_names_its_default(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default {Settings.git_max_commits}," in help_text and "0 = all" in help_text


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_count_below_one_names_the_bound_that_holds(capsys, value):
    with pytest.raises(SystemExit):
        main(["ask", "x", "--top-k", value])
    assert capsys.readouterr().err == "error: argument --top-k: must be at least 1 (hint: see `mem ask --help`)\n"


@pytest.mark.parametrize(
    ("argv", "message", "hint"),
    [
        (["ask", "Postgres", "--modality", "video"], "argument --modality: invalid choice: 'video'", "mem ask --help"),
        (["ask", "Postgres", "--strategy", "bogus"], "argument --strategy: invalid choice: 'bogus'", "mem ask --help"),
        (["ask", "Postgres", "--bogus"], "unrecognized arguments: --bogus", "mem ask --help"),
        (["sources", "--limit", "x"], "argument --limit: 'x' is not a whole number", "mem sources --help"),
        (["timeline", "--nope"], "unrecognized arguments: --nope", "mem timeline --help"),
        (["nope"], "argument COMMAND: invalid choice: 'nope'", "mem --help"),
        (["--bogus", "ask"], "unrecognized option --bogus", "mem --help"),  # not "arguments are required: COMMAND"
    ],
)
def test_a_usage_error_is_one_line_with_a_hint_and_no_usage_dump(capsys, argv, message, hint):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith(f"error: {message}") and err.endswith(f" (hint: see `{hint}`)\n")


def test_forget_with_nothing_named_is_a_one_line_usage_error(capsys, db_path):
    assert main(["forget"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage:" not in err
    assert err.startswith("error: name a SOURCE_URI or --path PATH (hint: ") and "mem forget --help" in err


def test_an_argument_types_own_hint_is_not_doubled(capsys):
    with pytest.raises(SystemExit):
        main(["ingest-notes", ""])
    assert capsys.readouterr().err == "error: argument paths: is empty (hint: an unset shell variable?)\n"


def test_a_database_path_under_a_file_is_one_error_line(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    code, _, err = run(capsys, "init-db", "--db-path", str(tmp_path / "notes.txt" / "memory.db"))
    assert code == 1 and err.startswith("error: cannot create the database's folder") and "is a file" in err
    assert err.count("\n") == 1


def test_a_corrupt_database_is_reported_without_traceback(capsys, db_path):
    db_path.write_bytes(b"\x00garbage" * 512)
    code, _, err = run(capsys, "ask", "x", "--no-llm")
    assert code == 1 and err.startswith("error: cannot open") and "Traceback" not in err


def test_unexpected_exceptions_become_one_error_line(capsys, monkeypatch, vault):
    import crossmodalrag.cli.ask as ask_command

    monkeypatch.setattr(ask_command, "ask_without_llm", lambda *a, **k: 1 / 0)
    run(capsys, "ingest-notes", str(vault))
    code, _, err = run(capsys, "ask", "x", "--no-llm")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and "Traceback" not in err
    assert errors[0].startswith("error: unexpected ZeroDivisionError") and "CMRAG_DEBUG=1" in errors[0]


@pytest.mark.parametrize(
    ("raised", "said", "hinted"),
    [
        (sqlite3.IntegrityError("FOREIGN KEY constraint failed"), "nothing is damaged", "rerun the command"),
        (sqlite3.OperationalError("database or disk is full"), "the disk is full", "free disk space"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "is read-only", "permissions"),
        (sqlite3.DatabaseError("database disk image is malformed"), "the database is damaged", "restore a backup"),
    ],
)
def test_a_database_error_is_named_by_its_cause_and_only_damage_suggests_a_restore(
    capsys, monkeypatch, vault, raised, said, hinted
):
    import crossmodalrag.cli.ask as ask_command

    def fails(*args, **kwargs):
        raise raised

    monkeypatch.setattr(ask_command, "ask_without_llm", fails)
    run(capsys, "ingest-notes", str(vault))
    code, _, err = run(capsys, "ask", "x", "--no-llm")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 1 and len(errors) == 1 and said in errors[0] and hinted in errors[0]
    assert ("restore a backup" in err) == (said == "the database is damaged")


def test_python_dash_m_and_console_script_work(tmp_path):
    module = subprocess.run([sys.executable, "-m", "crossmodalrag", "--version"], capture_output=True, text=True)
    assert module.returncode == 0 and module.stdout.startswith("mem ")
    usage = subprocess.run([sys.executable, "-m", "crossmodalrag", "ask"], capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.startswith("error: the following arguments are required: query")


@pytest.mark.parametrize("command", ["ingest-notes", "ingest-git", "ingest-pdf", "ingest-images"])
def test_an_ingest_of_mistyped_paths_only_creates_no_database(capsys, tmp_path, db_path, command):
    """`mem ingest-notes ~/vualt` failed and left a new, empty database behind."""
    code, out, err = run(capsys, command, str(tmp_path / "vualt"), str(tmp_path / "typo"))
    assert code == 1 and out == "" and not db_path.exists()
    assert err == (
        f"error: {tmp_path / 'vualt'}: no such file or folder (and 1 more paths, none of them there either)"
        " (hint: check the path; nothing was stored or removed)\n"
    )


def test_progress_is_not_drawn_when_stderr_is_not_a_terminal(capsys, vault):
    _, _, err = run(capsys, "ingest-notes", str(vault))
    assert "\r" not in err and any(line.startswith("ingest-notes: 2 added") for line in err.splitlines())


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["remember", os.fsdecode(b"bad \xff bytes")], "'bad \ufffd bytes'"),
        (["memories", "--tag", os.fsdecode(b"ops\xff")], "'ops\ufffd'"),
        (["checkpoint", os.fsdecode(b"v\xff")], "'v\ufffd'"),
    ],
)
def test_arguments_that_are_not_utf8_are_one_error_line(capsys, argv, shown):
    code, _, err = run(capsys, *argv)
    hint = "mem reads its arguments as UTF-8: check the terminal's encoding"
    assert code == 1 and err.strip() == f"error: the argument {shown} is not valid UTF-8 (hint: {hint})"


def test_an_empty_question_or_an_empty_date_window_is_an_error(capsys, vault):
    run(capsys, "ingest-notes", str(vault))
    code, _, err = run(capsys, "ask", "  ", "--no-llm")
    assert code == 1 and err.startswith("error: the question is empty")
    code, _, err = run(capsys, "ask", "parser", "--no-llm", "--after", "2025-06-01", "--before", "2025-01-01")
    assert code == 1 and "--after=2025-06-01 is not earlier than --before=2025-01-01" in err and err.count("\n") == 1
    assert "swap them" in err
    code, _, err = run(capsys, "ask", "parser", "--no-llm", "--after", "2025-06-01", "--before", "2025-06-01")
    assert code == 1 and "(hint: --before is excluded: for that one day give --before the day after)" in err


@pytest.mark.parametrize("option", ["--after", "--before"])
@pytest.mark.parametrize("value", ["garbage", "2024年3月1日", "0001-01-01T00:00+01:00"])
def test_a_bad_after_or_before_date_is_a_usage_error(capsys, option, value):
    with pytest.raises(SystemExit) as exit_info:
        main(["ask", "parser", "--no-llm", option, value])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "usage:" not in err
    assert err.startswith(f"error: argument {option}: the date ") and "(hint: " in err


def test_a_question_with_bytes_that_are_not_utf8_is_asked_with_them_replaced(capsys, vault):
    """Searched as text (an embedder's tokenizer rejects the lone surrogates Python keeps them as)."""
    run(capsys, "ingest-notes", str(vault))
    code, out, _ = run(capsys, "ask", os.fsdecode(b"tokenizer caf\xe9"), "--no-llm", "--json")
    assert code == 0 and json.loads(out)["query"] == "tokenizer caf\ufffd"


def test_stats_text_shows_sources_per_month(capsys, tmp_path):
    vault = tmp_path / "vault"
    write_note(vault, "2025-03-04 standup.md", "# Standup\nshipped the parser")
    write_note(vault, "2025-05-06 retro.md", "# Retro\nthe cache was stale")
    assert main(["ingest-notes", str(vault)]) == 0
    capsys.readouterr()
    assert main(["stats"]) == 0
    assert "per month: 2025-03 1, 2025-05 1" in capsys.readouterr().out


def test_sources_by_folder_take_a_vault_folder_a_repository_or_a_path_on_disk(capsys, tmp_path, repo, monkeypatch):
    from tests.conftest import git

    vault = tmp_path / "vault"
    write_note(vault, "projects/plan.md", "# Plan\nship it")
    write_note(vault, "diary.md", "# Diary\nrain")
    (repo / "a.txt").write_text("x")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    assert main(["ingest-notes", str(vault)]) == 0 and main(["ingest-git", str(repo)]) == 0
    monkeypatch.chdir(tmp_path)
    # "vault" names no vault folder or repository: the folder vault/ here
    for folder, expected in (
        ("projects", 1),
        (str(vault / "projects"), 1),
        ("./vault", 2),
        ("vault", 2),
        (str(repo), 1),
    ):
        capsys.readouterr()
        assert main(["sources", "--folder", folder, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["total"] == expected, folder
    assert main(["sources", "--folder", "projcts"]) == 0  # a typo lists nothing, and says where to look
    assert "nothing is in 'projcts'" in capsys.readouterr().err
