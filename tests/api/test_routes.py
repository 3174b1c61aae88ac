"""Every JSON route returns exactly what its `mem … --json` twin prints, and errors are JSON with a hint."""

from __future__ import annotations

import io
import json
from contextlib import contextmanager

import pytest

from tests.api.helpers import cli_json, without_timing
from tests.pdfs import write_pdf_streams

QUESTION = "Why did I change the parser?"


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI twin must not find a model the server does not have."""
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")


@pytest.mark.parametrize(
    ("route", "args"),
    [
        ("/sources", ["sources"]),
        ("/sources?kind=note&limit=3", ["sources", "--kind", "note", "--limit", "3"]),
        ("/sources?kind=commit&offset=2&limit=4", ["sources", "--kind", "commit", "--offset", "2", "--limit", "4"]),
        ("/sources?folder=projects", ["sources", "--folder", "projects"]),
        ("/sources?since=2025-06-01&until=2025-07-21", ["sources", "--since", "2025-06-01", "--until", "2025-07-21"]),
        ("/stats", ["stats"]),
        ("/eval?query_prefix=%5Bsample%5D", ["eval", "--query-prefix", "[sample]"]),
        ("/eval?top_k=3&modality=text", ["eval", "--top-k", "3", "--modality", "text"]),
    ],
)
def test_route_returns_its_cli_twin(client, sample_db, capsys, route, args) -> None:
    response = client.get(route)
    assert response.status_code == 200, response.text
    assert response.json() == cli_json(capsys, *args, "--db-path", str(sample_db))


def test_source_detail_is_its_cli_twin_for_every_kind(client, sample_db, capsys) -> None:
    listing = client.get("/sources?limit=500").json()
    first_of_kind = {}
    for item in listing["sources"]:
        first_of_kind.setdefault(item["source_type"], item["id"])
    assert set(first_of_kind) == {"note", "commit", "pdf", "image"}
    for source_id in first_of_kind.values():
        served = client.get(f"/sources/{source_id}").json()
        assert served == cli_json(capsys, "source", str(source_id), "--db-path", str(sample_db))
        assert served["chunks"], served


@pytest.mark.parametrize(
    ("query", "args"),
    [
        ({"q": QUESTION, "no_llm": "true"}, ["--no-llm"]),
        ({"q": QUESTION}, []),  # no model: the evidence answer, with the notice saying why
        (
            {"q": QUESTION, "top_k": "2", "modality": ["text", "code"]},
            ["--top-k", "2", "--modality", "text", "--modality", "code"],
        ),
        ({"q": "quantum chromodynamics of penguins", "no_llm": "true"}, ["--no-llm"]),  # abstains
        ({"q": "parser tokenizer", "match": "all", "no_llm": "true"}, ["--match", "all", "--no-llm"]),
        # each of these changes the evidence on the sample, so a route ignoring it fails here
        ({"q": QUESTION, "strategy": "episodic", "no_llm": "true"}, ["--strategy", "episodic", "--no-llm"]),
        ({"q": QUESTION, "after": "2025-07-10", "no_llm": "true"}, ["--after", "2025-07-10", "--no-llm"]),
        ({"q": QUESTION, "before": "2025-07-01"}, ["--before", "2025-07-01"]),
    ],
)
def test_ask_returns_its_cli_twin(client, sample_db, capsys, query, args) -> None:
    served = client.get("/ask", params=query)
    assert served.status_code == 200, served.text
    printed = cli_json(capsys, "ask", query["q"], *args, "--db-path", str(sample_db))
    assert without_timing(served.json()) == without_timing(printed)


def test_evidence_opens_its_source_and_cited_chunk(client) -> None:
    answer = client.get("/ask", params={"q": QUESTION, "no_llm": "true"}).json()
    assert not answer["abstained"] and answer["evidence"]
    for item in answer["evidence"]:
        source = client.get(f"/sources/{item['source_id']}").json()
        assert source["uri"] == item["source_uri"]
        assert item["chunk_id"] in {chunk["id"] for chunk in source["chunks"]}


def test_pdf_page_and_image_render_as_png(client) -> None:
    kinds = {s["source_type"]: s for s in client.get("/sources?limit=500").json()["sources"]}
    pdf = client.get(f"/sources/{kinds['pdf']['id']}").json()
    chunk = pdf["chunks"][0]
    page = client.get(f"/sources/{pdf['id']}/page/{chunk['page']}.png", params={"chunk": chunk["id"]})
    assert page.status_code == 200 and page.headers["content-type"] == "image/png"
    assert page.content.startswith(b"\x89PNG\r\n\x1a\n")
    image = client.get(f"/sources/{kinds['image']['id']}/image")
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG\r\n\x1a\n")
    missing_page = client.get(f"/sources/{pdf['id']}/page/999.png")
    assert missing_page.status_code == 404 and "no page 999" in missing_page.json()["error"]
    wrong_kind = client.get(f"/sources/{pdf['id']}/image")
    assert wrong_kind.status_code == 404


@pytest.mark.parametrize("view", ["concepts", "timeline", "forgetting", "recall", "drift", "distill"])
def test_memory_views_say_the_hierarchy_is_not_built(client, view) -> None:
    response = client.get(f"/{view}")
    assert response.status_code == 501
    body = response.json()
    assert body["error"].startswith("the memory hierarchy is not built yet")
    assert "mem build-memory" in body["hint"]


@pytest.mark.parametrize("view", ["memory-stats", "usage"])
def test_memory_stats_and_usage_answer_before_any_build(client, view) -> None:
    assert client.get(f"/{view}").status_code == 200


def test_errors_are_json_with_a_hint(client) -> None:
    missing = client.get("/sources/999999")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no source with id 999999", "hint": "list them with `mem sources`"}
    bad_date = client.get("/sources", params={"since": "last tuesday"})
    assert bad_date.status_code == 400 and "YYYY-MM-DD" in bad_date.json()["hint"]
    assert client.get("/eval", params={"query_prefix": "[nothing]"}).status_code == 404
    assert client.get("/ask", params={"q": QUESTION, "level": "concept"}).status_code == 501
    bad_after = client.get("/ask", params={"q": QUESTION, "after": "last tuesday"})
    assert bad_after.status_code == 400 and bad_after.json()["hint"], bad_after.text


def test_a_since_later_than_until_says_to_swap_them(client, sample_db, capsys) -> None:
    """The console says it over its empty list (tests/browser); the CLI said only "0 of 0 sources"."""
    from crossmodalrag.cli.main import main

    assert client.get("/sources", params={"since": "2026-01-01", "until": "2025-01-01"}).json()["total"] == 0
    assert main(["sources", "--since", "2026-01-01", "--until", "2025-01-01", "--db-path", str(sample_db)]) == 0
    assert "--since 2026-01-01 is after --until 2025-01-01: swap them" in capsys.readouterr().err
    assert main(["sources", "--since", "2025-07-21", "--until", "2025-07-21", "--db-path", str(sample_db)]) == 0
    assert "swap them" not in capsys.readouterr().err


def test_errors_over_http_name_the_parameter_not_the_cli_flag(client, sample_db, capsys) -> None:
    from crossmodalrag.cli.main import main

    since = client.get("/sources", params={"until": "2025-01-01", "since": "last tuesday"}).json()["error"]
    assert since == "since 'last tuesday' is not a date"
    console = client.get("/ui/sources", params={"until": "someday"})
    assert console.status_code == 400 and "until &#39;someday&#39; is not a date" in console.text
    after = client.get("/ask", params={"q": QUESTION, "after": "last tuesday"}).json()["error"]
    assert after.startswith("after must be an ISO date")
    hint = client.get("/eval", params={"query_prefix": "[nothing]"}).json()["hint"]
    assert "`mem eval --load-queries FILE`" in hint and "pass --load-queries" not in hint
    with pytest.raises(SystemExit) as exit_info:  # the CLI keeps its flags; a bad one is a usage error
        main(["sources", "--since", "last tuesday", "--db-path", str(sample_db)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert err.startswith("error: argument --since: the date 'last tuesday' is not a date (hint: use YYYY-MM-DD")


def test_health_reports_a_read_only_database(client, sample_db) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["read_only"] is True
    assert body["database"] == str(sample_db.resolve())
    assert body["sources"]["note"] == 15


def test_missing_database_is_a_503_with_the_store_hint(tmp_path) -> None:
    from fastapi.testclient import TestClient

    from crossmodalrag.api.app import create_app
    from tests.api.helpers import BASE, server_settings

    with TestClient(create_app(server_settings(tmp_path / "absent.db")), base_url=BASE) as client:
        response = client.get("/sources")
    assert response.status_code == 503
    assert "mem init-db" in response.json()["hint"]
    assert not (tmp_path / "absent.db").exists()  # read-only: nothing was created


def test_the_server_cannot_write_the_database(sample_db) -> None:
    import sqlite3

    from crossmodalrag.store.readonly import open_reader

    with open_reader(sample_db) as store:
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.conn.execute("DELETE FROM sources")


def test_openapi_lists_every_route_and_docs_render(client) -> None:
    schema = client.get("/openapi.json").json()
    expected = {
        "/health",
        "/ask",
        "/ask/stream",
        "/sources",
        "/sources/{source_id}",
        "/stats",
        "/eval",
        "/sources/{source_id}/page/{page}.png",
        "/sources/{source_id}/image",
        "/memory-stats",
        "/concepts",
        "/timeline",
        "/forgetting",
        "/recall",
        "/drift",
        "/distill",
        "/usage",
    }
    assert expected <= set(schema["paths"])
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/ask/stream" in docs.text and "<script>" not in docs.text


def test_pages_add_up_to_the_whole_listing(client) -> None:
    whole = client.get("/sources?limit=500").json()
    pages = [client.get(f"/sources?limit=5&offset={offset}").json() for offset in range(0, whole["total"], 5)]
    assert [s["id"] for page in pages for s in page["sources"]] == [s["id"] for s in whole["sources"]]
    assert {page["total"] for page in pages} == {whole["total"]} == {len(whole["sources"])}
    in_folder = client.get("/sources?folder=projects&limit=2&offset=1").json()
    all_in_folder = client.get("/sources?folder=projects").json()
    assert in_folder["total"] == all_in_folder["total"] == 4
    assert in_folder["sources"] == all_in_folder["sources"][1:3]


def test_console_sources_filter_with_all_kinds(client) -> None:
    """The filter form's "all" sends `kind=` (and its paging links keep it): the page, not a 422."""
    response = client.get("/ui/sources", params={"kind": "", "folder": "daily", "since": "", "until": ""})
    assert response.status_code == 200
    assert "daily/" in response.text
    assert client.get("/ui/sources", params={"kind": "nonsense"}).status_code == 422


