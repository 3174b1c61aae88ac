"""The memory-hierarchy views in a real browser, over the sample with its hierarchy built."""

from __future__ import annotations

import io
import sqlite3
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from playwright.sync_api import expect

from crossmodalrag.api.app import create_app
from crossmodalrag.cli.main import main
from tests.api.helpers import running_server, server_settings


@pytest.fixture(scope="module")
def built_console_url(sample_db: Path, tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("browser-built") / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
    with redirect_stdout(io.StringIO()):
        assert main(["build-memory", "--db-path", str(db)]) == 0
    with running_server(create_app(server_settings(db))) as url:
        yield url


def test_timeline_evidence_opens_the_cited_chunk(watched, built_console_url) -> None:
    page = watched
    page.goto(built_console_url + "/ui/timeline")
    items = page.locator(".memory-list > li")
    expect(items.first).to_contain_text("quillmark")
    link = items.first.locator(".evidence-links a").first
    href = link.get_attribute("href")
    assert "chunk=" in href
    link.click()
    expect(page.locator(".chunk.cited")).to_have_count(1)


@pytest.mark.parametrize("view", ["forgetting", "recall", "memory-stats", "concepts", "distill", "usage"])
def test_memory_views_render_without_errors(watched, built_console_url, view) -> None:
    page = watched
    page.goto(f"{built_console_url}/ui/{view}")
    expect(page.locator("h1")).to_have_text(view.capitalize())
    expect(page.locator(".empty-state")).to_have_count(0)
    if view == "forgetting":
        expect(page.locator(".memory-list > li").first).to_contain_text("importance")


def test_a_view_its_options_leave_empty_says_so(watched, built_console_url) -> None:
    """It said "Nothing to show yet for this view.", which reads as a memory not built yet."""
    page = watched
    page.goto(built_console_url + "/ui/timeline?project=nonexistent")
    empty = page.locator("p.empty")
    expect(empty).to_contain_text("Nothing matches --project nonexistent")
    empty.get_by_role("link", name="show all").click()
    expect(page.locator(".memory-list > li").first).to_contain_text("quillmark")
