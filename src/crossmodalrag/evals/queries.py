"""The eval query set in `queries_eval`: loading a JSON file, upserting, listing, sanity warnings."""

from __future__ import annotations

import difflib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossmodalrag.errors import EvalError
from crossmodalrag.store import Store

LABEL = re.compile(r"\A\s*\[[^\]\n]{1,40}\]\s*")
KEYS = ("query_text", "expected_source_uris")


@dataclass
class EvalQuery:
    query_text: str
    expected_source_uris: list[str]

    @property
    def question(self) -> str:
        """The text a user would type: a leading `[label]` groups queries and is not searched."""
        return LABEL.sub("", self.query_text, count=1)

    @property
    def answerable(self) -> bool:
        return bool(self.expected_source_uris)


def parse_queries(data: Any, origin: str = "queries") -> list[EvalQuery]:
    """Validate `[{"query_text": str, "expected_source_uris": [str, …]}, …]`. Raises EvalError."""
    if not isinstance(data, list):
        raise EvalError(
            f"{origin}: expected a JSON list of queries", 'use [{"query_text": …, "expected_source_uris": […]}]'
        )
    queries = []
    for index, item in enumerate(data):
        if isinstance(item, dict):  # first: a misspelled query_text is named as such, not as missing
            _refuse_unknown_keys(item, index, origin)
        if not isinstance(item, dict) or not isinstance(item.get("query_text"), str) or not item["query_text"].strip():
            raise EvalError(
                f"{origin}: item {index} has no query_text string", "every item needs a non-empty query_text"
            )
        uris = item.get("expected_source_uris", [])
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise EvalError(
                f"{origin}: item {index} expected_source_uris is not a list of strings",
                "use [] for a query that must abstain",
            )
        if not _storable(item["query_text"], *uris):
            raise EvalError(
                f"{origin}: item {index} contains an invalid \\u escape (a lone surrogate)",
                "write the text itself, or escape whole characters",
            )
        expanded = _expanded(uris)
        if relative := next((uri for uri in expanded if _is_relative(uri)), None):
            # stored, it could never match (every stored uri is absolute) and no command removes a query
            raise EvalError(
                f"{origin}: item {index} has the relative gold uri {relative!r}, which no source can match",
                "give absolute paths as `mem sources` lists them; nothing was loaded",
            )
        queries.append(EvalQuery(item["query_text"].strip(), expanded))
    return queries


def _is_relative(uri: str) -> bool:
    """A gold uri that names no stored source's form: sources are absolute paths (a commit's and a chat
    session's with `@…` after it), agent memories `memory:KEY`."""
    return not uri.split("@", 1)[0].startswith("/") and not uri.startswith("memory:")


def _expanded(uris: list[str]) -> list[str]:
    """`~/vault/rate.md` as the stored uri `/home/me/vault/rate.md` (every other path mem takes is
    expanded: this one was kept literally, called relative, and could never match), duplicates dropped."""
    return list(dict.fromkeys(os.path.expanduser(uri) if uri.startswith("~") else uri for uri in uris))


def _refuse_unknown_keys(item: dict, index: int, origin: str) -> None:
    """A misspelled `expected_source_uris` left the query with no gold, which reads as "must
    abstain" and scored every answer to it as wrong, silently. Raises EvalError naming the key."""
    for key in item:
        if key in KEYS:
            continue
        closest = difflib.get_close_matches(str(key).lower(), KEYS, n=1, cutoff=0.6)
        guess = f"; did you mean {closest[0]!r}?" if closest else ""
        raise EvalError(
            f"{origin}: item {index} has an unknown key {key!r}{guess}",
            f"each query takes only {KEYS[0]!r} and {KEYS[1]!r}, with [] for a query that must abstain",
        )


def _storable(*texts: str) -> bool:
    """Can SQLite store these strings? JSON's `"\\ud800"` decodes to a lone surrogate, which cannot."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_queries_file(path: Path) -> list[EvalQuery]:
    """Read and validate a query file. Raises EvalError on a missing, unreadable or malformed file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # -sig: editors that write a BOM
    except FileNotFoundError as exc:
        raise EvalError(f"{path}: no such file", "check the --load-queries path") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        # ValueError covers JSONDecodeError and integers past Python's 4,300-digit conversion limit.
        raise EvalError(f"{path}: not a readable JSON file ({exc})", "fix the file's JSON syntax") from exc
    except RecursionError as exc:
        raise EvalError(f"{path}: JSON nested too deeply", "an eval file is a flat list of queries") from exc
    return parse_queries(data, str(path))


def upsert_queries(store: Store, queries: list[EvalQuery]) -> None:
    """Insert new queries, replace the gold of existing ones (matched by query_text)."""
    now = time.time()
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO queries_eval (query_text, expected_source_uris, created_at, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(query_text) DO UPDATE SET expected_source_uris = excluded.expected_source_uris, "
            "updated_at = excluded.updated_at",
            [(q.query_text, json.dumps(q.expected_source_uris), now, now) for q in queries],
        )


def list_queries(store: Store, prefix: str | None = None) -> list[EvalQuery]:
    """Stored queries, optionally only those starting with prefix, in insertion order."""
    rows = store.conn.execute("SELECT query_text, expected_source_uris FROM queries_eval ORDER BY id").fetchall()
    # _expanded: queries loaded before `~` was expanded match from now on
    return [
        EvalQuery(text, _expanded(json.loads(uris))) for text, uris in rows if prefix is None or text.startswith(prefix)
    ]


def gold_warnings(store: Store, queries: list[EvalQuery]) -> list[str]:
    """Gold uris that are relative, contain a doubled separator, or match no ingested source."""
    warnings = []
    for query in queries:
        for uri in query.expected_source_uris:
            path = uri.split("@", 1)[0]
            if _is_relative(uri):  # stored before loading refused them
                warnings.append(
                    f"gold uri {uri!r} is relative, so it matches no ingested source; uris are absolute paths"
                    f" (query {query.query_text!r})"
                )
            elif "//" in path:
                warnings.append(f"gold uri {uri!r} contains a doubled path separator (query {query.query_text!r})")
            elif store.conn.execute("SELECT 1 FROM sources WHERE uri = ?", (uri,)).fetchone() is None:
                warnings.append(f"gold uri {uri!r} matches no ingested source (query {query.query_text!r})")
    return warnings