@contextmanager
def _a_pdf_and_an_image(tmp_path):
    """A memory holding one ingested PDF and one image: (store, the PDF, the image, kind -> source id)."""
    from crossmodalrag.ingest import ingest_images, ingest_pdfs
    from crossmodalrag.store import open_store
    from tests.images import write_text_image
    from tests.pdfs import write_pdf

    pdf = write_pdf(tmp_path / "docs" / "spec.pdf", ["The plugin API has three hooks."])
    picture = write_text_image(tmp_path / "shots" / "board.png", ["Ship it"], size=(300, 100))
    with open_store(tmp_path / "m.db") as store:
        ingest_pdfs(store, [pdf.parent])
        ingest_images(store, [picture.parent])
        yield store, pdf, picture, dict(store.conn.execute("SELECT source_type, id FROM sources").fetchall())


def test_the_source_page_heads_a_labelled_pdf_page_as_citations_name_it(tmp_path) -> None:
    """The CLI cites `book.pdf p.1 (page 3 of 3)`; the console headed that text "Page 3"."""
    from crossmodalrag.api.app import create_app
    from crossmodalrag.ingest import ingest_pdfs
    from crossmodalrag.store import open_store
    from tests.api.helpers import BASE, server_settings
    from tests.pdfs import add_page_labels, write_pdf

    book = write_pdf(tmp_path / "docs" / "book.pdf", ["Preface.", "Contents.", "Albatross migration."])
    add_page_labels(book, "0 << /S /r >> 2 << /S /D >>")
    with open_store(tmp_path / "m.db") as store:
        ingest_pdfs(store, [book])
    from fastapi.testclient import TestClient

    with TestClient(create_app(server_settings(tmp_path / "m.db")), base_url=BASE) as client:
        text = client.get("/ui/sources/1").text
    assert '<h3 class="page">p.ii (page 2 of 3)</h3>' in text and '<h3 class="page">p.1 (page 3 of 3)</h3>' in text


