"""The console: server-rendered pages (Jinja2) over the same library helpers as the JSON API.

htmx swaps fragments (a request with `HX-Request` gets the fragment alone); one small script streams
answers and draws charts. Nothing here runs inline script or style: the CSP forbids both.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from crossmodalrag import __version__, wording
from crossmodalrag.answer.evidence import MAX_QUESTION_CHARS
from crossmodalrag.api.markup import render_diff, render_markdown
from crossmodalrag.api.routes import DATE_PARAMETERS, MAX_ITEMS, VIEW_OPTIONS, Kind, Reader, one_value_each
from crossmodalrag.api.security import is_console_path
from crossmodalrag.errors import CMRAGError
from crossmodalrag.memory.drift import sparkline
from crossmodalrag.memory_views import DEFAULTS, MEMORY_VIEWS, MemoryNotBuilt, memory_view
from crossmodalrag.retrieval_mode import stats_report
from crossmodalrag.sources import list_sources, source_detail
from crossmodalrag.store import Store

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["markdown"] = render_markdown
templates.env.filters["diff"] = render_diff
templates.env.filters["counted"] = wording.counted  # "1 episode", "2 episodes"
templates.env.globals["version"] = __version__
templates.env.globals["max_question_chars"] = MAX_QUESTION_CHARS
router = APIRouter(include_in_schema=False, dependencies=[Depends(one_value_each)])

NAV = [
    ("ask", "/", "Ask"),
    ("sources", "/ui/sources", "Sources"),
    ("timeline", "/ui/timeline", "Timeline"),
    ("concepts", "/ui/concepts", "Concepts"),
    ("drift", "/ui/drift", "Drift"),
    ("forgetting", "/ui/forgetting", "Forgetting"),
    ("recall", "/ui/recall", "Recall"),
    ("stats", "/ui/stats", "Stats"),
    ("docs", "/docs", "API"),
]
templates.env.globals["nav"] = NAV


def wants_html(request: Request) -> bool:
    """A console address (a person's browser): its errors are the HTML error page, the API's are JSON."""
    return is_console_path(request.url.path)


def is_fragment(request: Request) -> bool:
    """An htmx swap wants the fragment alone; htmx restoring history it had no snapshot of wants the page."""
    headers = request.headers
    return headers.get("hx-request") == "true" and headers.get("hx-history-restore-request") != "true"


def page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {"fragment": is_fragment(request), **context}, status_code=status)


def error_page(request: Request, error: CMRAGError, status: int) -> HTMLResponse:
    return page(request, "error.html", status, active="", error=error)


@router.get("/", response_class=HTMLResponse)
def ask_view(request: Request, q: Annotated[str, Query(max_length=MAX_QUESTION_CHARS)] = "") -> HTMLResponse:
    return page(request, "ask.html", active="ask", q=q)


@router.get("/ui/sources", response_class=HTMLResponse)
def sources_view(
    request: Request,
    store: Reader,
    kind: Kind | Literal[""] | None = None,  # "": the filter form's "all", which its paging links keep
    folder: Annotated[str | None, Query(max_length=500)] = None,
    since: Annotated[str | None, Query(max_length=32)] = None,
    until: Annotated[str | None, Query(max_length=32)] = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> HTMLResponse:
    chosen = (kind or None, folder or None, since or None, until or None)
    listing = list_sources(store, *chosen, 50, offset, names=DATE_PARAMETERS).to_dict()
    return page(request, "sources.html", active="sources", listing=listing)


@router.get("/ui/sources/{source_id}", response_class=HTMLResponse)
def source_view(
    request: Request,
    store: Reader,
    source_id: Annotated[int, PathParam(ge=1, le=2**62)],
    chunk: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    detail = source_detail(store, source_id)
    cited = chunk if any(c["id"] == chunk for c in detail["chunks"]) else None
    # A citation from before the source was re-read names a chunk it no longer has: say so, rather
    # than show the source's new text as though it were what was cited.
    gone = chunk is not None and cited is None
    context = {"source": detail, "cited": cited, "cited_gone": gone, "sections": _sections(detail)}
    return page(request, "source.html", active="sources", **context)


def _sections(detail: dict[str, Any]) -> list[dict[str, Any]]:
    """Chunks with the heading to show above each (notes: when the heading path changes)."""
    sections, previous = [], None
    for chunk in detail["chunks"]:
        headings = chunk.get("headings") or []
        heading = None
        if detail["source_type"] == "note" and headings[1:] and headings != previous:
            heading = {"level": min(len(headings), 6), "text": headings[-1]}
        previous = headings
        sections.append({**chunk, "heading": heading})
    return sections


@router.get("/ui/stats", response_class=HTMLResponse)
def stats_view(request: Request, store: Reader) -> HTMLResponse:
    stats = stats_report(store, request.app.state.settings)
    series = {"months": [m["month"] for m in stats["per_month"]], "sources": [m["sources"] for m in stats["per_month"]]}
    return page(request, "stats.html", active="stats", stats=stats, chart=Markup(_json_island(series)))


def _json_island(data: Any) -> str:
    """JSON for a `<script type="application/json">` block: data, never executed; `<` escaped so no
    string inside can close the block."""
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# The console's pages show every level, as many as a page holds; the page names the command that
# prints the same data (the CLI's own default for forgetting is the concept level alone, 10 items).
# A page's query parameters (?limit=, ?top=, ...) are those of its JSON route, and win over these.
CONSOLE_OPTIONS = {"forgetting": {"level": "all", "top": 20}, "recall": {"level": "all", "top": 20}}
LISTED = {  # view -> the payload's list, and the option counting it
    "timeline": ("episodes", "limit"),
    "concepts": ("concepts", "top"),
    "drift": ("concepts", "top"),
    "distill": ("nodes", "top"),
    "usage": ("targets", "top"),
    "forgetting": ("items", "top"),
    "recall": ("cards", "top"),
}


def _memory_page(view: str):
    parsed = Depends(VIEW_OPTIONS[view])  # a default, not an Annotated hint: see routes._memory_route

    def show(request: Request, store: Reader, options: dict[str, Any] = parsed) -> HTMLResponse:
        given = {name: value for name, value in options.items() if name in request.query_params}
        return memory_page(request, store, view, {**CONSOLE_OPTIONS.get(view, {}), **given}, given)

    show.__name__ = f"{view.replace('-', '_')}_page"
    return show


def memory_page(
    request: Request, store: Reader, view: str, options: dict[str, Any], given: dict[str, Any]
) -> HTMLResponse:
    base, shows = MEMORY_VIEWS[view]
    flags = (f" --{name.replace('_', '-')} {shlex.quote(str(value))}" for name, value in options.items() if value)
    command = base + "".join(flags)
    try:
        data, more = _listing(store, view, request.app.state.settings, options)
    except MemoryNotBuilt as error:
        return page(request, "empty.html", active=view, view=view, shows=shows, command=command, error=error)
    if more and more["next"]:  # the next page keeps the other options given
        more["href"] = f"/ui/{view}?" + urlencode({**given, more["option"]: more["next"]})
    elif more:  # past what one reply holds: the command lists them all
        more["command"] = f"{base} --{more['option']} N"
    spark = lambda windows: sparkline([w["drift"] for w in windows])  # noqa: E731
    context = {"view": view, "shows": shows, "command": command, "data": data, "spark": spark, "more": more}
    return page(request, "memory.html", active=view, **context)


def _listing(store: Store, view: str, settings, options: dict[str, Any]) -> tuple[dict[str, Any], dict | None]:
    """The view's payload with as many items as asked, and whether more exist (asked for one more):
    None, or the count shown, the count option and the next page's count (None past MAX_ITEMS)."""
    if view not in LISTED:
        return memory_view(store, view, settings, options), None
    key, counted = LISTED[view]
    wanted = {**DEFAULTS[view], **options}[counted]
    data = memory_view(store, view, settings, {**options, counted: wanted + 1})
    items = data[key]
    if len(items) <= wanted:
        return data, None
    # the timeline keeps the latest episodes, oldest first: the one too many is its first
    data[key] = items[1:] if view == "timeline" else items[:wanted]
    following = min(wanted * 2, MAX_ITEMS) if wanted < MAX_ITEMS else None
    return data, {"shown": wanted, "option": counted, "next": following}


for _view in MEMORY_VIEWS:
    router.get(f"/ui/{_view}", response_class=HTMLResponse)(_memory_page(_view))


@router.get("/ui/{view}", response_class=HTMLResponse)
def unknown_page(view: Annotated[str, PathParam(max_length=40)]) -> HTMLResponse:
    raise_not_found(view)


def raise_not_found(view: str) -> None:
    from crossmodalrag.sources import SourceNotFound

    raise SourceNotFound(f"no console page {view!r}", "use the navigation bar")


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """The API reference, rendered from the OpenAPI schema (Swagger UI would need a CDN and inline script)."""
    schema = request.app.openapi()
    routes = []
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            routes.append(
                {
                    "method": method.upper(),
                    "path": path,
                    "summary": operation.get("summary") or "",
                    "description": operation.get("description") or "",
                    "parameters": [
                        {
                            "name": p["name"],
                            "where": p["in"],
                            "required": p.get("required", False),
                            "description": p.get("description", ""),
                            "schema": json.dumps(p.get("schema", {}), sort_keys=True),
                        }
                        for p in operation.get("parameters", [])
                    ],
                    "responses": sorted(operation.get("responses", {})),
                }
            )
    return page(request, "docs.html", active="docs", routes=routes, info=schema["info"])
