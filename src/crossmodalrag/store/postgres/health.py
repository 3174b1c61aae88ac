"""What `mem doctor` reports about a PostgreSQL memory: backend, server, pgvector, schema, indexes."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

from crossmodalrag.errors import StoreError
from crossmodalrag.store.postgres import schema

INDEX_HEALTH = """
SELECT c.relname, i.indisvalid, am.amname
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
WHERE i.indrelid IN ('chunk_terms'::regclass, 'chunk_vectors'::regclass) AND am.amname IN ('gin', 'hnsw')
"""


def database_facts(settings, problems: list[str]) -> dict[str, Any]:
    """Facts for the doctor's `database` section; problems found are appended to `problems`."""
    from crossmodalrag.store.postgres import open_postgres_store
    from crossmodalrag.store.postgres.connection import redact

    facts: dict[str, Any] = {"backend": "postgresql", "url": redact(settings.db_url), "exists": False}
    try:
        store = open_postgres_store(settings.db_url, settings.db_owner, create=False)
    except StoreError as error:
        problems.append(str(error))
        return facts
    with store:
        conn = store.conn
        facts["exists"] = True
        facts["server_version"] = conn.execute("SHOW server_version").fetchone()[0]
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        facts["pgvector_version"] = row[0] if row else None
        facts["schema_version"] = store.schema_version()
        facts["owner"] = conn.execute("SELECT cmrag_owner()").fetchone()[0]
        facts["sources"] = dict(conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY source_type"))
        facts["chunks"] = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        indexes = conn.execute(INDEX_HEALTH).fetchall()
        facts["indexes"] = {name: {"method": method, "valid": valid} for name, valid, method in indexes}
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        server_major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
    facts["pg_dump_version"] = _pg_dump_version()
    dump_major = int(facts["pg_dump_version"].split(".")[0]) if facts["pg_dump_version"] else None
    if dump_major is not None and dump_major < server_major:  # pg_dump refuses a newer server
        problems.append(
            f"`mem backup` will fail: the pg_dump on PATH is version {facts['pg_dump_version']}, older than the"
            f" server's {server_major}: install the PostgreSQL {server_major} client tools, or use"
            " `mem backup --export` (a SQLite file)"
        )
    if facts["pgvector_version"] is None:
        problems.append("the pgvector extension is missing: CREATE EXTENSION vector (as a superuser)")
    problems.extend(
        f"index {name} is invalid: REINDEX INDEX {name}" for name, i in facts["indexes"].items() if not i["valid"]
    )
    if superuser:
        problems.append(
            "connected as a superuser, which bypasses row-level security: clients should use ordinary roles"
        )
    if facts["schema_version"] < schema.LATEST_VERSION:
        problems.append(
            f"schema version {facts['schema_version']} is older than {schema.LATEST_VERSION}: run `mem init-db`"
        )
    return facts


def _pg_dump_version() -> str | None:
    """The version of the pg_dump `mem backup` runs ("15.18"), or None (not on PATH: backups are exports)."""
    found = shutil.which("pg_dump")
    if found is None:
        return None
    try:
        shown = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    version = re.search(r"(\d+(?:\.\d+)*)", shown)  # "pg_dump (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    return version.group(1) if version else None


def describe(facts: dict[str, Any]) -> list[str]:
    """The doctor's text lines for a PostgreSQL memory."""
    lines = [f"database: PostgreSQL at {facts['url']}" + ("" if facts["exists"] else " (unreachable or no schema)")]
    if facts["exists"]:
        indexes = ", ".join(
            f"{n} ({i['method']}, {'valid' if i['valid'] else 'INVALID'})" for n, i in facts["indexes"].items()
        )
        lines.append(
            f"  server {facts['server_version']}, pgvector {facts['pgvector_version']}, "
            f"schema v{facts['schema_version']}, owner {facts['owner']}, "
            f"{facts['chunks']} chunks from {sum(facts['sources'].values())} sources"
        )
        lines.append(f"  indexes: {indexes or 'none'}")
        if facts.get("pg_dump_version"):
            lines.append(f"  pg_dump {facts['pg_dump_version']} (mem backup)")
    return lines
