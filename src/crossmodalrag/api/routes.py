"""The JSON API: each route parses its query, calls the library helper its `mem … --json` twin calls,
and returns that payload unchanged (tests pin every route against its CLI twin)."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
from functools import partial
from typing import Annotated, Any, AsyncIterator, Iterator, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse

from crossmodalrag import __version__
from crossmodalrag.answer.evidence import MAX_QUESTION_CHARS, require_question
from crossmodalrag.api.asking import AskCancelled, with_match
from crossmodalrag.api.kept import AnswerNotKept
from crossmodalrag.config import PROFILES
from crossmodalrag.errors import CMRAGError, StoreError
from crossmodalrag.evals.report import run_retrieval_eval
from crossmodalrag.memory_views import DEFAULTS, MemoryNotBuilt, memory_view
from crossmodalrag.retrieval_mode import retrieval_mode, stats_report
from crossmodalrag.sources import SOURCE_KINDS, image_png, list_sources, pdf_page_png, source_detail
from crossmodalrag.store import Store
from crossmodalrag.store.failures import explain

REPEATABLE = frozenset({"modality"})  # the only list-valued query parameter


def one_value_each(request: Request) -> None:
    """FastAPI keeps the last of a repeated single-valued parameter (`/sources?kind=note&kind=pdf` would
    list PDFs only): refuse the repeat as a bad parameter rather than answer what was not asked."""
    params = request.query_params
    for name in sorted(set(params.keys()) - REPEATABLE):
        if len(params.getlist(name)) > 1:
            raise _bad_parameter(name, "given more than once: it takes one value")


def known_parameters_only(request: Request) -> None:
    """FastAPI ignores a parameter its route does not take: `/sources?knd=pdf` would list every kind and
    `/ask?q=x&topk=3` answer with the default evidence count. A program calling the API wants the typo
    named, so an unknown parameter is refused with the ones the route takes."""
    route = request.scope.get("route")
    if route is None:
        return
    known = _route_parameters(route)
    for name in sorted(set(request.query_params.keys()) - known):
        takes = ", ".join(sorted(known - {"token"})) or "no parameters"
        raise _bad_parameter(name, f"not a parameter of this route (it takes: {takes})")


def _route_parameters(route: Any) -> frozenset[str]:
    """The query parameter names a route takes, and `token` (the login link's, handled before routes):
    read once per route, kept on it (routes are unhashable), not per request."""
    known = getattr(route, "query_parameters", None)
    if known is None:
        known = route.query_parameters = frozenset(_query_names(route.dependant) | {"token"})
    return known


def _query_names(dependant: Any) -> set[str]:
    """The query parameter names a route reads, its dependencies' included."""
    names = {parameter.alias for parameter in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _bad_parameter(name: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("query", name), "msg": message, "type": "value_error"}])


router = APIRouter(dependencies=[Depends(one_value_each), Depends(known_parameters_only)])

Modality = Literal["text", "code", "pdf", "image"]
Profile = Literal[PROFILES]  # type: ignore[valid-type]
Kind = Literal[SOURCE_KINDS]  # type: ignore[valid-type]
Match = Literal["any", "all", "phrase"]
Level = Literal["evidence", "event", "episode", "concept"]
Strategy = Literal["direct", "episodic", "fusion"]
DATE_PARAMETERS = ("since", "until")  # a bad date's message names the parameter, not `mem sources`' flag
POLL_SECONDS = 0.25  # how often a waiting ask checks that its client is still there
CLIENT_CLOSED = 499  # nginx's "client closed request": what the access log shows for an abandoned /ask
log = logging.getLogger(__name__)


def store_problem(request: Request, error: sqlite3.DatabaseError) -> StoreError:
    """A SQLite error that reached a route (a damaged file, a lock held too long) as the CLI words it: a
    StoreError, so a 503 (the store is unusable until someone acts; the server itself is fine). The
    server's log gets one line instead of a traceback: the reply already says what is wrong."""
    problem = StoreError(*explain(error))
    log.warning("%s %s: %s", request.method, request.url.path, problem.message)
    return problem


