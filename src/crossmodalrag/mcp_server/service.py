"""What the MCP tools run on: one database connection on one dedicated thread (SQLite connections
stay on the thread that made them; the event loop never blocks on a query), the retriever and
embedder loaded once, and the job runner for long work."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from crossmodalrag.agent.jobs import JobRunner
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store, open_configured_store
from crossmodalrag.store.failures import explain

JOB_WAIT_SECONDS = 2.0  # a short job (a small transcript) reports its result in the same call
# A model's answer: a few seconds with a fast model or none configured (the evidence answer), ~15 s
# with a 1.5B model on a laptop CPU, which then comes back as a job.
ASK_WAIT_SECONDS = 4.0


class ToolFailure(Exception):
    """A tool's expected failure: one line for the agent (the server turns it into an error result)."""


class MemoryService:
    def __init__(self, settings: Settings, agent_id: str = "") -> None:
        self.settings = settings
        self.agent_id = agent_id
        self.db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mem-db")
        self._store: Store | None = None
        self._embedder = None
        self._llm = None
        self.jobs = JobRunner(self._open)

    def _open(self) -> Store:
        store = open_configured_store(self.settings)
        store.conn.actor = self.actor()  # who wrote it, in the change log
        return store

    def actor(self, agent_id: str = "") -> str:
        """The change log's name for a tool call's writes: mcp:<agent> when the call or server names one."""
        agent = agent_id or self.agent_id
        return f"mcp:{agent}" if agent else "mcp"

    def store(self, agent_id: str = "") -> Store:
        """The connection of the db thread (call only from functions run through `call`), its writes
        logged as `agent_id`'s. Every call sets it: one server serves many agents (over HTTP), and
        calls take turns on the one db thread, so a call's writes never carry another call's agent."""
        if self._store is None:
            self._store = self._open()
        self._store.conn.actor = self.actor(agent_id)
        return self._store

    def retriever(self, top_k: int | None = None):
        from crossmodalrag.answer.evidence import open_retriever

        return open_retriever(self.store(), self.settings, top_k)

    def embedder(self):
        from crossmodalrag.agent.memories import load_memory_embedder

        if self._embedder is None:
            self._embedder = load_memory_embedder(self.settings)[0] or False
        return self._embedder or None

    def llm(self):
        """The configured language model, loaded once (asks run as jobs, one at a time, on the job
        thread). None when none can be used now: the answer then says why, and the next ask retries."""
        from crossmodalrag.answer.llm import load_llm

        if self._llm is None:
            try:
                self._llm = load_llm(self.settings)
            except CMRAGError:
                return None
        return self._llm

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run fn on the db thread; library errors become ToolFailure with their one-line message."""
        future = self.db.submit(_guarded, fn, args, kwargs)
        return await asyncio.wrap_future(future)

    async def job(self, kind: str, target: str, work, wait: float = JOB_WAIT_SECONDS) -> dict[str, Any]:
        job = self.jobs.start(kind, target, work)
        for _ in range(int(wait / 0.05)):
            if job.status in ("done", "failed"):
                break
            await asyncio.sleep(0.05)
        return job.to_dict()

    def close(self) -> None:
        self.jobs.close()
        if self._store is not None:
            self.db.submit(self._store.close).result()
        self.db.shutdown(wait=True)


def _guarded(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    try:
        return fn(*args, **kwargs)
    except CMRAGError as error:
        raise ToolFailure(str(error)) from None
    except sqlite3.DatabaseError as error:
        message, hint = explain(error)
        raise ToolFailure(f"{message} (hint: {hint})") from None


def forgotten_hint(store: Store, log_emptied: bool) -> str:
    """What memory_forget's report says about the bytes left on disk (its `vacuumed` stays false)."""
    if store.backend != "sqlite":
        return "the user can run `mem forget --vacuum` to also wipe its bytes from the server's tables"
    if log_emptied:
        where = "its text is zeroed in the database file and gone from the write-ahead log"
    else:
        where = "its text may stay in the database's write-ahead log until another process stops reading"
    return f"{where}; the user can run `mem forget --vacuum` to also wipe what earlier edits left in freed space"
