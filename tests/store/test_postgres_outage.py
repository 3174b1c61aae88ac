"""The PostgreSQL server going away under a long-lived client (`mem serve`): each request is told so
at once, as the CLI is, and the client carries on when the server is back."""

from __future__ import annotations

import time

import psycopg
import pytest

from crossmodalrag.config import load_settings
from crossmodalrag.store.postgres import open_postgres_store


def _refuse_connections(admin_url: str, database: str, refuse: bool) -> None:
    """As a server that is down, for this database: new connections refused, open ones ended."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {"false" if refuse else "true"}')
        if refuse:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))


def test_the_api_answers_503_at_once_while_the_server_is_down(postgres_url):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from crossmodalrag.api.app import create_app
    from tests.api.helpers import BASE

    with open_postgres_store(postgres_url):
        pass
    database = psycopg.conninfo.conninfo_to_dict(postgres_url)["dbname"]
    admin = postgres_url.replace(f"/{database}?", "/postgres?")
    with TestClient(
        create_app(load_settings({"db_url": postgres_url, "llm_provider": "none"})), base_url=BASE
    ) as client:
        assert client.get("/health").status_code == 200
        _refuse_connections(admin, database, True)
        try:
            for route in ("/health", "/stats", "/health"):  # the first may meet a connection the server ended
                started = time.monotonic()
                response = client.get(route)
                assert response.status_code == 503, response.text  # was a plain 500 after 30 s
                assert set(response.json()) == {"error", "hint"} and time.monotonic() - started < 10
            assert response.json()["error"].startswith("cannot reach PostgreSQL at postgresql://")
        finally:
            _refuse_connections(admin, database, False)
        assert client.get("/health").status_code == 200  # back without a restart
