"""L1 events: extracted from each source by the LLM (git commits: their subject, no LLM), each linked
to the exact chunks it was drawn from, with its provenance checked by embedding.

Incremental and resumable: a source's extraction is keyed on its fingerprint, the model and the
prompt version, and each source is committed on its own, so a killed build loses at most the source
in flight. A source whose chunks changed but whose text did not (a re-chunk) keeps its events,
re-anchored to the new chunk ids by character span. A source whose text changed while no model is
configured keeps the events resting on a chunk it left unchanged, or whose words a line of the new
text still holds; the rest wait for a model to read it again, out of retrieval until then.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from crossmodalrag.answer.llm.base import LLMUnavailable
from crossmodalrag.memory.anchors import reanchor, reattach_restored
from crossmodalrag.memory.extract import PROMPT_VERSION, extract_window, spoken
from crossmodalrag.memory.nodes import Link, Node, delete_nodes, rows, stable_id, with_evidence, write_nodes
from crossmodalrag.memory.provenance import NOT_IN_SOURCE, WAITING, check_provenance, relink_edited
from crossmodalrag.memory.sources import ChunkRow, SourceRow, all_sources, chunks_of, events_filter, text_hash, windows
from crossmodalrag.store import Store
from crossmodalrag.types import iso_time

if TYPE_CHECKING:
    from crossmodalrag.answer.llm import LLM
    from crossmodalrag.retrieval.semantic import SemanticIndex

GIT_MODEL, GIT_PROMPT = "git", "commit-subject-v1"
RECHECKED = "rechecked"  # an extraction state: events of an earlier text, checked against the new one
Progress = Callable[[int, int, str, int], None]  # (done, total, what is being done, failed so far)


EVENT_EMBED_BATCH = 32  # statements per model call: a statement is one sentence, so 32 pad to little
EVENTS_PER_COMMIT = 512


@dataclass
class EventsReport:
    sources: int = 0
    extracted: int = 0  # sources that went through the LLM this run
    from_git: int = 0
    unchanged: int = 0
    reanchored: int = 0
    rechecked: int = 0  # sources edited while no model is configured: their events checked against the new text
    events: int = 0  # events written this run
    embedded: int = 0  # events given the vector they lacked (git commits, events made before embeddings)
    unsupported: int = 0
    events_waiting: int = 0  # events of sources rechecked this run that wait for a model to re-read them
    waiting: int = 0  # sources that need a model none is configured for
    waiting_sources: list[dict[str, Any]] = field(default_factory=list)  # which: {"source_id", "uri"}
    pending: int = 0  # left for the next run (--limit / --max-minutes)
    failed: list[dict[str, Any]] = field(default_factory=list)
    removed_orphans: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: int = 0
    prompt_chars: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    unreachable: str = ""  # why the model could not be reached mid-run (build-memory says it in its notices)
    unreachable_hint: str = ""  # what to do about it: start a server, replace a corrupt GGUF file

    def to_dict(self) -> dict[str, Any]:
        return {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in self.__dict__.items()
            if not k.startswith("unreachable")
        }


@dataclass
class Extraction:
    """How events are made this run: the model (or none) and the provenance check."""

    llm: "LLM | None"
    semantic: "SemanticIndex | None"
    window_chars: int = 3000
    min_cosine: float = 0.50  # Settings.event_support_min_cosine
    constrained: bool = True  # schema-constrained decoding (off only to measure what it buys)

    @property
    def model_id(self) -> str:
        return f"{self.llm.provider}/{self.llm.model}" if self.llm else ""


def read_by_model(source: SourceRow, how: Extraction) -> bool:
    """Whether a source needing work is one the model reads (git commits become events without it)."""
    return how.llm is not None and source.source_type != "commit"


def build_events(
    store: Store,
    how: Extraction,
    limit: int | None = None,
    max_minutes: float | None = None,
    progress: Progress | None = None,
) -> EventsReport:
    """Extract events from every source that needs it, newest first. Never raises on model output:
    a source that fails validation twice is recorded as failed and retried next run. A model server
    that cannot be reached does not stop the run: the sources left wait for it (`report.unreachable`
    says why), as they do when no model is configured, and git commits still become events."""
    started, report = time.monotonic(), EventsReport()
    deadline = started + max_minutes * 60 if max_minutes is not None else None
    report.reanchored += reattach_restored(store)  # before the orphans go: a rollback's are not
    report.removed_orphans = remove_orphans(store)
    sources = all_sources(store.conn)
    report.sources = len(sources)
    states = _states(store)
    todo = [s for s in sources if _needs_work(s, states.get(s.id), how, report)]
    # What the progress line counts: "extracting from 15 sources" without a model, for 15 commits, was wrong.
    read, by_model = 0, sum(read_by_model(source, how) for source in todo)
    by_model = by_model if limit is None else min(by_model, limit)  # nor all 30 waiting for --limit 1
    for done, source in enumerate(todo):
        over_time = deadline is not None and time.monotonic() > deadline
        tried = report.extracted + len(report.failed)  # --limit bounds the model's work: failures took it too
        if (limit is not None and tried >= limit) or over_time:
            report.pending = len(todo) - done
            break
        state = states.get(source.id)
        if report.unreachable and not _needs_work(source, state, how, report):
            continue  # decided again without the model: it waits for it
        if progress and read_by_model(source, how):
            progress(read, by_model, source.title, len(report.failed))
            read += 1
        try:
            finished = _process(store, source, state, how, report, deadline)
        except LLMUnavailable as error:
            report.extracted -= 1
            report.unreachable, report.unreachable_hint, how = error.message, error.hint, replace(how, llm=None)
            finished = not _needs_work(source, state, how, report) or _process(store, source, state, how, report)
        if not finished:
            report.pending = len(todo) - done  # this one too: cut off between its windows, nothing stored
            break
    newest_first = {source.id: i for i, source in enumerate(sources)}  # some are found waiting only by _process
    report.waiting_sources.sort(key=lambda waiting: newest_first[waiting["source_id"]])
    if how.semantic is not None:
        report.embedded = embed_missing_events(store, how.semantic)
    report.seconds = time.monotonic() - started
    return report


def embed_missing_events(store: Store, semantic: "SemanticIndex") -> int:
    """Vectors for the events that have none: a commit's event is made without the provenance check,
    and events made before any embedding model was installed have none either. Without them concepts
    stay skipped even after `mem reindex-embeddings`, and event retrieval cannot match them by meaning."""
    from crossmodalrag.index.embeddings import embed_by_length

    missing = store.conn.execute(
        "SELECT id, statement FROM memory_nodes WHERE level = 'event' AND vector IS NULL ORDER BY id"
    ).fetchall()
    # In batches, each committed: one call for all of them padded every statement into one tensor
    # (3.5 GB peak at 4,000 commits' events), and an interrupted run now keeps what it embedded.
    for start in range(0, len(missing), EVENTS_PER_COMMIT):
        rows = missing[start : start + EVENTS_PER_COMMIT]
        vectors = embed_by_length(semantic.embedder, [row[1] for row in rows], EVENT_EMBED_BATCH)
        with store.transaction() as conn:
            conn.executemany(
                "UPDATE memory_nodes SET vector = ? WHERE id = ?",
                [(vector.astype("float32").tobytes(), row[0]) for row, vector in zip(rows, vectors, strict=True)],
            )
    return len(missing)


def _states(store: Store) -> dict[int, tuple]:
    return {
        row[0]: tuple(row[1:])
        for row in store.conn.execute(
            "SELECT source_id, source_fingerprint, text_hash, model, prompt_version, status FROM memory_extractions"
        )
    }


def _needs_work(source: SourceRow, state: tuple | None, how: Extraction, report: EventsReport) -> bool:
    model, prompt = (GIT_MODEL, GIT_PROMPT) if source.source_type == "commit" else (how.model_id, PROMPT_VERSION)
    if state and state[0] == source.fingerprint and state[2:5] == (model, prompt, "done"):
        report.unchanged += 1
        return False
    if source.source_type != "commit" and how.llm is None:
        if state and state[0] == source.fingerprint and state[3:5] == (PROMPT_VERSION, "done"):
            report.unchanged += 1  # extracted by another model and unchanged since: kept, not waiting
            return False
        has_events = bool(state) and state[0] != source.fingerprint and state[4] in ("done", RECHECKED)
        if not has_events:
            _wait(source, report)
        return has_events  # re-anchored when only its chunks or path changed, else rechecked: _process tells
    return True


def _wait(source: SourceRow, report: EventsReport) -> None:
    report.waiting += 1
    report.waiting_sources.append({"source_id": source.id, "uri": source.uri})


class OutOfTime(Exception):
    """The time budget ran out between two windows of a source or during a call; `cost` is what its calls spent."""

    def __init__(self, cost: dict) -> None:
        super().__init__("the time budget ran out")
        self.cost = cost


def _process(
    store: Store,
    source: SourceRow,
    state: tuple | None,
    how: Extraction,
    report: EventsReport,
    deadline: float | None = None,
) -> bool:
    """Bring one source's events up to date; False when the deadline cut it off (nothing of it stored,
    so the next run starts it again)."""
    chunks = chunks_of(store.conn, source.id)
    digest = text_hash(chunks)
    if source.source_type == "commit":
        _record(store, source, digest, (GIT_MODEL, GIT_PROMPT), [_commit_event(source, chunks)], report)
        report.from_git += 1
        return True
    same_text = state is not None and state[1] == digest and state[3:5] == (PROMPT_VERSION, "done")
    if same_text and (how.llm is None or state[2] == how.model_id):  # a re-chunk: same events, new chunk ids
        reanchor(store, source, chunks)
        report.reanchored += 1
        return True
    if how.llm is None:
        _wait(source, report)
        report.events_waiting += _recheck(store, source, digest, state[2] if state else "", chunks, how)
        report.rechecked += 1
        return True
    report.extracted += 1
    try:
        nodes, error, cost = _extract(source, chunks, how, deadline)
    except OutOfTime as stopped:  # left as it was: the next run extracts it whole
        report.extracted -= 1
        _add_cost(report, stopped.cost)
        return False
    _add_cost(report, cost)
    if error:
        report.extracted -= 1  # counted once, as failed
        _fail(store, source, digest, how.model_id, error, cost)
        report.failed.append({"source_id": source.id, "uri": source.uri, "reason": error})
        return True
    report.unsupported += sum(not n.supported for n in nodes)
    _record(store, source, digest, (how.model_id, PROMPT_VERSION), nodes, report, cost)
    return True


def _add_cost(report: EventsReport, cost: dict) -> None:
    report.llm_calls += cost["calls"]
    report.prompt_chars += cost["prompt_chars"]
    report.completion_tokens += cost["completion_tokens"]


def _extract(
    source: SourceRow, chunks: list[ChunkRow], how: Extraction, deadline: float | None = None
) -> tuple[list[Node], str, dict]:
    """The source's events, window by window. Raises OutOfTime when the deadline passes between two
    windows (a long source of hundreds would otherwise overshoot --max-minutes by minutes) or during
    a model call, which is stopped there."""
    cost = {"calls": 0, "prompt_chars": 0, "completion_tokens": 0, "started": time.monotonic()}
    nodes: dict[str, Node] = {}
    conversation = source.source_type == "conversation"
    for number, group in enumerate(windows(chunks, how.window_chars)):
        if number and deadline is not None and time.monotonic() > deadline:
            raise OutOfTime(cost)
        when = (iso_time(_times(source, group)[0]) or "")[:10]  # the window's day: a journal's entries differ
        excerpts = [spoken(c.body)[: how.window_chars] for c in group]
        result = extract_window(how.llm, source.title, when, excerpts, how.constrained, conversation, deadline)
        cost["calls"] += result.calls
        cost["prompt_chars"] += result.prompt_chars * result.calls
        cost["completion_tokens"] += result.completion_tokens
        if result.out_of_time:
            raise OutOfTime(cost)
        if result.failure:  # a timeout or a refused prompt: this source fails, the run goes on
            return [], f"the model failed: {result.failure}", cost
        if result.error:
            return [], f"invalid model output after a retry: {result.error}", cost
        for event in result.events:
            node = _event_node(source, event.statement, event.type, [group[i] for i in event.cited])
            node.people, node.metadata["when"] = event.people, when  # known without the model: not asked
            if event.written:  # the subject corrected (extract.attributed): the model's sentence kept
                node.metadata["written"] = event.written
            nodes.setdefault(node.id, node)
    checked = check_provenance(list(nodes.values()), chunks, how.semantic, how.min_cosine)
    by_id = {c.id: c for c in chunks}
    for node in checked:
        _date_by_best_cited(node, source, by_id)
    return checked, "", cost


def _times(source: SourceRow, chunks: list[ChunkRow]) -> list[float | None]:
    """When each chunk was written or said: its own time, else its source's."""
    return [source.timestamp if c.said_at is None else c.said_at for c in chunks] or [source.timestamp]