def reader(request: Request) -> Iterator[Store]:
    """A read-only connection for one request (from the pool the asker keeps)."""
    with request.app.state.asker.readers.reader() as store:
        yield store


Reader = Annotated[Store, Depends(reader)]


class AskParams:
    """The query parameters of /ask and /ask/stream, named as `mem ask`'s flags."""

    def __init__(
        self,
        q: Annotated[str, Query(min_length=1, max_length=MAX_QUESTION_CHARS, description="the question")],
        top_k: Annotated[int | None, Query(ge=1, le=50, description="how many pieces of evidence")] = None,
        profile: Annotated[Profile | None, Query(description="ranking profile when vectors exist")] = None,
        level: Annotated[Level, Query(description="retrieve at this memory level")] = "evidence",
        modality: Annotated[list[Modality] | None, Query(description="only this kind of evidence (repeatable)")] = None,
        no_llm: Annotated[bool, Query(description="deterministic evidence answer, no language model")] = False,
        match: Annotated[
            Match | None, Query(description="any query term (default), all of them, or the phrase")
        ] = None,
        strategy: Annotated[
            Strategy | None, Query(description="recall strategy for conversations (default: the configured one)")
        ] = None,
        after: Annotated[str | None, Query(max_length=40, description="only evidence dated on or after (ISO)")] = None,
        before: Annotated[str | None, Query(max_length=40, description="only evidence dated before (ISO)")] = None,
    ) -> None:
        self.q = require_question(q)
        self.options = {
            "top_k": top_k,
            "profile": profile,
            "modalities": tuple(modality or ()),
            "no_llm": no_llm,
            "match": match,
            "level": level,
            "strategy": strategy,
            "after": after,
            "before": before,
        }