def test_a_pdf_or_image_changed_on_disk_is_a_404_with_a_hint_not_a_500(tmp_path, monkeypatch) -> None:
    """Corrupted since ingest, or an image grown past Pillow's decompression-bomb limit."""
    from PIL import Image

    from crossmodalrag.sources import SourceNotFound, image_png, pdf_page_png

    with _a_pdf_and_an_image(tmp_path) as (store, pdf, picture, ids):
        pdf.write_bytes(pdf.read_bytes()[:200])
        with pytest.raises(SourceNotFound, match="changed since it was ingested"):
            pdf_page_png(store, ids["pdf"], 1)
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # the 300x100 picture is now a "bomb"
        with pytest.raises(SourceNotFound, match="cannot be read as an image"):
            image_png(store, ids["image"])


def test_a_pdf_or_image_replaced_on_disk_is_not_shown_as_the_ingested_one(tmp_path, monkeypatch) -> None:
    """Replaced but not synced yet: another document's page would be shown as this source's evidence.
    A touched file (same bytes, new mtime) still renders; an unchanged one is not hashed."""
    import os

    from crossmodalrag import sources
    from crossmodalrag.sources import SourceNotFound, image_png, pdf_page_png
    from tests.images import write_text_image
    from tests.pdfs import write_pdf

    with _a_pdf_and_an_image(tmp_path) as (store, pdf, picture, ids):
        with monkeypatch.context() as patch:
            patch.setattr(
                sources, "file_sha256", lambda path: pytest.fail(f"{path} hashed though unchanged"), raising=False
            )
            assert pdf_page_png(store, ids["pdf"], 1) and image_png(store, ids["image"])
        for path in (pdf, picture):
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        assert pdf_page_png(store, ids["pdf"], 1) and image_png(store, ids["image"])
        write_pdf(pdf, ["Quarterly earnings of another company."])
        write_text_image(picture, ["Someone else's board"], size=(300, 100))
        with pytest.raises(SourceNotFound, match=r"spec.pdf has changed since it was ingested .*mem sync"):
            pdf_page_png(store, ids["pdf"], 1)
        with pytest.raises(SourceNotFound, match="board.png has changed since it was ingested"):
            image_png(store, ids["image"])


