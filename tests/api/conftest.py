"""Fixtures for the API and console tests: the bundled sample seeded once per session, an app over it."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path
from typing import Iterator

import pytest

pytest.importorskip("fastapi", reason="the ui extra is not installed (scripts/test installs it)")

from fastapi.testclient import TestClient  # noqa: E402

from crossmodalrag.api.app import create_app  # noqa: E402
from crossmodalrag.cli.main import main  # noqa: E402
from tests.api.helpers import BASE, server_settings  # noqa: E402


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample (notes, a git repo, a PDF, images), ingested once for the whole session."""
    db = tmp_path_factory.mktemp("sample") / "memory.db"
    with redirect_stdout(io.StringIO()):
        assert main(["seed-sample", "--db-path", str(db)]) == 0
    return db


@pytest.fixture
def client(sample_db: Path) -> Iterator[TestClient]:
    with TestClient(create_app(server_settings(sample_db)), base_url=BASE) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def built_db(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample with its memory hierarchy built (no language model: git commits as events)."""
    import sqlite3

    db = tmp_path_factory.mktemp("built") / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    with redirect_stdout(io.StringIO()):
        assert main(["build-memory", "--db-path", str(db)]) == 0
    return db


@pytest.fixture
def built_client(built_db: Path) -> Iterator[TestClient]:
    with TestClient(create_app(server_settings(built_db)), base_url=BASE) as test_client:
        yield test_client
