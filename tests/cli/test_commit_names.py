"""A commit named as git and `ask` print it: `repo@1e62948`, or the short sha alone."""

from __future__ import annotations

import json

import pytest

from crossmodalrag.cli.main import main
from crossmodalrag.ingest import ingest_git
from crossmodalrag.store import open_store
from tests.conftest import commit_files, same_commit_in_two_repos

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _memory(db_path, monkeypatch):
    monkeypatch.setenv("CMRAG_DB_PATH", str(db_path))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_history_source_and_forget_take_the_short_sha_git_prints(capsys, repo, db_path) -> None:
    """The hints said "a commit is <repo>@<sha>, or a unique sha prefix", yet `mem history f2e3bd0` found
    nothing, and `mem source` took only an integer id (exit 2 for the `repo@f2e3bd0` that ask cites)."""
    sha = commit_files(repo, {"a.txt": "parser\n"}, "Switch parser to csv module")
    with open_store(db_path) as store:
        ingest_git(store, [repo])
    code, out, _ = run(capsys, "history", sha[:7], "--json")
    assert code == 0 and json.loads(out)["source"] == f"{repo}@{sha}"
    for name in (f"repo@{sha[:7]}", sha[:7], sha[:7].upper()):
        code, out, _ = run(capsys, "source", name, "--json")
        assert code == 0 and json.loads(out)["uri"] == f"{repo}@{sha}"
    code, _, err = run(capsys, "source", "repo@0000000")
    assert code == 1 and err.startswith("error: no stored source 'repo@0000000'") and err.count("\n") == 1
    code, _, err = run(capsys, "source", "99999")
    assert code == 1 and err.startswith("error: no source with id 99999")
    code, out, _ = run(capsys, "forget", sha[:7], "--yes")
    assert code == 0 and out.strip() == f"{repo}@{sha}"


def test_a_short_sha_in_two_repositories_names_both(capsys, tmp_path, db_path) -> None:
    repos, sha = same_commit_in_two_repos(tmp_path)
    with open_store(db_path) as store:
        ingest_git(store, repos)
    code, _, err = run(capsys, "source", sha[:7])
    assert code == 1 and "is ambiguous: 2 commits match" in err and str(repos[0]) in err and str(repos[1]) in err
    assert run(capsys, "forget", sha[:7], "--yes")[0] == 1
    with open_store(db_path) as store:
        assert store.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 2
