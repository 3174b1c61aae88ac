"""The FastAPI application behind `mem serve`: JSON API, console pages, static files, one guard."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from crossmodalrag import __version__
from crossmodalrag.answer.llm import LLM
from crossmodalrag.api.asking import Asker
from crossmodalrag.api.security import LocalGuard
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError, ConfigError, EvalError, MissingExtraError, StoreError
from crossmodalrag.memory_views import MemoryNotBuilt
from crossmodalrag.sources import BadFilter, SourceNotFound

HERE = Path(__file__).parent
STATUS = [  # the first matching class decides the HTTP status of a library error
    (SourceNotFound, 404),
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


def status_of(error: CMRAGError) -> int:
    return next((code for kind, code in STATUS if isinstance(error, kind)), 400)


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
    from crossmodalrag.api import console, routes

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

    @app.exception_handler(CMRAGError)
    async def library_error(request: Request, error: CMRAGError):
        if console.wants_html(request):
            return console.error_page(request, error, status_of(error))
        return JSONResponse({"error": error.message, "hint": error.hint}, status_code=status_of(error))

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, error: RequestValidationError):
        """A console page answers a bad parameter with its error page; the API with FastAPI's 422 JSON."""
        if not console.wants_html(request):
            return await request_validation_exception_handler(request, error)
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(part) for part in first.get("loc", ())[1:]) or "a parameter"
        problem = CMRAGError(f"{where}: {first.get('msg', 'not valid')}", "check the address, or start from the menu")
        return console.error_page(request, problem, 422)

    app.include_router(routes.router)
    app.include_router(console.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    if mcp_app is None:
        return LocalGuard(app, token, allow_hosts)
    from crossmodalrag.mcp_server.http import MCP_PATH, with_mcp

    return LocalGuard(with_mcp(app, mcp_app), token, allow_hosts, mcp_path=MCP_PATH)