def test_a_pdf_or_image_gone_or_changed_names_the_commands_that_work_not_only_mem_sync(tmp_path, monkeypatch) -> None:
    """`mem sync` refuses to run with no connector configured: the hint names the ingest command for
    that file, and for a file gone the `mem forget ID` that drops it."""
    from crossmodalrag.sources import SourceNotFound, image_png, pdf_page_png
    from tests.pdfs import write_pdf

    with _a_pdf_and_an_image(tmp_path) as (store, pdf, picture, ids):
        write_pdf(pdf, ["Quarterly earnings of another company."])
        with pytest.raises(SourceNotFound) as changed:
            pdf_page_png(store, ids["pdf"], 1)
        picture.unlink()
        with pytest.raises(SourceNotFound) as gone:
            image_png(store, ids["image"])
    assert changed.value.hint.startswith(f"ingest it again: `mem ingest-pdf {pdf}`")
    assert gone.value.hint.startswith(f"drop it from memory with `mem forget {ids['image']}`")
    assert "`mem ingest-images FILE`" in gone.value.hint


def test_the_cli_api_and_console_take_questions_up_to_the_same_length(client, sample_db, capsys) -> None:
    """The CLI took any length, the API and console 1,000 characters, MCP 2,000: one limit now."""
    from crossmodalrag.answer.evidence import MAX_QUESTION_CHARS
    from crossmodalrag.cli.main import main

    longest = ("parser " * MAX_QUESTION_CHARS)[:MAX_QUESTION_CHARS]
    over = longest + "x"
    assert client.get("/ask", params={"q": longest, "no_llm": True}).status_code == 200
    assert client.get("/ask", params={"q": over, "no_llm": True}).status_code == 422
    page = client.get("/", params={"q": longest})
    assert page.status_code == 200 and f'maxlength="{MAX_QUESTION_CHARS}"' in page.text
    assert client.get("/", params={"q": over}).status_code == 422
    assert main(["ask", longest, "--no-llm", "--db-path", str(sample_db)]) == 0
    capsys.readouterr()
    assert main(["ask", over, "--no-llm", "--db-path", str(sample_db)]) == 1
    said = capsys.readouterr().err
    assert said.startswith(f"error: the question is {len(over):,} characters long: at most {MAX_QUESTION_CHARS:,}")


