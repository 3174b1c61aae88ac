"""Finished answers the console can show again on Back or a reload, kept by the server, not the browser.

Replies are no-store, so Back to an answer loads the page afresh; asking its question again would be
another generation (a minute with a local model). The browser used to keep the whole answer in
`history.state`, which Chromium also writes to the profile on disk: text erased with `mem forget` came
back on the next reload. Now the tab keeps only an opaque id. The server hands an answer back only while
every chunk and memory node it shows is still stored (ids are never reused: docs/schema.md "Ids", and a
chunk's text never changes in place), so a forget makes it a 404 and the console asks again. Kept in
this process's memory only, a few dozen at most: a restarted server has none.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from typing import Any

from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store

MOST_KEPT = 64  # answers, oldest dropped first: Back rarely goes further than that


class AnswerNotKept(CMRAGError):
    """No answer kept by that id (never, dropped for room, or its evidence was forgotten since): a 404."""


class KeptAnswers:
    """Answer payloads (what `/ask` returns) by an unguessable id, dropped once their evidence is not."""

    def __init__(self, most: int = MOST_KEPT) -> None:
        self.most = most
        self._answers: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()  # answers finish in the ask pool's threads

    def keep(self, payload: dict[str, Any]) -> str:
        kept_id = secrets.token_urlsafe(16)
        with self._lock:
            self._answers[kept_id] = payload
            while len(self._answers) > self.most:
                self._answers.popitem(last=False)
        return kept_id

    def get(self, store: Store, kept_id: str) -> dict[str, Any] | None:
        """The kept answer, or None when there is none by that id or some of what it shows was erased
        since (it is then dropped, so its text leaves this process too)."""
        with self._lock:
            payload = self._answers.get(kept_id)
        if payload is None:
            return None
        if still_stored(store, payload):
            return payload
        with self._lock:
            self._answers.pop(kept_id, None)
        return None


def still_stored(store: Store, payload: dict[str, Any]) -> bool:
    """Is every chunk the answer cites as evidence, and every memory node it matched, still stored?"""
    chunks = {item["chunk_id"] for item in payload.get("evidence", [])}
    nodes = {node["id"] for node in payload.get("matched_nodes") or []}
    return _all_present(store, "chunks", chunks) and _all_present(store, "memory_nodes", nodes)


def _all_present(store: Store, table: str, ids: set[int]) -> bool:
    if not ids:
        return True
    marks = ",".join("?" * len(ids))  # at most top_k (50) evidence or a level's nodes: one statement
    found = store.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE id IN ({marks})", tuple(ids)).fetchone()[0]
    return found == len(ids)
