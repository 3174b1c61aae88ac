"""The thin dialect layer: the portable SQL the shared code writes (SQLite's), as PostgreSQL runs it.

The shared modules keep one SQL text per query. What differs between the engines is small and
mechanical, so it is rewritten here, once per distinct statement (cached):
  - `?` placeholders become `%s` (and a literal `%` becomes `%%`, which psycopg reads back as `%`);
  - `INSERT OR IGNORE` becomes `ON CONFLICT DO NOTHING`, `INSERT OR REPLACE` an upsert on the
    table's natural key (REPLACE_KEYS; a table missing there is refused, never guessed);
  - `json_extract(col, '$.key')` / `json_set(col, '$.key', ?, ...)` become their jsonb forms (metadata
    columns stay TEXT holding JSON, as on SQLite, so the shared code's json.loads keeps working);
  - `strftime('%Y-%m', col, 'unixepoch')`, `group_concat(col, 'sep')` and `json_each(col)` (an array's
    items as `json_each.value`) their to_char / string_agg / jsonb_array_elements_text forms; a JSON
    value compared or COALESCEd with a number becomes a number; `LIMIT ?` takes SQLite's -1 (no limit);
  - an INSERT into a table with an integer `id` returns it (the cursor's `lastrowid`).
A statement that only SQLite can run (PRAGMA, FTS5 MATCH, sqlite_master) raises StoreError naming
it, so an unported code path fails loudly instead of doing something else.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from crossmodalrag.errors import StoreError

# Tables whose rows have an integer `id` primary key: an INSERT returns it (lastrowid).
ID_TABLES = {"sources", "chunks", "queries_eval", "embedding_models", "chunk_vectors", "memory_usage"}
# INSERT OR REPLACE needs the conflict target PostgreSQL's upsert asks for.
# The hierarchy's keys start with the owner (schema version 14), which the shared SQL leaves to its default.
REPLACE_KEYS = {
    "chunk_vectors": ("model_id", "chunk_id", "piece"),
    "memory_cards": ("owner", "node_id"),
    "memory_extractions": ("owner", "source_id"),
    "memory_nodes": ("owner", "id"),
    "memory_evidence": ("owner", "node_id", "chunk_id", "role"),
    "memory_edges": ("owner", "src", "dst", "kind"),
    "agent_memories": ("source_id",),
    "agent_memory_links": ("source_id", "target_id", "relation"),
    "change_states": ("content_hash",),
    "checkpoints": ("name",),
}
# A conflict target on a unique key that includes the owner here (each owner has its own eval queries).
OWNED_CONFLICTS = {"ON CONFLICT(query_text)": "ON CONFLICT (owner, query_text)"}
SQLITE_ONLY = re.compile(r"\b(PRAGMA|sqlite_master|MATCH|fts5|chunks_fts|VACUUM)\b", re.IGNORECASE)
INSERT = re.compile(r"^\s*INSERT\s+(?:OR\s+(IGNORE|REPLACE)\s+)?INTO\s+(\w+)\s*(\(([^)]*)\))?", re.IGNORECASE)
JSON_EXTRACT = re.compile(r"json_extract\(\s*([\w.]+)\s*,\s*'\$\.(\w+)'\s*\)", re.IGNORECASE)
JSON_ORDER = re.compile(r"json_extract\(\s*([\w.]+)\s*,\s*'\$\.(\w+)'\s*\)\s*(<=|>=|<|>)", re.IGNORECASE)
JSON_NUMBER_OR = re.compile(
    r"COALESCE\(\s*json_extract\(\s*([\w.]+)\s*,\s*'\$\.(\w+)'\s*\)\s*,\s*(\d+(?:\.\d+)?)\s*\)", re.IGNORECASE
)
JSON_TYPE = re.compile(r"json_type\(\s*([\w.]+)\s*,\s*'\$\.(\w+)'\s*\)", re.IGNORECASE)
LIMIT = re.compile(r"\bLIMIT \?", re.IGNORECASE)
JSON_SET = re.compile(r"json_set\(\s*([\w.]+)\s*((?:,\s*'\$\.\w+'\s*,\s*(?:json\(\?\)|\?)\s*)+)\)", re.IGNORECASE)
JSON_PAIR = re.compile(r"'\$\.(\w+)'\s*,\s*(json\(\?\)|\?)", re.IGNORECASE)
AS_JSON = "?{json}"  # a parameter the connection hands over as JSON text (Statement.json_params)
MONTH = re.compile(r"strftime\('%Y-%m',\s*([\w.]+),\s*'unixepoch'\)", re.IGNORECASE)
JSON_EACH = re.compile(r"json_each\(\s*([\w.]+)\s*\)", re.IGNORECASE)
GROUP_CONCAT = re.compile(r"group_concat\(\s*([\w.]+)\s*,\s*('[^']*')\s*\)", re.IGNORECASE)


class Statement(NamedTuple):
    """A statement as PostgreSQL runs it: its text, whether it returns the new row's id, and the
    positions of the parameters to pass as JSON text (json_set's values: SQLite stores a number as
    a JSON number and a string as a JSON string; json.dumps does the same here)."""

    text: str
    returns_id: bool
    json_params: tuple[int, ...] = ()


def _placeholders(sql: str) -> tuple[str, tuple[int, ...]]:
    """`?` outside string literals -> `%s`; every `%` -> `%%` (psycopg parses the whole text).
    Returns the text and the positions of the AS_JSON parameters."""
    out, quoted, count, as_json = [], False, 0, []
    for part in re.split(r"(\?\{json\})", sql):
        if part == AS_JSON:
            as_json.append(count)
            part = "?"
        for char in part:
            if char == "'":
                quoted = not quoted
            if char == "%":
                out.append("%%")
            elif char == "?" and not quoted:
                out.append("%s")
                count += 1
            else:
                out.append(char)
    return "".join(out), tuple(as_json)


def _json_set(match: re.Match) -> str:
    """json_set(col, '$.a', ?, '$.b', json(?)) as nested jsonb_set, each value a jsonb parameter."""
    merged = f"COALESCE({match.group(1)}, '{{}}')::jsonb"
    for key, value in JSON_PAIR.findall(match.group(2)):
        parameter = "?" if value.lower().startswith("json") else AS_JSON  # json(?) is JSON text already
        merged = f"jsonb_set({merged}, '{{{key}}}', {parameter}::jsonb)"
    return f"({merged})::text"


def _insert(sql: str) -> tuple[str, bool]:
    """Rewrite INSERT OR IGNORE/REPLACE; add RETURNING id where a lastrowid exists. (sql, returns id)."""
    match = INSERT.match(sql)
    if not match:
        return sql, False
    conflict, table, columns = (match.group(1) or "").upper(), match.group(2), match.group(4)
    body = f"INSERT INTO {table} " + (f"({columns})" if columns else "") + sql[match.end() :]
    if conflict == "IGNORE":
        body += " ON CONFLICT DO NOTHING"
    elif conflict == "REPLACE":
        keys = REPLACE_KEYS.get(table)
        if keys is None or columns is None:
            raise StoreError(f"INSERT OR REPLACE INTO {table} has no PostgreSQL form yet", "report this")
        updates = [c.strip() for c in columns.split(",") if c.strip() not in keys]
        assignments = ", ".join(f"{c} = EXCLUDED.{c}" for c in updates)
        body += f" ON CONFLICT ({', '.join(keys)}) " + (f"DO UPDATE SET {assignments}" if updates else "DO NOTHING")
    returns = table in ID_TABLES and "RETURNING" not in body.upper()
    return (body + " RETURNING id" if returns else body), returns


@lru_cache(maxsize=2048)
def translate(sql: str) -> Statement:
    """The statement as PostgreSQL runs it. Raises StoreError for SQLite-only SQL."""
    found = SQLITE_ONLY.search(sql)
    if found:
        raise StoreError(
            f"this operation is SQLite-only so far ({found.group(0)} in: {' '.join(sql.split())[:80]})",
            "unset CMRAG_DB_URL to use the SQLite memory, or see docs/scaling.md for what PostgreSQL runs",
        )
    sql = JSON_SET.sub(_json_set, sql)
    sql = LIMIT.sub("LIMIT NULLIF(GREATEST(?, -1), -1)", sql)  # SQLite: a negative limit means none
    sql = JSON_NUMBER_OR.sub(r"COALESCE(((\1)::jsonb ->> '\2')::float8, \3)", sql)
    # A missing key is NULL on both; 'object', 'array' and 'null' read the same (numbers and strings do not).
    sql = JSON_TYPE.sub(r"jsonb_typeof((\1)::jsonb -> '\2')", sql)
    sql = JSON_ORDER.sub(r"((\1)::jsonb ->> '\2')::float8 \3", sql)  # SQLite compares a JSON number as a number
    sql = JSON_EXTRACT.sub(r"((\1)::jsonb ->> '\2')", sql)
    sql = MONTH.sub(r"to_char(to_timestamp(\1) AT TIME ZONE 'UTC', 'YYYY-MM')", sql)
    sql = GROUP_CONCAT.sub(r"string_agg(\1, \2)", sql)
    sql = JSON_EACH.sub(r"jsonb_array_elements_text((\1)::jsonb) AS json_each(value)", sql)
    for target, owned in OWNED_CONFLICTS.items():
        sql = sql.replace(target, owned)
    sql, returns = _insert(sql.strip().rstrip(";"))
    text, as_json = _placeholders(sql)
    return Statement(text, returns, as_json)
