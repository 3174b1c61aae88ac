"""The console in a real browser: streaming, citations that open their evidence, PDF pages, charts, keys,
phone width, and no console error or CSP violation on any view."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout

import httpx
import pytest
from playwright.sync_api import expect

from crossmodalrag.api.app import create_app
from crossmodalrag.cli.main import main
from tests.api.helpers import running_server, server_settings

PARSER_TRADEOFFS = "What were the trade-offs of the hand-written tokenizer?"
RATE_LIMIT = "What happens when a plugin exceeds the render rate limit?"
MANY = re.compile(r"^([3-9]|\d\d+)$")  # three tokens or more


def wait_final(page, timeout: float = 15_000) -> None:
    expect(page.locator("#answer")).to_have_attribute("data-state", "final", timeout=timeout)


def test_answer_streams_and_citation_opens_the_cited_heading(watched, console_url) -> None:
    page = watched
    page.goto(console_url + "/")
    page.fill("#q", PARSER_TRADEOFFS)
    page.click("#ask-button")
    # Tokens arrive before the final answer event: seen mid-stream, not only at the end.
    # (Locator assertions, not wait_for_function: that evaluates strings, which this page's CSP forbids.)
    answer = page.locator("#answer")
    expect(answer).to_have_attribute("data-tokens", MANY)
    expect(answer).to_have_attribute("data-state", "streaming")
    expect(answer).to_have_attribute("data-state", "final", timeout=15_000)
    assert int(page.get_attribute("#answer", "data-tokens")) >= 10
    citations = page.locator("#answer-text a.cite")
    # the short answer cites the one of the two it was judged against that holds its words
    expect(citations).to_have_count(3)
    expect(citations.first).to_have_text("[E1]")
    citations.first.click()
    cited = page.locator("#panel .chunk.cited")
    expect(cited).to_have_count(1)
    expect(cited.locator(".heading")).to_have_text("Trade-offs")
    expect(cited).to_contain_text("140 lines")
    expect(page.locator("#ev-E1")).to_have_class(re.compile(r"\bcurrent\b"))


def test_pdf_citation_shows_the_rendered_page(watched, console_url) -> None:
    page = watched
    page.goto(console_url + "/?" + httpx.QueryParams({"q": RATE_LIMIT, "no_llm": "true"}).__str__())
    wait_final(page)
    pdf_item = page.locator("#evidence li", has=page.locator(".kind", has_text="pdf")).first
    pdf_item.locator("a.ev-open").click()
    image = page.locator("#panel img.pdf-page")
    expect(image).to_have_count(1)
    for _ in range(100):
        if image.evaluate("img => img.complete && img.naturalWidth"):
            break
        page.wait_for_timeout(100)
    assert image.evaluate("img => img.naturalWidth") > 300
    assert "?chunk=" in image.get_attribute("src")  # the cited text is boxed on the page


def test_a_page_image_the_server_refuses_shows_its_reason_not_a_broken_image(watched, console_url) -> None:
    """A PDF changed on disk since it was ingested: the page image is a 404 with a reason and a hint."""
    page = watched
    page.goto(console_url + "/?" + httpx.QueryParams({"q": RATE_LIMIT, "no_llm": "true"}).__str__())
    wait_final(page)
    refused = {"error": "spec.pdf has changed since it was ingested", "hint": "run `mem sync`"}
    page.route("**/page/*.png*", lambda route: route.fulfill(status=404, json=refused))
    pdf_item = page.locator("#evidence li", has=page.locator(".kind", has_text="pdf")).first
    pdf_item.locator("a.ev-open").click()
    note = page.locator("#panel .error-state")
    expect(note).to_contain_text("spec.pdf has changed since it was ingested")
    expect(note).to_contain_text("hint: run `mem sync`")
    expect(page.locator("#panel img.pdf-page")).to_have_count(0)
    page.problems[:] = [problem for problem in page.problems if "Failed to load resource" not in problem]


def test_keyboard_only(watched, console_url) -> None:
    page = watched
    page.goto(console_url + "/ui/stats")
    page.goto(console_url + "/")
    page.keyboard.press("/")
    expect(page.locator("#q")).to_be_focused()
    page.keyboard.type("Why did we drop the LRU render cache?")
    page.keyboard.press("Tab")  # to the "no LLM" box
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    wait_final(page)
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    expect(page.locator("#evidence li").nth(0)).to_have_class(re.compile(r"\bcurrent\b"))
    page.keyboard.press("j")
    expect(page.locator("#evidence li").nth(1)).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#panel")).to_have_attribute("data-loaded", _eid(page, 1))
    page.keyboard.press("k")
    expect(page.locator("#evidence li").nth(0)).to_have_class(re.compile(r"\bcurrent\b"))
    # the first item's panel has loaded again (not the one before it): Escape must not race its request
    expect(page.locator("#panel")).to_have_attribute("data-loaded", _eid(page, 0))
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    page.keyboard.press("Escape")
    expect(page.locator("#panel .chunk")).to_have_count(0)


def _eid(page, index: int) -> str:
    """The evidence id (E1, E2, …) of the index-th evidence item."""
    return page.locator("#evidence li").nth(index).get_attribute("id").removeprefix("ev-")


def _views(console_url: str) -> list[str]:
    listing = httpx.get(console_url + "/sources?limit=500").json()["sources"]
    first = {}
    for item in listing:
        first.setdefault(item["source_type"], item["id"])
    views = ["/", "/ui/sources", "/ui/sources?kind=commit", "/ui/stats", "/docs"]
    views += [f"/ui/sources/{source_id}" for source_id in first.values()]
    views += [f"/ui/{name}" for name in ("timeline", "concepts", "drift", "forgetting", "recall", "distill", "usage")]
    return views


def test_every_view_loads_without_errors_in_both_themes(watched, console_url) -> None:
    page = watched
    for view in _views(console_url):
        response = page.goto(console_url + view)
        assert response.status == 200, view
        expect(page.locator("main")).to_be_visible()
    page.goto(console_url + "/ui/stats")
    expect(page.locator("#month-chart canvas")).to_have_count(1)
    page.click("#theme")
    theme = page.evaluate("document.documentElement.dataset.theme")
    assert theme in ("dark", "light")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == theme  # remembered


def test_memory_views_say_what_is_missing(watched, console_url) -> None:
    page = watched
    page.goto(console_url + "/ui/drift")
    expect(page.locator(".empty-state")).to_contain_text("the memory hierarchy is not built yet")


@pytest.mark.parametrize("view", ["/", "/ui/sources", "/ui/stats"])
def test_phone_width_has_no_sideways_scroll(watched, console_url, view) -> None:
    page = watched
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(console_url + view)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_at_phone_width_opening_evidence_brings_the_cited_chunk_into_view(watched, console_url) -> None:
    """The panel stacks below the answer at full height there: the page must scroll, not the panel."""
    page = watched
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(console_url + "/?q=render+cache&no_llm=true")
    page.locator("#evidence a.ev-open").first.click()
    cited = page.locator("#panel .chunk.cited")
    expect(cited).to_have_count(1)
    expect(cited).to_be_in_viewport()


def test_one_filter_is_one_request_and_back_shows_the_filters_of_the_list(watched, console_url) -> None:
    page = watched
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url) if "/ui/sources?" in request.url else None)
    page.goto(console_url + "/ui/sources")
    count, kind, folder = page.locator("p.count"), page.locator("select[name=kind]"), page.locator("input[name=folder]")
    before = page.evaluate("history.length")
    folder.fill("projects")
    folder.press("Enter")  # fires change, then submit: both are the form's triggers
    expect(count).to_have_text("4 sources")
    page.wait_for_timeout(500)  # a second request would be on its way by now
    assert len(sent) == 1, sent
    assert page.evaluate("history.length") == before + 1
    kind.select_option("commit")
    expect(count).to_have_text("0 sources")
    page.go_back()
    expect(count).to_have_text("4 sources")
    assert "folder=projects" in page.url
    expect(folder).to_have_value("projects")  # was the first render's empty box
    expect(kind).to_have_value("")
    kind.select_option("note")  # the folder shown is the folder sent: it was silently dropped
    expect(count).to_have_text("4 sources")
    assert "folder=projects" in sent[-1] and "kind=note" in sent[-1], sent


def test_a_second_citation_of_the_same_source_scrolls_to_its_own_chunk(watched, console_url) -> None:
    """Until htmx settles, the new chunk with the previous citation's id still carries its `cited` class:
    the panel scrolled to that one (the first of the two in the page) instead of the one just opened."""
    page = watched
    page.goto(console_url + "/?" + str(httpx.QueryParams({"q": PARSER_TRADEOFFS, "no_llm": "true"})))
    wait_final(page)
    trade_offs, summary = _evidence_of_one_source(page)
    for opened in (trade_offs, summary, trade_offs):
        page.locator(f"#ev-{opened['eid']} a.ev-open").click()
        expect(page.locator("#panel")).to_have_attribute("data-loaded", opened["eid"])
        expect(page.locator(f"#panel #{opened['anchor']}")).to_be_in_viewport()


def _evidence_of_one_source(page) -> list[dict[str, str]]:
    """Two evidence items of the same source (the parser rewrite note's Trade-offs and Summary)."""
    by_source: dict[str, list[dict[str, str]]] = {}
    for link in page.locator("#evidence a.ev-open").all():
        address, _, anchor = link.get_attribute("href").partition("#")
        item = {"eid": link.get_attribute("data-eid"), "anchor": anchor}
        by_source.setdefault(address.partition("?")[0], []).append(item)
    pairs = [items for items in by_source.values() if len(items) >= 2]
    assert pairs, by_source
    return pairs[0][:2]


def test_a_citation_whose_source_is_gone_shows_the_error_not_the_previous_evidence(watched, console_url) -> None:
    """htmx swaps no error reply: the panel kept the evidence opened before, as if it were this one's."""
    page = watched
    page.goto(console_url + "/?" + str(httpx.QueryParams({"q": PARSER_TRADEOFFS, "no_llm": "true"})))
    wait_final(page)
    first, second = page.locator("#evidence a.ev-open").nth(0), page.locator("#evidence a.ev-open").nth(1)
    second.click()
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    # The source was forgotten while the page was open: the server answers 404 for it (here, for an id
    # that never existed: the shared sample stays whole).
    gone = first.get_attribute("href").split("#")[0]
    page.route(f"**{gone}", lambda route: route.continue_(url=console_url + "/ui/sources/999999"))
    first.click()
    expect(page.locator("#panel .error-state")).to_contain_text("no source with id")
    expect(page.locator("#panel .chunk")).to_have_count(0)
    # The server stopped: the panel says it could not be reached.
    page.unroute(f"**{gone}")
    page.route(f"**{gone}", lambda route: route.abort("connectionrefused"))
    second.click()
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    first.click()
    expect(page.locator("#panel .error-state")).to_contain_text("could not be reached")
    expect(page.locator("#panel .chunk")).to_have_count(0)
    # the browser logs the refused and the failed request, htmx its send error: nothing else is expected
    expected = ("Failed to load resource", "htmx:afterRequest", "htmx:sendError")
    page.problems[:] = [problem for problem in page.problems if not any(e in problem for e in expected)]


def test_a_new_question_while_one_is_answered_replaces_it(watched, slow_console) -> None:
    """The Ask button was disabled for the whole stream: Enter did nothing until the model finished."""
    page, (url, model) = watched, slow_console
    page.goto(url + "/")
    page.fill("#q", PARSER_TRADEOFFS)
    page.click("#ask-button")
    expect(page.locator("#answer")).to_have_attribute("data-tokens", re.compile(r"^[1-9]"))
    page.fill("#q", RATE_LIMIT)
    page.check("#no-llm")
    page.press("#q", "Enter")
    wait_final(page)
    expect(page.locator("#answer-status")).to_contain_text("evidence answer")
    assert "no_llm=true" in page.url
    assert model.closed.wait(5), "the first answer went on generating"


def test_esc_or_stop_cancels_the_answer(watched, slow_console) -> None:
    page, (url, model) = watched, slow_console
    page.goto(url + "/")
    answer, status, stop = page.locator("#answer"), page.locator("#answer-status"), page.locator("#stop-button")
    expect(stop).to_be_hidden()
    for cancel in (lambda: page.keyboard.press("Escape"), stop.click):
        page.fill("#q", PARSER_TRADEOFFS)
        page.click("#ask-button")
        expect(answer).to_have_attribute("data-tokens", re.compile(r"^[1-9]"))
        model.closed.clear()
        cancel()
        expect(answer).to_have_attribute("data-state", "stopped")
        expect(status).to_contain_text("stopped")
        expect(stop).to_be_hidden()
        assert model.closed.wait(5), "generation went on after the answer was stopped"


def test_back_to_an_answer_shows_it_without_asking_again(watched, console_url) -> None:
    """Replies are no-store, so Back reloads the page: it asked its ?q= again, a whole new generation."""
    page = watched
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/ask/stream" in request.url else None)
    page.goto(console_url + "/?" + str(httpx.QueryParams({"q": PARSER_TRADEOFFS})))
    wait_final(page)
    answered = page.inner_text("#answer-text")
    page.click("nav >> text=Stats")
    expect(page.locator("#month-chart")).to_have_count(1)
    page.go_back()
    wait_final(page)
    expect(page.locator("#answer-status")).to_contain_text("kept from earlier")
    assert page.inner_text("#answer-text") == answered
    assert len(asked) == 1, asked
    page.locator("#answer-text a.cite").first.click()  # its citations still open their evidence
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    page.click("#ask-button")  # asking again is one click
    expect(page.locator("#answer-status")).not_to_contain_text("kept from earlier")
    wait_final(page)
    assert len(asked) == 2, asked


def test_a_filter_the_server_never_got_says_so_instead_of_showing_the_old_list(watched, console_url) -> None:
    page = watched
    page.goto(console_url + "/ui/sources")
    kind, rows = page.locator("select[name=kind]"), page.locator("#source-list tbody tr")
    expect(rows.first).to_be_visible()
    stopped = re.compile(r"/ui/sources\?")
    page.route(stopped, lambda route: route.abort("connectionrefused"))  # the server stopped
    kind.select_option("pdf")
    expect(page.locator("#source-list .error-state")).to_contain_text("could not be reached")
    expect(rows).to_have_count(0)  # not the list of the filters before, under this one
    page.unroute(stopped)  # back again: the next filter shows its list
    kind.select_option("image")
    expect(page.locator("#source-list .error-state")).to_have_count(0)
    expect(rows.first).to_be_visible()
    for cell in page.locator("#source-list tbody td:nth-child(2)").all_inner_texts():
        assert cell == "image"
    # the browser logs the refused request, htmx its send error: nothing else is expected
    expected = ("Failed to load resource", "htmx:afterRequest", "htmx:sendError")
    page.problems[:] = [problem for problem in page.problems if not any(e in problem for e in expected)]


def test_j_right_after_asking_walks_the_evidence(watched, console_url) -> None:
    """Focus stayed in the question box after Enter, where keys are text: j appended a "j"."""
    page = watched
    page.goto(console_url + "/ui/stats")
    expect(page.locator("footer")).not_to_contain_text("evidence")  # its keys do nothing here
    page.goto(console_url + "/")
    expect(page.locator("footer")).to_contain_text("j/k evidence")
    page.keyboard.press("/")
    page.keyboard.type(PARSER_TRADEOFFS)
    page.keyboard.press("Enter")
    wait_final(page)
    page.keyboard.press("j")
    expect(page.locator("#evidence li").nth(0)).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#panel .chunk.cited")).to_have_count(1)
    expect(page.locator("#q")).to_have_value(PARSER_TRADEOFFS)
    page.keyboard.press("/")  # the box is one key away for the next question
    expect(page.locator("#q")).to_be_focused()


@pytest.mark.parametrize(
    ("filters", "reason"),
    [
        ("since=2025-07-01&until=2025-06-01", "Since 2025-07-01 is after Until 2025-06-01: swap them."),
        ("folder=nowhere", "No source is in the folder nowhere"),
        ("kind=commit&folder=projects", "Nothing matches these filters."),
    ],
)
def test_sources_that_filters_leave_out_say_so_not_how_to_ingest(watched, console_url, filters, reason) -> None:
    """The empty list said "Nothing matches. Add sources with `mem ingest-notes` …" over a full memory."""
    page = watched
    page.goto(f"{console_url}/ui/sources?{filters}")
    empty = page.locator("#source-list .empty")
    expect(empty).to_contain_text("Nothing matches these filters.")
    expect(empty).to_contain_text(reason)
    expect(empty).not_to_contain_text("mem ingest")
    empty.get_by_role("link", name="Clear the filters").click()
    expect(page.locator("#source-list tbody tr").first).to_be_visible()


def test_sources_of_an_empty_memory_say_how_to_add_some(watched, tmp_path) -> None:
    db = tmp_path / "memory.db"
    with redirect_stdout(io.StringIO()):
        assert main(["init-db", "--db-path", str(db)]) == 0
    with running_server(create_app(server_settings(db))) as url:
        watched.goto(url + "/ui/sources")
        expect(watched.locator("#source-list .empty")).to_contain_text("mem ingest-notes")