def test_a_diff_renders_one_block_per_line_with_no_blank_line_between() -> None:
    from crossmodalrag.api.markup import render_diff

    html = str(render_diff("@@ -1 +1 @@\n-old <b>\n\n+new"))
    assert "\n" not in html and html.count("<span") == 4 and "&lt;b&gt;" in html
    assert '<span class="diff-ctx"> </span>' in html  # an empty context line keeps its height


@pytest.mark.parametrize("path", ["/ui/sources/abc", "/ui/sources?kind=zzz", "/?q=" + "x" * 2001])
def test_a_console_page_answers_a_bad_parameter_with_its_error_page(client, path) -> None:
    page = client.get(path)
    assert page.status_code == 422 and page.headers["content-type"].startswith("text/html")
    assert "check the address" in page.text and '"detail"' not in page.text


def test_a_bad_parameter_is_named_as_in_the_address_not_as_pydantic_tried_it(client) -> None:
    """The console's `kind` also takes "" (its "all"): the error named the union member it tried."""
    page = client.get("/ui/sources", params={"kind": "video"})
    assert "<h1>kind: Input should be &#39;note&#39;" in page.text and "literal[" not in page.text
    listed = client.get("/ask", params={"q": "parser", "modality": ["text", "video"]}).json()["error"]
    assert listed.startswith("modality: Input should be 'text'")


@pytest.mark.parametrize(
    "path, route",
    [
        ("/sources/abc", "/sources/{source_id}"),
        ("/sources/1/page/0.png", "/sources/{source_id}/page/{page}.png"),
        ("/sources?limit=0", "/sources"),
    ],
)
def test_a_422_hint_names_the_route_as_docs_lists_it_not_the_address_typed(client, path, route) -> None:
    assert client.get(path).json()["hint"] == f"see /docs for {route}'s parameters"


@pytest.mark.parametrize(
    "path, status, error",
    [
        ("/sources/abc", 422, "source_id: Input should be a valid integer"),
        ("/sources?limit=abc", 422, "limit: Input should be a valid integer"),
        ("/ask", 422, "q: Field required"),
        ("/ask?q=parser&top_k=0", 422, "top_k: Input should be greater than or equal to 1"),
        ("/sources?kind=note&kind=pdf", 422, "kind: given more than once"),  # not PDFs only, silently
        ("/ask?q=parser&q=tokenizer&modality=text&modality=pdf", 422, "q: given more than once"),
        ("/sources?knd=pdf", 422, "knd: not a parameter of this route (it takes: folder, kind, limit"),  # not all
        ("/ask?q=parser&topk=3", 422, "topk: not a parameter of this route (it takes: after, before, level"),
        ("/stats?verbose=1", 422, "verbose: not a parameter of this route (it takes: no parameters)"),
        ("/nope", 404, "nothing at /nope"),
        ("/static/nope.js", 404, "nothing at /static/nope.js"),
    ],
)
def test_every_api_error_has_the_documented_shape(client, path, status, error) -> None:
    response = client.get(path)
    assert response.status_code == status and response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "hint"} and body["error"].startswith(error) and body["hint"], body


