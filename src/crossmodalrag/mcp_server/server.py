"""The MCP tools: typed functions whose docstrings are their descriptions, each a thin layer over
one library function (agent/, answer/, conversations.py). Arguments are bounded by their types
(the SDK refuses a wrong type or an oversized string before the tool runs); a library error comes
back as an MCP error result with its one-line message; long work returns a job id."""

from __future__ import annotations

import inspect
import json
import logging
import re
import traceback
from typing import Annotated, Any, Callable, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from pydantic import Field, ValidationError

from crossmodalrag import __version__
from crossmodalrag.agent import browse, edits, jobs, memories, tools
from crossmodalrag.answer.evidence import MAX_QUESTION_CHARS
from crossmodalrag.config import Settings
from crossmodalrag.forget import empty_write_ahead_log
from crossmodalrag.mcp_server.service import (
    ASK_WAIT_SECONDS,
    MemoryService,
    ToolFailure,
    forgotten_hint,
)

Text = Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS)]  # a query or a question
Content = Annotated[str, Field(min_length=1, max_length=memories.MAX_CHARS)]
Tags = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=memories.MAX_TAGS)]
Kind = Annotated[str, Field(max_length=32, pattern=r"^[a-z][a-z0-9_-]*$")]
Day = Annotated[str, Field(max_length=40, description="ISO date, date-time or month, e.g. 2026-11-01")]
Ident = Annotated[int, Field(ge=1, le=2**63 - 1)]  # SQLite's integer range
Importance = Annotated[float, Field(ge=0.0, le=1.0)]
AgentId = Annotated[str, Field(max_length=200)]  # who calls, e.g. "claude-code": the change log's mcp:<agent>
Strategy = Literal["direct", "episodic", "fusion"]
SourceType = Literal["note", "commit", "pdf", "image", "conversation", "memory"]

logger = logging.getLogger(__name__)
UNEXPECTED_HINT = "run `mem doctor`; if it persists, report it with the server log"

INSTRUCTIONS = (
    "Long-term memory of this user: notes, git history, PDFs, images, past agent and chat sessions, and "
    "memories agents stored. Start a session with memory_context; search with memory_search (compact "
    "previews, then memory_get for full text); store what you learn with memory_store; cite sources as "
    "mem://source/{id}."
)


