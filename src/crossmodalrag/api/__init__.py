"""`mem serve`: the read-only HTTP API and web console (the `[ui]` extra: FastAPI, uvicorn, Jinja2)."""

from __future__ import annotations

from importlib.util import find_spec

from crossmodalrag.errors import MissingExtraError

UI_PACKAGES = ("fastapi", "uvicorn", "jinja2", "markdown_it", "nh3")
UI_INSTALL = 'pip install -e ".[ui]"'


def require_ui() -> None:
    """Raises MissingExtraError naming the install command when any package of the ui extra is missing."""
    missing = [name for name in UI_PACKAGES if find_spec(name) is None]
    if missing:
        raise MissingExtraError(f"`mem serve` needs the ui extra ({', '.join(missing)} missing)", UI_INSTALL)
