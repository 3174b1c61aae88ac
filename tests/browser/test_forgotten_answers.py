"""Back or a reload to an answer after `mem forget`: the erased text never comes back from the tab.

The tab kept the whole answer (evidence excerpts included) in `history.state`, which Chromium also
writes to its profile on disk; a reload after `mem forget` showed the forgotten text again."""

from __future__ import annotations

import io
import sqlite3
from contextlib import redirect_stdout

import httpx
from playwright.sync_api import expect

from crossmodalrag.api.app import create_app
from crossmodalrag.cli.main import main
from tests.api.helpers import running_server, server_settings
from tests.browser.test_console import PARSER_TRADEOFFS, wait_final


def test_after_forget_reload_and_back_ask_again_instead_of_showing_the_erased_text(
    watched, sample_db, model, tmp_path
) -> None:
    db = tmp_path / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)  # this test forgets a source: the shared sample stays whole
    page = watched
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/ask/stream" in request.url else None)
    with running_server(create_app(server_settings(db), llm_loader=lambda _: model)) as url:
        page.goto(url + "/?" + str(httpx.QueryParams({"q": PARSER_TRADEOFFS})))
        wait_final(page)
        first = page.locator("#evidence li").first
        erased = first.locator(".excerpt").inner_text()
        source_id = first.locator("a.ev-open").get_attribute("href").split("?")[0].rsplit("/", 1)[1]
        assert erased not in page.evaluate("JSON.stringify(history.state)")  # the tab keeps no text
        page.reload()  # while the evidence stands, the answer is shown again without asking again
        wait_final(page)
        expect(page.locator("#answer-status")).to_contain_text("kept from earlier")
        assert erased in page.inner_text("#evidence") and len(asked) == 1, asked

        with redirect_stdout(io.StringIO()):
            assert main(["forget", source_id, "--yes", "--db-path", str(db)]) == 0

        page.reload()
        wait_final(page)
        expect(page.locator("#answer-status")).not_to_contain_text("kept from earlier")
        assert erased not in page.inner_text("#evidence")
        assert len(asked) == 2, asked  # asked again, of what memory holds now
        page.click("nav >> text=Stats")
        expect(page.locator("#month-chart")).to_have_count(1)
        page.go_back()
        wait_final(page)
        assert erased not in page.inner_text("#evidence")
    # the browser logs each 404 of /ask/kept (the answer is no longer kept): nothing else is expected
    page.problems[:] = [problem for problem in page.problems if "status of 404" not in problem]