def test_the_openapi_schema_documents_the_422_error_shape(client) -> None:
    schema = client.get("/openapi.json").json()
    bad = schema["paths"]["/sources"]["get"]["responses"]["422"]["content"]["application/json"]["schema"]
    assert bad == {"$ref": "#/components/schemas/Error"}
    assert schema["components"]["schemas"]["Error"]["required"] == ["error", "hint"]
    assert "HTTPValidationError" not in schema["components"]["schemas"]


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/sources/1/extra"])
def test_a_console_address_with_no_page_shows_the_html_error_page(client, path) -> None:
    page = client.get(path)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert f"nothing at {path}" in page.text and "navigation bar" in page.text and '"detail"' not in page.text


def test_the_sources_pager_keeps_a_dated_filter_and_says_when_past_the_end(client) -> None:
    import html
    import re as regex

    page = client.get("/ui/sources", params={"since": "2020-01-01T00:00+02:00", "offset": 1})  # "← newer"
    links = [html.unescape(link) for link in regex.findall(r'href="(/ui/sources\?[^"]*offset=[^"]*)"', page.text)]
    assert links
    for link in links:  # the pager's links open as the page did (a raw "+" was read as a space)
        assert client.get(link).status_code == 200, link
    past = client.get("/ui/sources", params={"offset": 10_000})
    assert past.status_code == 200 and "none from 10001 on" in past.text and "showing 10001" not in past.text


def test_htmx_restoring_history_it_has_no_snapshot_of_gets_the_whole_page(client) -> None:
    swap = client.get("/ui/sources?folder=projects", headers={"hx-request": "true"})
    assert 'id="source-list"' in swap.text and 'id="source-filter"' not in swap.text  # a swap: the list alone
    restore = client.get(
        "/ui/sources?folder=projects", headers={"hx-request": "true", "hx-history-restore-request": "true"}
    )
    assert 'id="source-filter"' in restore.text and 'value="projects"' in restore.text  # Back: the whole page


def test_a_huge_pdf_page_renders_within_the_pixel_cap(tmp_path, monkeypatch) -> None:
    pytest.importorskip("pypdfium2")
    from PIL import Image

    from crossmodalrag.connectors import pdf
    from crossmodalrag.ingest import ingest_pdfs
    from crossmodalrag.sources import pdf_page_png
    from crossmodalrag.store import open_store

    Image.new("RGB", (100, 100), "white").save(tmp_path / "poster.pdf", resolution=1)  # 7200 points a side
    monkeypatch.setattr(pdf, "MAX_RENDER_PIXELS", 1_000_000)
    with open_store(tmp_path / "m.db") as store:
        ingest_pdfs(store, [tmp_path / "poster.pdf"])
        (source_id,) = store.conn.execute("SELECT id FROM sources").fetchone()
        png = Image.open(io.BytesIO(pdf_page_png(store, source_id, 1)))
    assert png.width * png.height <= 1_000_000 and png.width == pytest.approx(1000, abs=2)


def _pdf_drawn_piece_by_piece(path, lines: list[str]):
    """A one-page PDF whose every word is its own text object, as in many real PDFs (pdfium then gives
    a rectangle per piece: per word here, per glyph in some)."""
    shown = []
    for row, line in enumerate(lines):
        x = 72
        for word in line.split():
            shown.append(f"BT /F1 12 Tf {x} {720 - 16 * row} Td ({word}) Tj ET")
            x += 6 * len(word) + 6  # about its width in Helvetica 12, and a space
    return write_pdf_streams(path, [" ".join(shown).encode("latin-1")])