def _event_node(source: SourceRow, statement: str, kind: str, cited: list[ChunkRow]) -> Node:
    times = [t for t in _times(source, cited) if t is not None]
    return Node(
        id=stable_id("event", source.uri, statement.lower()),
        level="event",
        title=statement[:80],
        statement=statement,
        kind=kind,
        project=source.project,
        first_time=min(times, default=None),  # the cited entries' days: a journal's, a chat continued later
        last_time=max(times, default=None),
        source_id=source.id,
        source_uri=source.uri,
        links=[Link(c.id, "cited") for c in cited],
        metadata={"anchors": {str(c.id): [c.char_start, c.char_end] for c in cited}},
    )


def _date_by_best_cited(node: Node, source: SourceRow, by_id: dict[int, ChunkRow]) -> None:
    """Date an event by the cited chunk that supports it best: it cites the context too ("Left Acme"
    under ## 2026-10-06 cited with the job under ## 2026-06-22), and the earliest cited one dated the
    change months before it happened. Its last time stays the latest cited one's."""
    cited = [link for link in node.links if link.role == "cited" and link.chunk_id in by_id]
    if not cited:
        return
    best = max(cited, key=lambda link: (link.score or 0.0, -link.chunk_id))
    when = _times(source, [by_id[best.chunk_id]])[0]
    if when is not None:
        node.first_time = when