class OneLineErrorServer(MCPServer):
    """MCPServer whose errors read alike, one line each, "memory_x: message (hint: ...)": the SDK
    returns pydantic's multi-line report for bad arguments (echoing the rejected value back to the
    agent) and prefixes a tool's own failures with "Error executing tool memory_x: ". Descriptions
    are the docstrings without their source indentation."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(error, UnexpectedToolError):
                raise ToolError(unexpected_failure(name, cause)) from cause
            if isinstance(cause, ValidationError):
                raise ToolError(invalid_arguments(name, cause)) from cause
            if isinstance(cause, ToolError):  # a tool's own failure (ToolFailure, in `run` below)
                raise ToolError(f"{name}: {cause}") from cause
            raise

    def tool(self, *args: Any, **kwargs: Any) -> Callable:
        register = super().tool

        def decorate(fn: Callable) -> Callable:
            description = kwargs.pop("description", None) or inspect.cleandoc(fn.__doc__ or "")
            return register(*args, description=description, **kwargs)(fn)

        return decorate


def unexpected_failure(tool: str, cause: BaseException | None) -> str:
    """The one line an agent gets for a bug or an environment failure (a full disk, a broken install):
    what was raised, and what to do. The log gets it once with where it was raised, one frame a line
    item (the SDK's own log of it is a ~180-line boxed rendering per call, in the client's MCP log)."""
    if cause is None:
        return f"{tool}: unexpected error (hint: {UNEXPECTED_HINT})"
    what = " ".join(f"{type(cause).__name__}: {cause}".split())
    logger.error("%s: unexpected error: %s; raised at %s", tool, what, compact_trace(cause))
    return f"{tool}: unexpected error: {what} (hint: {UNEXPECTED_HINT})"


def compact_trace(error: BaseException) -> str:
    """'crossmodalrag/agent/tools.py:88 search_memory < ...': innermost frame first, paths from the package."""
    frames = traceback.extract_tb(error.__traceback__)
    return " < ".join(f"{_short_path(f.filename)}:{f.lineno} {f.name}" for f in reversed(frames))


def _short_path(path: str) -> str:
    return re.sub(r"^.*/(?:site-packages|src|lib/python3\.\d+)/", "", path)


def invalid_arguments(tool: str, error: ValidationError) -> str:
    """'memory_search: argument validation failed: query: String should have at most 2000 characters'."""
    problems = [f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()]
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return f"{tool}: argument validation failed: {'; '.join(problems[:3])}{more} (hint: see the tool's input schema)"


def build_server(settings: Settings, service: MemoryService | None = None) -> MCPServer:
    """The MCP server over the memory at settings.db_path."""
    service = service or MemoryService(settings)
    server = OneLineErrorServer("mem", instructions=INSTRUCTIONS, version=__version__)

    async def run(fn, *args, **kwargs) -> Any:
        try:
            return await service.call(fn, *args, **kwargs)
        except ToolFailure as failure:
            raise ToolError(str(failure)) from None

    @server.tool()
    async def memory_store(
        content: Content,
        tags: Tags | None = None,
        importance: Importance = 0.5,
        kind: Kind = "note",
        session_id: Annotated[str, Field(max_length=200)] = "",
        agent_id: AgentId = "",
        when: Day | None = None,
        context: Annotated[str, Field(max_length=memories.MAX_CONTEXT_CHARS)] = "",
    ) -> dict[str, Any]:
        """Store a memory (a fact, decision, preference, task or note) so later sessions can find it.
        Returns its `id`; an exact duplicate in the same context returns the stored id, a near duplicate
        in the same context is merged into it, and a memory that restates a fact with a new value
        supersedes the older one. `when`: when it was said or learned (ISO; default now), its date for
        date filters and "last week". `context`: what it
        replies to, e.g. the previous turn when you store a conversation turn by turn (its first 160
        characters help search find a reply by the words it answers; not part of the memory's text).
        Memories stored in order with one session_id are read as one episode. <private> spans are
        dropped and API keys, tokens and passwords masked before anything is stored."""

        def store():
            return memories.remember(
                service.store(agent_id),
                content,
                tags or [],
                importance,
                kind,
                session_id,
                agent_id,
                service.embedder(),
                when=tools.parse_when(when, "when"),
                context=context,
            ).to_dict()

        return await run(store)

    @server.tool()
    async def memory_search(
        query: Text,
        limit: Annotated[int, Field(ge=1, le=tools.MAX_RESULTS)] = 10,
        kind: Kind | None = None,
        tags: Tags | None = None,
        source_types: list[SourceType] | None = None,
        after: Day | None = None,
        before: Day | None = None,
        compact: bool = True,
        max_tokens: Annotated[int, Field(ge=50, le=50_000)] | None = None,
        strategy: Strategy = "episodic",
    ) -> dict[str, Any]:
        """Search the whole memory (hybrid lexical + semantic). compact=true gives ids, one-line previews
        and scores (~50 tokens a result): open the ones you need with memory_get. compact=false gives
        full results, as many as fit in max_tokens. Filters: kind and tags (agent memories), source
        types, and a date range on the sources' own dates. strategy=episodic reads "last week", "in May",
        "before the migration" in the query as date ranges on the memory's own timeline; results stay
        inside a named period while it holds matching ones."""
        return await run(
            lambda: tools.search_memory(
                service.retriever(),
                query,
                limit,
                kind,
                tags,
                source_types,
                after,
                before,
                compact,
                max_tokens,
                strategy,
            )
        )

    @server.tool()
    async def memory_get(ids: Annotated[list[Ident], Field(min_length=1, max_length=tools.MAX_IDS)]) -> dict[str, Any]:
        """The full content of sources by id (ids from memory_search, memory_browse or a citation)."""
        return await run(lambda: tools.get_sources(service.store(), ids))

    @server.tool()
    async def memory_update(
        id: Ident,
        content: Content | None = None,
        tags: Tags | None = None,
        importance: Importance | None = None,
        kind: Kind | None = None,
        agent_id: AgentId = "",
    ) -> dict[str, Any]:
        """Change an agent memory in place (its text, tags, importance or kind); the id stays. agent_id:
        who changes it, named in the user's change log (`mem log`)."""
        return await run(
            lambda: edits.update_memory(
                service.store(agent_id), id, content, tags, importance, kind, service.embedder()
            )
        )

    @server.tool()
    async def memory_forget(id: Ident, agent_id: AgentId = "") -> dict[str, Any]:
        """Erase an agent memory for good (as `mem forget`): its text, chunks, vectors and what was derived
        from it. Other sources (notes, commits, PDFs, chat sessions) are the user's: refused. agent_id:
        who erases it, named in the user's change log (`mem log`)."""

        def forget() -> dict[str, Any]:
            store = service.store(agent_id)
            report = edits.forget_source(store, id)
            return {**report, "hint": forgotten_hint(store, empty_write_ahead_log(store))}

        return await run(forget)

    @server.tool()
    async def memory_ask(
        question: Text,
        top_k: Annotated[int, Field(ge=1, le=20)] = 5,
        after: Day | None = None,
        before: Day | None = None,
        strategy: Strategy = "episodic",
        use_llm: bool = True,
    ) -> dict[str, Any]:
        """Answer a question from memory: text citing numbered evidence [E1], or an abstention when the
        memory does not hold the answer (the `mem ask --json` contract; cite as mem://source/{source_id}).
        The configured language model writes the answer; when it is not ready within a few seconds this
        returns a job instead (job_id, status): poll memory_job until status is done and read the answer
        in its `result`. use_llm=false answers at once with the cited evidence alone (`--no-llm`)."""
        if not use_llm:
            return await run(lambda: tools.ask_memory(service.retriever(top_k), question, after, before, strategy))
        await run(lambda: (tools.parse_when(after, "after"), tools.parse_when(before, "before")))
        work = jobs.ask_work(service.settings, question, top_k, after, before, strategy, service.llm)
        job = await service.job("ask", question[:200], work, wait=ASK_WAIT_SECONDS)
        if job["status"] == "failed":
            raise ToolError(job["error"])
        return job["result"] if job["status"] == "done" else job

    @server.tool()
    async def memory_context(
        topic: Annotated[str, Field(max_length=500)] | None = None,
        max_tokens: Annotated[int, Field(ge=100, le=20_000)] = 1500,
    ) -> dict[str, Any]:
        """What to load at the start of a session for a project or topic: recent decisions, open tasks,
        relevant memories and the latest sessions, within a token budget."""
        return await run(lambda: tools.context_for(service.retriever(), topic, max_tokens))

    @server.tool()
    async def memory_browse(
        kind: Kind | None = None,
        tags: Tags | None = None,
        after: Day | None = None,
        before: Day | None = None,
        history: bool = False,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        offset: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0,  # SQLite's integer range
    ) -> dict[str, Any]:
        """List agent memories newest first by kind, tags and date, without a query; history=true also
        lists memories a newer one superseded. `total` counts all that match: page on with `offset`."""

        def listed():
            start, end = tools.parse_window(after, before)
            store = service.store()
            found = browse.list_memories(store, kind, tags, start, end, history, limit, offset)
            return {"memories": found, "total": browse.count_memories(store, kind, tags, start, end, history)}

        return await run(listed)

    @server.tool()
    async def memory_timeline(
        after: Day | None = None, before: Day | None = None, limit: Annotated[int, Field(ge=1, le=500)] = 50
    ) -> dict[str, Any]:
        """Sources by their own dates (sessions, notes, commits, memories), grouped by day; episodes too
        once the memory hierarchy is built: the latest `limit` overlapping after/before, each with its
        first 50 event ids and best 10 chunks (events_total and evidence_total count them all)."""
        return await run(lambda: tools.timeline_view(service.store(), after, before, limit))

    @server.tool()
    async def memory_feedback(
        chunk_ids: Annotated[list[Ident], Field(min_length=1, max_length=tools.MAX_RESULTS)], useful: bool = True
    ) -> dict[str, Any]:
        """Mark search results (their chunk_id) as useful or not: feeds the usage signal of ranking."""
        return await run(lambda: tools.record_feedback(service.store(), chunk_ids, useful))

    @server.tool()
    async def memory_ingest(path: Annotated[str, Field(min_length=1, max_length=4096)]) -> dict[str, Any]:
        """Ingest a file or folder inside a folder the user configured for mem (vaults, repositories, PDF,
        image and chat folders); a path inside a git repository reads the repository's history. Returns
        a job; poll memory_job for its progress."""
        target = await run(jobs.ingest_target, service.settings, path)
        return await service.job("ingest", str(target.path), jobs.ingest_work(service.settings, *target))

    @server.tool()
    async def memory_digest_session(path: Annotated[str, Field(min_length=1, max_length=4096)]) -> dict[str, Any]:
        """Ingest an agent or chat session transcript (Claude Code, Codex, ChatGPT, Claude.ai export) so
        nothing said in it is lost; only new turns are written. The file must be inside a chat folder the
        user configured for mem (CHAT_PATH_n). Returns a job (done at once if small)."""
        target = await run(jobs.ingest_target, service.settings, path, transcripts=True)
        return await service.job("digest", str(target.path), jobs.ingest_work(service.settings, *target))

    @server.tool()
    async def memory_stats() -> dict[str, Any]:
        """What the memory holds: sources by kind, chunks, vectors, agent memories, per month."""
        return await run(lambda: tools.stats_view(service.store(), service.settings))

    @server.tool()
    async def memory_diff(
        since: Day,
        limit: Annotated[int, Field(ge=1, le=1000)] = tools.DIFF_LIMIT,
        offset: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0,  # SQLite's integer range
    ) -> dict[str, Any]:
        """What changed since a time: sources added or updated (newest first, `limit` of them from
        `offset`; `changed_total` counts them all), memories superseded."""
        return await run(lambda: tools.changes_since(service.store(), since, limit, offset))

    @server.tool()
    async def memory_job(job_id: Annotated[str, Field(min_length=1, max_length=64)]) -> dict[str, Any]:
        """Progress and result of a job started by memory_ingest, memory_digest_session or memory_ask."""
        return await run(lambda: service.jobs.get(job_id).to_dict())

    @server.resource("mem://source/{source_id}", mime_type="application/json")
    async def source(source_id: str) -> str:
        """One source's full text and chunk locators: what a citation mem://source/{id} opens."""
        if not source_id.isdigit() or len(source_id) > 18:
            raise ResourceError(f"not a source id: {source_id[:20]!r}")
        try:
            found = await service.call(lambda: tools.full_source(service.store(), int(source_id)))
        except ToolFailure as failure:
            raise ResourceError(str(failure)) from None
        return json.dumps(found, ensure_ascii=False)

    server.service = service  # the caller closes it when the server stops
    return server