def test_the_cited_text_on_a_pdf_page_is_marked_line_by_line_not_piece_by_piece(tmp_path, monkeypatch) -> None:
    """One outlined box per glyph or word, drawn over each other, made the cited text unreadable."""
    pytest.importorskip("pypdfium2")
    from PIL import ImageDraw

    from crossmodalrag.ingest import ingest_pdfs
    from crossmodalrag.sources import pdf_page_png
    from crossmodalrag.store import open_store

    lines = ["The plugin API has three hooks for renderers", "and each hook runs once per document"]
    pdf = _pdf_drawn_piece_by_piece(tmp_path / "docs" / "hooks.pdf", lines)
    drawn: list[dict] = []
    monkeypatch.setattr(ImageDraw.ImageDraw, "rectangle", lambda self, xy, **style: drawn.append(style))
    with open_store(tmp_path / "m.db") as store:
        ingest_pdfs(store, [pdf])
        source_id, chunk_id = store.conn.execute("SELECT source_id, id FROM chunks").fetchone()
        pdf_page_png(store, source_id, 1, chunk_id)
    assert len(drawn) == len(lines)
    assert all(style.get("outline") is None and style["fill"][3] < 128 for style in drawn)  # the text shows through


def test_line_boxes_keep_columns_and_lines_apart() -> None:
    from crossmodalrag.sources import line_boxes

    glyphs = [(10.0, 100.0, 16.0, 110.0), (16.5, 99.0, 22.0, 110.0), (25.0, 100.0, 31.0, 111.0)]
    column = [(200.0, 100.0, 206.0, 110.0)]  # same baseline, far right: a table's next cell
    below = [(10.0, 86.0, 16.0, 96.0)]
    assert line_boxes(glyphs + column + below) == [
        (10.0, 99.0, 31.0, 111.0),
        (200.0, 100.0, 206.0, 110.0),
        (10.0, 86.0, 16.0, 96.0),
    ]


def test_a_citation_whose_chunk_the_source_no_longer_has_says_so(client, sample_db) -> None:
    """Cited before the source was re-read: the page showed its new text as though it were cited."""
    import sqlite3

    with sqlite3.connect(sample_db) as conn:
        source_id, chunk_id = conn.execute("SELECT source_id, id FROM chunks ORDER BY id LIMIT 1").fetchone()
    notice = "The cited excerpt is no longer in this source"
    assert notice not in client.get(f"/ui/sources/{source_id}", params={"chunk": chunk_id}).text
    assert notice not in client.get(f"/ui/sources/{source_id}").text
    page = client.get(f"/ui/sources/{source_id}", params={"chunk": 2**40})
    assert page.status_code == 200 and notice in page.text


def _damaged_copy(sample_db, tmp_path):
    """A copy of the sample whose `sources` table lost its root page, as a disk fault or a bad copy does."""
    import sqlite3

    db = tmp_path / "memory.db"
    with sqlite3.connect(sample_db) as source, sqlite3.connect(db) as copy:
        source.backup(copy)
        page_size = copy.execute("PRAGMA page_size").fetchone()[0]
        root = copy.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sources'").fetchone()[0]
    copy.close()
    with db.open("r+b") as raw:
        raw.seek((root - 1) * page_size)
        raw.write(b"\xff" * page_size)
    return db


def test_a_damaged_database_is_a_503_worded_as_the_cli_words_it(sample_db, tmp_path, caplog) -> None:
    """Not a bare plain-text 500 and a traceback: the API's JSON error, the console's error page, the
    stream's error event, each with the CLI's message and hint, and one log line per request."""
    from fastapi.testclient import TestClient

    from crossmodalrag.api.app import create_app
    from tests.api.helpers import BASE, server_settings

    app = create_app(server_settings(_damaged_copy(sample_db, tmp_path)))
    with TestClient(app, base_url=BASE, raise_server_exceptions=False) as client:
        api = client.get("/sources")
        page = client.get("/ui/sources")
        stream = client.get("/ask/stream", params={"q": QUESTION, "no_llm": True})
    assert api.status_code == 503 and api.json()["error"].startswith("the database is damaged: ")
    assert "`mem doctor`" in api.json()["hint"]
    assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
    assert "the database is damaged" in page.text and "mem doctor" in page.text
    last = json.loads(stream.text.splitlines()[-1])
    assert last["type"] == "error" and last["error"].startswith("the database is damaged: ")
    logged = [record for record in caplog.records if "the database is damaged" in record.getMessage()]
    assert len(logged) == 3 and not any(record.exc_info for record in logged)
