"""Real-browser tests: Debian's chromium driven by playwright (pytest-playwright's `page` fixture).

Playwright's own browser download cannot work here, so the launch points at the system chromium. A
missing browser is a failure, not a skip: CI installs chromium (scripts/test) and these tests must run.
"""

from __future__ import annotations

import io
import os
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from crossmodalrag.api.app import create_app
from crossmodalrag.cli.main import main
from tests.api.helpers import SlowLLM, running_server, server_settings

CHROMIUM = os.environ.get("CMRAG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",  # this machine's closed network refuses them, noisily
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# What the stand-in model (a unit-test fake, not a real LLM) answers: it cites the first two pieces.
ANSWER = (
    "Answer: more code to own, and a simpler delimiter pass.\n"
    "It is about 140 lines instead of 50 [E1], written after the regex parser backtracked [E3]."
)


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no chromium at {CHROMIUM}: `apt-get install chromium` (scripts/test does)", pytrace=False)
    return {"executable_path": CHROMIUM, "args": CHROMIUM_FLAGS, "headless": True}


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("browser-sample") / "memory.db"
    with redirect_stdout(io.StringIO()):
        assert main(["seed-sample", "--db-path", str(db)]) == 0
    return db


@pytest.fixture(scope="session")
def model() -> SlowLLM:
    return SlowLLM(ANSWER, delay=0.03)  # ~30 tokens a second: streaming is visible, the test stays short


@pytest.fixture(scope="session")
def console_url(sample_db: Path, model: SlowLLM):
    app = create_app(server_settings(sample_db), llm_loader=lambda _: model)
    with running_server(app) as url:
        yield url


@pytest.fixture
def slow_console(sample_db):
    """A console whose model takes seconds per answer (half a second a word), and that model."""
    model = SlowLLM(ANSWER, delay=0.5)
    with running_server(create_app(server_settings(sample_db), llm_loader=lambda _: model)) as url:
        yield url, model


@pytest.fixture
def watched(page):
    """The page, with every console error, uncaught exception and CSP violation collected."""
    problems: list[str] = []
    page.on(
        "console",
        lambda message: (
            problems.append(f"console {message.type}: {message.text}") if message.type in ("error", "warning") else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));"
    )
    page.problems = problems
    yield page
    assert problems == []