def _commit_event(source: SourceRow, chunks: list[ChunkRow]) -> Node:
    """A commit is a change event: its subject, linked to the message chunk (no model involved)."""
    node = _event_node(source, source.title, "change", chunks[:1])
    node.links = [Link(c.id, "subject", 1.0) for c in chunks[:1]]
    node.people = [source.metadata["author"]] if source.metadata.get("author") else []
    return node


def _record(
    store: Store,
    source: SourceRow,
    digest: str,
    key: tuple[str, str],
    nodes: list[Node],
    report: EventsReport,
    cost: dict | None = None,
) -> None:
    """Replace the source's events and mark it done, in one transaction."""
    cost = cost or {"calls": 0, "prompt_chars": 0, "completion_tokens": 0, "started": time.monotonic()}
    with store.transaction() as conn:
        old = {row[0] for row in conn.execute("SELECT id FROM memory_nodes WHERE source_id = ?", (source.id,))}
        delete_nodes(conn, old - {n.id for n in nodes})
        report.events += write_nodes(conn, nodes)
        _save_state(conn, source, digest, key, "done", "", len(nodes), cost)


def _fail(store: Store, source: SourceRow, digest: str, model: str, reason: str, cost: dict) -> None:
    """Keep whatever events the source had; remember the failure so the next run retries it."""
    with store.transaction() as conn:
        _save_state(conn, source, digest, (model, PROMPT_VERSION), "failed", reason[:300], 0, cost)