@router.get("/health", tags=["meta"], summary="liveness, version and database summary")
def health(request: Request, store: Reader) -> dict[str, Any]:
    counts = dict(store.conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY 1 ORDER BY 1"))
    return {
        "status": "ok",
        "version": __version__,
        "database": store.location,
        "read_only": True,
        "sources": counts,
        "token_required": request.app.state.token_required,
        "retrieval": retrieval_mode(store, request.app.state.settings),
    }


NOT_BUILT = {501: {"description": "the memory hierarchy is not built yet (run `mem build-memory`)"}}


@router.get("/ask", tags=["ask"], responses=NOT_BUILT, summary="answer a question (the payload of `mem ask --json`)")
async def ask(request: Request, params: Annotated[AskParams, Depends()]) -> dict[str, Any]:
    """The blocking ask runs in a worker, as the stream's does, so that a client hanging up stops it:
    a retried call would otherwise queue behind the abandoned one for the one model."""
    cancelled = threading.Event()
    work = asyncio.get_running_loop().run_in_executor(
        request.app.state.ask_pool,
        partial(request.app.state.asker.ask, params.q, **params.options, cancelled=cancelled),
    )
    try:
        if not await _finished_while_connected(request, work):
            work.add_done_callback(_outcome_unread)
            return Response(status_code=CLIENT_CLOSED)
        return work.result().to_dict()
    finally:
        cancelled.set()  # a no-op once the worker finished; stops generation when the client left


async def _finished_while_connected(request: Request, work: asyncio.Future) -> bool:
    """Wait for `work`; False as soon as the client hangs up first (checked every POLL_SECONDS)."""
    while not work.done():
        await asyncio.wait({work}, timeout=POLL_SECONDS)
        if not work.done() and await request.is_disconnected():
            return False
    return True


def _outcome_unread(work: asyncio.Future) -> None:
    """Nobody is left to tell how an abandoned ask ended (AskCancelled, most often): read it so that
    asyncio does not log it as an exception never retrieved."""
    if not work.cancelled():
        work.exception()


@router.get(
    "/ask/stream",
    tags=["ask"],
    summary="answer as JSON lines: token events, then exactly one answer or error event",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/jsonl": {}}}, **NOT_BUILT},
)
async def ask_stream(request: Request, params: Annotated[AskParams, Depends()]) -> StreamingResponse:
    return StreamingResponse(_events(request, params), media_type="application/jsonl")


async def _events(request: Request, params: AskParams) -> AsyncIterator[str]:
    """Run the blocking ask in a worker; relay its tokens; always end with one answer or error event."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    cancelled = threading.Event()
    done = object()

    def emit(event: Any) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    def work() -> None:
        try:
            answer = request.app.state.asker.ask(
                params.q,
                **params.options,
                on_text=lambda text: emit({"type": "token", "text": text}),
                cancelled=cancelled,
            )
            payload = answer.to_dict()
            # `kept`: the id the console keeps in its history entry to show this answer again (api/kept.py)
            emit({"type": "answer", **payload, "kept": request.app.state.kept.keep(payload)})
        except AskCancelled:
            pass
        except CMRAGError as error:
            emit({"type": "error", "error": error.message, "hint": error.hint})
        except sqlite3.DatabaseError as error:
            problem = store_problem(request, error)
            emit({"type": "error", "error": problem.message, "hint": problem.hint})
        except Exception as error:  # noqa: BLE001 - the final event must arrive whatever happened
            emit(
                {"type": "error", "error": f"unexpected {type(error).__name__}: {error}", "hint": "see the server log"}
            )
        finally:
            emit(done)

    loop.run_in_executor(request.app.state.ask_pool, work)
    try:
        while True:
            try:
                event = await asyncio.wait_for(events.get(), POLL_SECONDS)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    return
                continue
            if event is done:
                return
            yield json.dumps(event, ensure_ascii=False) + "\n"
    finally:
        cancelled.set()  # a no-op once the worker finished; stops generation when the client left


KeptId = Annotated[str, Path(min_length=1, max_length=64, description="the `kept` of a streamed answer")]


@router.get(
    "/ask/kept/{kept_id}",
    tags=["ask"],
    responses={404: {"description": "no such answer kept, or some of its evidence was forgotten since"}},
    summary="a finished answer of /ask/stream again, while all its evidence is still stored",
)
def kept_answer(request: Request, store: Reader, kept_id: KeptId) -> dict[str, Any]:
    """What the console shows on Back or a reload instead of asking again (api/kept.py)."""
    payload = request.app.state.kept.get(store, kept_id)
    if payload is None:
        raise AnswerNotKept("that answer is no longer kept", "ask the question again")
    return payload


@router.get("/sources", tags=["sources"], summary="sources by kind, folder and date (`mem sources --json`)")
def sources(
    store: Reader,
    kind: Kind | None = None,
    folder: Annotated[str | None, Query(max_length=500)] = None,
    since: Annotated[str | None, Query(max_length=32, description="YYYY-MM-DD")] = None,
    until: Annotated[str | None, Query(max_length=32, description="YYYY-MM-DD, inclusive")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> dict[str, Any]:
    return list_sources(store, kind, folder, since, until, limit, offset, names=DATE_PARAMETERS).to_dict()


SourceId = Annotated[int, Path(ge=1, le=2**62, description="the database id (`source_id` in evidence)")]


@router.get("/sources/{source_id}", tags=["sources"], summary="one source and its chunks (`mem source ID --json`)")
def source(store: Reader, source_id: SourceId) -> dict[str, Any]:
    return source_detail(store, source_id)


PNG = {200: {"content": {"image/png": {}}, "description": "a PNG image"}}


@router.get("/sources/{source_id}/page/{page}.png", tags=["sources"], response_class=Response, responses=PNG)
def pdf_page(
    store: Reader,
    source_id: SourceId,
    page: Annotated[int, Path(ge=1, le=100_000)],
    chunk: Annotated[int | None, Query(ge=1, le=2**62, description="box this chunk's text")] = None,
) -> Response:
    """A PDF page rendered as an image, the cited chunk's text boxed where the text layer allows."""
    return Response(pdf_page_png(store, source_id, page, chunk), media_type="image/png")


@router.get("/sources/{source_id}/image", tags=["sources"], response_class=Response, responses=PNG)
def image(store: Reader, source_id: SourceId) -> Response:
    """An ingested image, re-encoded as a plain PNG."""
    return Response(image_png(store, source_id), media_type="image/png")


@router.get("/stats", tags=["sources"], summary="what memory holds (`mem stats --json`)")
def stats(request: Request, store: Reader) -> dict[str, Any]:
    return stats_report(store, request.app.state.settings)


@router.get(
    "/eval",
    tags=["eval"],
    responses=NOT_BUILT,
    summary="retrieval metrics on the stored eval queries (`mem eval --json`)",
)
def evaluation(
    request: Request,
    store: Reader,
    top_k: Annotated[int | None, Query(ge=1, le=50)] = None,
    query_prefix: Annotated[str | None, Query(max_length=200)] = None,
    profile: Profile | None = None,
    modality: Annotated[list[Modality] | None, Query()] = None,
    match: Match | None = None,
    level: Annotated[Level, Query(description="score the evidence drilled down from this level")] = "evidence",
) -> dict[str, Any]:
    settings = with_match(request.app.state.settings, match)
    return run_retrieval_eval(store, settings, top_k, query_prefix, profile, tuple(modality or ()), level).report


MAX_ITEMS = 500  # the most a memory view lists in one reply (the CLI has no cap; its defaults are far below)
Many = Annotated[int, Query(ge=1, le=MAX_ITEMS)]
MinSupport = Annotated[int, Query(ge=1, le=10_000, description="episodes/concepts with at least N events")]
NodeLevel = Literal["event", "episode", "concept", "all"]
Latest = Annotated[int, Query(ge=1, le=MAX_ITEMS, description="how many of the latest episodes")]
Project = Annotated[str | None, Query(max_length=500, description="only this project (folder, repository or its name)")]


def timeline_options(limit: Latest = DEFAULTS["timeline"]["limit"], project: Project = None) -> dict[str, Any]:
    return {"limit": limit, "project": project or None}


def concepts_options(top: Many = DEFAULTS["concepts"]["top"]) -> dict[str, Any]:
    return {"top": top}


def drift_options(
    top: Many = DEFAULTS["drift"]["top"], min_support: MinSupport = DEFAULTS["drift"]["min_support"]
) -> dict[str, Any]:
    return {"top": top, "min_support": min_support}


def distill_options(top: Many = DEFAULTS["distill"]["top"]) -> dict[str, Any]:
    return {"top": top}


def usage_options(top: Many = DEFAULTS["usage"]["top"]) -> dict[str, Any]:
    return {"top": top}


def no_options() -> dict[str, Any]:
    return {}


def ranked_options(view: str):
    """forgetting and recall take what their CLI twins take, with the same defaults."""
    defaults = DEFAULTS[view]

    def options(
        level: NodeLevel = defaults["level"],
        top: Many = defaults["top"],
        min_support: MinSupport = defaults["min_support"],
    ) -> dict[str, Any]:
        return {"level": level, "top": top, "min_support": min_support}

    return options


# each memory view's query parameters: its `mem <view>` command's options, named as its flags
VIEW_OPTIONS = {
    "memory-stats": no_options,
    "concepts": concepts_options,
    "timeline": timeline_options,
    "drift": drift_options,
    "distill": distill_options,
    "usage": usage_options,
    "forgetting": ranked_options("forgetting"),
    "recall": ranked_options("recall"),
}


def _memory_route(view: str):
    # a default, not an Annotated hint: hints are strings here (__future__), and `view` is no global
    parsed = Depends(VIEW_OPTIONS[view])

    def route(request: Request, store: Reader, options: dict[str, Any] = parsed) -> dict[str, Any]:
        return memory_view(store, view, request.app.state.settings, options)

    route.__name__ = f"memory_{view.replace('-', '_')}"
    return route


# The API never writes: where `mem recall` has a model write a card and keeps it, /recall shows the template one.
SUMMARY_NOTES = {"recall": " (cards kept; template cards where none is kept yet)"}
for _view in VIEW_OPTIONS:
    summary = f"memory hierarchy: `mem {_view} --json`{SUMMARY_NOTES.get(_view, '')}"
    router.get(f"/{_view}", tags=["memory"], responses=NOT_BUILT, summary=summary)(_memory_route(_view))

__all__ = ["router", "MemoryNotBuilt"]
