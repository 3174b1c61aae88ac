"""The FastAPI application behind `mem serve`: JSON API, console pages, static files, one guard."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from crossmodalrag import __version__
from crossmodalrag.answer.llm import LLM
from crossmodalrag.api import console, routes
from crossmodalrag.api.asking import Asker
from crossmodalrag.api.kept import AnswerNotKept, KeptAnswers
from crossmodalrag.api.routes import store_problem
from crossmodalrag.api.security import LocalGuard
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, ConfigError, EvalError, MissingExtraError, StoreError
from crossmodalrag.memory_views import MemoryNotBuilt
from crossmodalrag.sources import BadFilter, SourceNotFound

HERE = Path(__file__).parent
STATUS = [  # the first matching class decides the HTTP status of a library error
    (SourceNotFound, 404),
    (AnswerNotKept, 404),
    (EvalError, 404),
    (BadFilter, 400),
    (ConfigError, 400),
    (MemoryNotBuilt, 501),
    (MissingExtraError, 501),
    (StoreError, 503),
]
DESCRIPTION = (
    "The read-only HTTP API of a `mem` memory. Each JSON route returns exactly what its `mem … --json` twin "
    'prints. Errors are `{"error": …, "hint": …}`.'
)

ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "properties": {"error": {"type": "string"}, "hint": {"type": "string"}},
    "required": ["error", "hint"],
}


def status_of(error: CMRAGError) -> int:
    return next((code for kind, code in STATUS if isinstance(error, kind)), 400)


def parameter_problem(error: RequestValidationError) -> str:
    """One line naming the first bad parameter: `limit: Input should be a valid integer`."""
    first = error.errors()[0] if error.errors() else {}
    # loc is ("query", name, ...): what follows the name is pydantic's (the member of a union it tried,
    # a list item's index), not the person's
    location = first.get("loc", ())
    where = str(location[1]) if len(location) > 1 else "a parameter"
    return f"{where}: {first.get('msg', 'not valid')}"


def route_path(request: Request) -> str:
    """The route as /docs lists it (`/sources/{source_id}`), not the address as typed (`/sources/abc`)."""
    return getattr(request.scope.get("route"), "path", None) or request.url.path


def http_problem(request: Request, error: StarletteHTTPException) -> CMRAGError:
    """Starlette's own errors (no such route or static file, a method a route lacks) as message and hint."""
    if error.status_code == 404:
        hint = "use the navigation bar" if console.wants_html(request) else "the routes are listed at /docs"
        return CMRAGError(f"nothing at {request.url.path}", hint)
    return CMRAGError(str(error.detail), "the routes are listed at /docs")


def error_reply(request: Request, problem: CMRAGError, status: int, headers: dict[str, str] | None = None):
    """The console's HTML error page for a console page, else the API's documented JSON error."""
    if console.wants_html(request):
        reply = console.error_page(request, problem, status)
    else:
        reply = JSONResponse({"error": problem.message, "hint": problem.hint}, status_code=status)
    reply.headers.update(headers or {})
    return reply


def with_error_schema(app: FastAPI) -> Callable[[], dict]:
    """The OpenAPI schema with the 422 replies documented as they are sent: our error shape, not
    FastAPI's `{"detail": [...]}`."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = generate()
            schemas = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            schemas["Error"] = ERROR_SCHEMA
            for operation in (op for methods in schema["paths"].values() for op in methods.values()):
                if "422" in operation.get("responses", {}):
                    operation["responses"]["422"] = {
                        "description": "a parameter is missing or not valid",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    }
        return app.openapi_schema

    return openapi


def create_app(
    settings: Settings,
    token: str | None = None,
    allow_hosts: frozenset[str] = frozenset(),
    llm_loader: Callable[[Settings], LLM] | None = None,
    mcp_app: Callable | None = None,
) -> LocalGuard:
    """The whole server as one ASGI app, wrapped in the security guard (see api/security.py).
    `llm_loader` replaces the configured model (tests use a scripted stand-in); `mcp_app` (from
    mcp_server.http) answers /mcp behind the same guard."""
    app = FastAPI(
        title="mem",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,  # Swagger UI loads from a CDN and runs inline script: /docs is our own page instead
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.asker = Asker(settings, llm_loader)
    app.state.ask_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="mem-ask")
    app.state.token_required = bool(token)
    app.state.kept = KeptAnswers()

    @app.exception_handler(CMRAGError)
    async def library_error(request: Request, error: CMRAGError):
        return error_reply(request, error, status_of(error))

    @app.exception_handler(sqlite3.DatabaseError)
    async def database_error(request: Request, error: sqlite3.DatabaseError):
        problem = store_problem(request, error)
        return error_reply(request, problem, status_of(problem))

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, error: RequestValidationError):
        html = console.wants_html(request)
        hint = (
            "check the address, or start from the menu" if html else f"see /docs for {route_path(request)}'s parameters"
        )
        return error_reply(request, CMRAGError(parameter_problem(error), hint), 422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        return error_reply(request, http_problem(request, error), error.status_code, error.headers)

    app.openapi = with_error_schema(app)

    app.include_router(routes.router)
    app.include_router(console.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    if mcp_app is None:
        return LocalGuard(app, token, allow_hosts)
    from crossmodalrag.mcp_server.http import MCP_PATH, with_mcp

    return LocalGuard(with_mcp(app, mcp_app), token, allow_hosts, mcp_path=MCP_PATH)