def _save_state(conn, source: SourceRow, digest: str, key, status: str, reason: str, count: int, cost: dict) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO memory_extractions (source_id, source_fingerprint, text_hash, model, prompt_version,"
        " status, reason, events, llm_calls, prompt_tokens, completion_tokens, seconds, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            source.id, source.fingerprint, digest, *key, status, reason, count, cost["calls"],
            cost["prompt_chars"] // 4, cost["completion_tokens"], time.monotonic() - cost["started"], time.time(),
        ),
    )  # fmt: skip


def _recheck(store: Store, source: SourceRow, digest: str, model: str, chunks: list[ChunkRow], how: Extraction) -> int:
    """The source's text changed and no model can draw its events again. Closeness by embedding cannot
    tell whether the new text still says an event (a reversed decision is on the same topic), so an
    event stays only when a chunk it rested on is still there unchanged, or one line or sentence of the
    new text holds its words (provenance.says_verbatim). The rest wait for a model to re-read the
    source: out of retrieval, counted, and drawn again (or not) by the next build that has one, which
    the state's status asks for. Returns how many wait."""
    nodes = [_stored_event(row, source) for row in rows(store.conn, "level = 'event' AND source_id = ?", (source.id,))]
    vectors = dict(store.conn.execute("SELECT id, vector FROM memory_nodes WHERE source_id = ?", (source.id,)))
    for node in nodes:
        node.vector = vectors.get(node.id)
        relink_edited(node, chunks, how.min_cosine)
    cost = {"calls": 0, "prompt_chars": 0, "completion_tokens": 0, "started": time.monotonic()}
    with store.transaction() as conn:
        write_nodes(conn, nodes)
        reason = "edited since its events were drawn: waiting for a model"
        _save_state(conn, source, digest, (model, PROMPT_VERSION), RECHECKED, reason, len(nodes), cost)
    return sum(WAITING in node.metadata for node in nodes)


