"""The library side of the MCP tools (and of `mem` commands that mirror them): each function takes
plain arguments, validates them, calls the library and returns the JSON-ready dict the tool sends.
No MCP types here; mcp_server/ only adapts these to tools."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from crossmodalrag.agent.browse import list_memories, matching_memories, memory_counts, memory_record, note_changes
from crossmodalrag.errors import CMRAGError
from crossmodalrag.retrieval.gate import is_weak
from crossmodalrag.retrieval.snippets import focus_hits
from crossmodalrag.retrieval_mode import stats_report
from crossmodalrag.sources import SourceNotFound, source_detail
from crossmodalrag.store import Store
from crossmodalrag.types import Evidence, excerpt, iso_time

if TYPE_CHECKING:
    from crossmodalrag.answer.evidence import Retriever
    from crossmodalrag.answer.llm import LLM
    from crossmodalrag.config import Settings

MAX_RESULTS = 50
MAX_IDS = 20
MAX_SOURCE_CHARS = 40_000
PREVIEW_CHARS = 100
CHARS_PER_TOKEN = 4  # a rough, model-independent estimate: budgets are approximate by nature


MONTH = re.compile(r"\d{4}-\d{2}")  # "2026-02": the month, from its first day


class InvalidArgument(CMRAGError):
    """A tool argument is out of range or malformed."""


def parse_when(value: str | None, what: str) -> float | None:
    """Unix seconds from an ISO date or date-time (UTC unless it says otherwise), or a month (its first
    day). Raises InvalidArgument."""
    if value is None or value == "":
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(f"{text}-01" if MONTH.fullmatch(text) else text)
    except ValueError:
        raise InvalidArgument(f"{what} must be an ISO date such as 2026-11-01", f"got {str(value)[:40]!r}") from None
    seconds = (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
    try:  # 0001-01-01 east of UTC is in year 0, 9999-12-31 west of it in 10000: no date prints them
        datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, ValueError, OSError):
        raise InvalidArgument(f"{what} is out of range: {str(value)[:40]}", "give a date from year 1 to 9999") from None
    return seconds


def parse_window(
    after: str | None, before: str | None, names: tuple[str, str] = ("after", "before")
) -> tuple[float | None, float | None]:
    """(start, end) of a date window, `before` excluded. Raises InvalidArgument for a bad date or an
    empty window (every tool refuses it alike; it silently found nothing)."""
    start, end = parse_when(after, names[0]), parse_when(before, names[1])
    if start is not None and end is not None and start >= end:
        # "name=value": the argument names are "after"/"before" themselves, which read as doubled words
        hint = (
            f"{names[1]} is excluded: for that one day give {names[1]} the day after"
            if start == end
            else "swap them: nothing can be both"
        )
        raise InvalidArgument(f"{names[0]}={after} is not earlier than {names[1]}={before}", hint)
    return start, end


def tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, ensure_ascii=False)) // CHARS_PER_TOKEN)


def search_memory(
    retriever: "Retriever",
    query: str,
    limit: int = 10,
    kind: str | None = None,
    tags: list[str] | None = None,
    source_types: list[str] | None = None,
    after: str | None = None,
    before: str | None = None,
    compact: bool = True,
    max_tokens: int | None = None,
    strategy: str = "direct",
) -> dict[str, Any]:
    """Ranked evidence for a query. `compact`: id, one-line preview and score per result (~50 tokens);
    otherwise full results, as many as fit in `max_tokens`. Raises InvalidArgument."""
    if not 1 <= limit <= MAX_RESULTS:
        raise InvalidArgument(f"limit must be 1..{MAX_RESULTS}", "ask for fewer results")
    start, end = parse_window(after, before)
    options = replace(
        retriever.options,
        top_k=limit,
        source_types=tuple(source_types or ()),
        # a kind or tags: the memories that have them, filtered in the search (filtering its top
        # results instead returned fewer than `limit`, or none, where more matched)
        source_ids=tuple(matching_memories(retriever.store, kind, tags)) if kind or tags else None,
        after=start,
        before=end,
    )
    retriever.options, retriever.strategy = options, strategy
    found = retriever.search(query)
    focus_hits(found.hits, query)
    evidence = [Evidence(f"E{i}", hit) for i, hit in enumerate(found.hits, 1)]
    if compact:
        successors = successors_of(retriever.store, found.hits)
        results = [compact_result(e, successors.get(e.hit.source_id)) for e in evidence]
    else:
        results = _packed(evidence, max_tokens)
    # Fused scores (episodic, fusion) rank but do not say whether anything matched: `weak` does, as
    # `mem ask` decides to abstain (nothing covers enough of the query's words or meaning).
    weak = is_weak(found, options)
    return {"query": query, "compact": compact, "count": len(results), "results": results, "weak": weak}


def ask_memory(
    retriever: "Retriever",
    question: str,
    after: str | None = None,
    before: str | None = None,
    strategy: str = "direct",
    settings: "Settings | None" = None,
    llm: "LLM | None" = None,
) -> dict:
    """The `mem ask --json` answer, noting changed facts. With `settings`, through the configured language
    model (`llm` if already loaded; the evidence answer and a notice saying why when none can be used);
    without, the `--no-llm` answer: cited evidence or an abstention."""
    from crossmodalrag.agent.recall import with_recall
    from crossmodalrag.answer.evidence import ask_without_llm, with_retriever_notices

    retriever = with_recall(retriever, strategy, after, before, names=("after", "before"))
    standing = list(retriever.notices)
    if settings is None:
        answer = ask_without_llm(retriever, question)
    else:
        from crossmodalrag.answer.synthesize import ask_with_llm

        answer = ask_with_llm(retriever, question, settings, llm=llm)
    with_retriever_notices(answer, retriever, standing, len(standing))
    note_changes(retriever.store, answer)
    return answer.to_dict()


def compact_result(item: Evidence, superseded_by: int | None = None) -> dict[str, Any]:
    """Enough to triage and open a result. No title: memory_get has it, and a chat's title (both
    names, session number, date) cost ~30 tokens of a ~100-token result while repeating `date`.
    `superseded_by` only on a memory a newer one replaced: old and new value side by side otherwise
    read alike, and an agent would have to open each to learn which is current."""
    hit = item.hit
    result = {
        "id": hit.source_id,
        "chunk_id": hit.chunk_id,
        "type": hit.source_type,
        "preview": excerpt(hit.text, PREVIEW_CHARS, hit.focus),
        "date": (iso_time(hit.timestamp) or "")[:10] or None,
        "score": round(hit.score, 3),
    }
    if superseded_by is not None:
        result["superseded_by"] = superseded_by
    return result


def successors_of(store: Store, hits: list) -> dict[int, int]:
    """Source id -> the memory that superseded it, for the superseded agent memories among `hits`."""
    ids = sorted({hit.source_id for hit in hits if hit.source_type == "memory"})
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = store.conn.execute(
        f"SELECT source_id, superseded_by FROM agent_memories WHERE source_id IN ({marks})"
        " AND superseded_by IS NOT NULL",
        ids,
    )
    return dict(rows.fetchall())


def _packed(evidence: list[Evidence], max_tokens: int | None) -> list[dict[str, Any]]:
    """Full results (the chunk's whole text), best first, while they fit the budget (at least one)."""
    results, used = [], 0
    for item in evidence:
        full = {**item.to_dict(), "text": item.hit.text.split("\n", 1)[-1], "uri": f"mem://source/{item.hit.source_id}"}
        full.pop("excerpt", None)
        cost = tokens(full)
        if max_tokens is not None and results and used + cost > max_tokens:
            break
        results.append(full)
        used += cost
    return results


def get_sources(store: Store, ids: list[int]) -> dict[str, Any]:
    """The full text of each source (and a memory's attributes), for ids from search or citations."""
    if not ids or len(ids) > MAX_IDS:
        raise InvalidArgument(f"give 1 to {MAX_IDS} ids", "search first; ids are the `id` of its results")
    found, missing = [], []
    for source_id in ids:
        try:
            found.append(full_source(store, int(source_id)))
        except SourceNotFound:
            missing.append(source_id)
    return {"sources": found, "missing": missing}


def full_source(store: Store, source_id: int) -> dict[str, Any]:
    """One source as text with its chunk locators. Raises SourceNotFound."""
    detail = source_detail(store, source_id)
    text = "\n\n".join(chunk["body"] for chunk in detail["chunks"])
    item = {
        "id": source_id,
        "uri": f"mem://source/{source_id}",
        "source_type": detail["source_type"],
        "title": detail["title"],
        "locator": detail["locator"],
        "timestamp": detail["timestamp"],
        "text": text[:MAX_SOURCE_CHARS],
        "truncated": len(text) > MAX_SOURCE_CHARS,
        "chunks": [{"id": c["id"], "locator": c["locator"]} for c in detail["chunks"]],
    }
    memory = memory_record(store.conn, source_id)
    return {**item, "memory": memory} if memory else item


def context_for(retriever: "Retriever", topic: str | None = None, max_tokens: int = 1500) -> dict[str, Any]:
    """What to load at the start of a session: recent decisions, open tasks, memories relevant to
    the topic, and the latest sessions, filled in that order until the token budget is spent."""
    store = retriever.store
    sections = {
        "decisions": [_brief(m) for m in list_memories(store, kind="decision", limit=10)],
        "tasks": [_brief(m) for m in list_memories(store, kind="task", limit=10)],
        # compact, as memory_search's default: scoring components and offsets told an agent nothing and
        # cost ~70 tokens an item of the budget it pays for at every session start (memory_get has the rest)
        "relevant": search_memory(retriever, topic, limit=10)["results"] if topic else [],
        "recent_sessions": _recent_sessions(store, 10),
    }
    packed, used = {name: [] for name in sections}, 0
    for name, items in sections.items():
        for item in items:
            cost = tokens(item)
            if used + cost > max_tokens:
                break
            packed[name].append(item)
            used += cost
    return {"topic": topic, "max_tokens": max_tokens, "tokens": used, **packed}


def _brief(memory: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "kind", "importance", "tags", "created", "text")
    return {k: memory[k] for k in keys if k in memory}


LAST_ACTIVE = "MAX(COALESCE(c.said_at, s.timestamp))"  # a session's latest turn (PostgreSQL: no alias in ORDER BY)


def _recent_sessions(store: Store, limit: int) -> list[dict[str, Any]]:
    """The sessions last active most recently (by their latest turn's own date): a session resumed
    today is recent, however long ago it began (`date`, its start)."""
    rows = store.conn.execute(
        f"SELECT s.id, s.title, s.timestamp, {LAST_ACTIVE} FROM sources s"
        " LEFT JOIN chunks c ON c.source_id = s.id WHERE s.source_type = 'conversation'"
        f" GROUP BY s.id, s.title, s.timestamp ORDER BY {LAST_ACTIVE} IS NULL, {LAST_ACTIVE} DESC, s.id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [{"id": i, "title": t, "date": _day(start), "last_active": _day(active)} for i, t, start, active in rows]


def _day(when: float | None) -> str | None:
    return (iso_time(when) or "")[:10] or None


def timeline_view(store: Store, after: str | None = None, before: str | None = None, limit: int = 50) -> dict:
    """Sources by their own dates, newest first, grouped by day; episodes too once the hierarchy is
    built (`mem build-memory`): the latest `limit` overlapping the window, oldest first."""
    start, end = parse_window(after, before)
    rows = store.conn.execute(
        "SELECT id, source_type, title, timestamp FROM sources WHERE timestamp IS NOT NULL"
        " AND timestamp >= ? AND timestamp < ? ORDER BY timestamp DESC LIMIT ?",
        (start if start is not None else float("-inf"), end if end is not None else float("inf"), min(limit, 500)),
    ).fetchall()
    days: dict[str, list] = {}
    for source_id, kind, title, when in rows:
        days.setdefault(iso_time(when)[:10], []).append({"id": source_id, "type": kind, "title": title})
    episodes = _episodes(store, start, end, min(limit, 500))
    return {"days": [{"date": day, "sources": items} for day, items in days.items()], "episodes": episodes}


def _episodes(store: Store, start: float | None, end: float | None, limit: int) -> list[dict[str, Any]]:
    try:
        from crossmodalrag.memory.episodes import timeline
    except ImportError:
        return []
    return timeline(store, limit, start=start, end=end)


DIFF_LIMIT = 200  # changes listed by default; `changed_total` says how many there are


def changes_since(store: Store, since: str, limit: int = DIFF_LIMIT, offset: int = 0) -> dict[str, Any]:
    """Sources added or updated since a time (newest first, `limit` from `offset`, and how many in
    all: an agent told 200 must know whether that is all), and memories superseded since then."""
    moment = parse_when(since, "since")
    if moment is None:
        raise InvalidArgument("since is required", "e.g. 2026-11-01 or 2026-11-30T09:00")
    # A memory whose tags or importance changed, or that a restatement merged into, was updated too
    # though its text (the source row) was not rewritten.
    changed = (
        " FROM sources s LEFT JOIN agent_memories m ON m.source_id = s.id WHERE s.ingested_at >= ? OR m.updated_at >= ?"
    )
    rows = store.conn.execute(
        "SELECT s.id, s.source_type, s.title,"
        f" CASE WHEN m.updated_at > s.ingested_at THEN m.updated_at ELSE s.ingested_at END AS at{changed}"
        " ORDER BY at DESC, s.id DESC LIMIT ? OFFSET ?",
        (moment, moment, limit, offset),
    ).fetchall()
    total = store.conn.execute(f"SELECT COUNT(*){changed}", (moment, moment)).fetchone()[0]
    superseded = store.conn.execute(
        "SELECT source_id, superseded_by FROM agent_memories WHERE superseded_by IS NOT NULL AND updated_at >= ?"
        " UNION SELECT m.source_id, m.superseded_by FROM agent_memories m JOIN sources s ON s.id = m.superseded_by"
        " WHERE s.ingested_at >= ?",
        (moment, moment),
    ).fetchall()
    return {
        "since": iso_time(moment),
        "changed": [{"id": i, "type": k, "title": t, "ingested": iso_time(at)} for i, k, t, at in rows],
        "changed_total": total,
        "superseded": [{"id": old, "by": new} for old, new in superseded],
    }


def stats_view(store: Store, settings: Settings) -> dict[str, Any]:
    """`mem stats --json` (with `retrieval`: whether searches are lexical only, and why) plus agent memories."""
    return {**stats_report(store, settings), "agent_memories": memory_counts(store)}


def record_feedback(store: Store, chunk_ids: list[int], useful: bool) -> dict[str, Any]:
    """Mark results useful (or not): feeds the usage signal of the `usage` ranking profile."""
    from crossmodalrag.memory.usage import chunk_target, record

    if not chunk_ids or len(chunk_ids) > MAX_RESULTS:
        raise InvalidArgument(f"give 1 to {MAX_RESULTS} chunk ids", "the `chunk_id` of search results")
    known = {
        row[0]
        for row in store.conn.execute(
            f"SELECT id FROM chunks WHERE id IN ({','.join('?' * len(chunk_ids))})", [int(c) for c in chunk_ids]
        )
    }
    written = record(store, [chunk_target(c) for c in known], "feedback_up" if useful else "feedback_down")
    return {"recorded": written, "unknown": sorted(set(map(int, chunk_ids)) - known), "at": iso_time(time.time())}