def _stored_event(row, source: SourceRow) -> Node:
    """An event as stored, without its links (the chunks they pointed at are gone)."""
    return Node(
        id=row["id"], level="event", title=row["title"], statement=row["statement"], kind=row["kind"],
        project=row["project"], people=json.loads(row["people"]), first_time=row["first_time"],
        last_time=row["last_time"], confidence=row["confidence"], supported=bool(row["supported"]),
        source_id=source.id, source_uri=source.uri, metadata=json.loads(row["metadata"]),
    )  # fmt: skip


def remove_orphans(store: Store) -> list[dict[str, Any]]:
    """Events whose source is gone (a sync saw the file deleted): removed, and listed so the build reports them."""
    with store.transaction() as conn:
        gone = conn.execute(
            "SELECT id, source_uri, statement FROM memory_nodes WHERE level = 'event' AND source_id IS NULL"
        ).fetchall()
        delete_nodes(conn, [row[0] for row in gone])
    return [{"id": row[0], "source_uri": row[1], "statement": row[2]} for row in gone]


def list_events(store: Store, source: str | None = None, kind: str | None = None, limit: int = 50) -> list[dict]:
    """Events (newest first) with their evidence locators, for `mem events` and the API. `source` is
    named as `mem log --source` and `mem forget` take it (uri, path, id, `mem://source/ID`, repo@sha), or
    as `mem forget --path` does (a chat export's file: all its sessions). Raises CMRAGError when it names
    no source or a sha prefix names more than one commit."""
    where, params = ["level = 'event'"], []
    if source:
        clause, named = events_filter(store, source)
        where.append(clause)
        params += named
    if kind:
        where.append("kind = ?")
        params.append(kind)
    found = rows(store.conn, " AND ".join(where), tuple(params), "first_time IS NULL, first_time DESC, id", limit)
    listed = with_evidence(store.conn, found)
    for item, row in zip(listed, found, strict=True):
        metadata = json.loads(row["metadata"])
        item["waiting"] = WAITING in metadata  # not judged unsupported: not judged yet
        item[NOT_IN_SOURCE] = metadata.get(NOT_IN_SOURCE, [])
    return listed
