#!/usr/bin/env python3
"""Regenerate docs/screenshots/*.png: each console view over the bundled sample, in Debian's chromium.

    python docs/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]

Seeds the sample into a temporary folder, serves it with `mem serve`'s app on a free loopback port and
takes one picture per view. The Ask view shows a real evidence answer (no language model), so the
pictures need nothing but the ui extra, playwright and chromium.
"""

from __future__ import annotations

import argparse
import io
import socket
import sys
import tempfile
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path
from urllib.parse import urlencode

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
QUESTION = "What were the trade-offs of the hand-written tokenizer?"


def serve(db: Path):
    import uvicorn

    from crossmodalrag.api.app import create_app
    from crossmodalrag.config import load_settings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(load_settings({"db_path": db, "llm_provider": "none"}))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import expect, sync_playwright

    from crossmodalrag.cli.main import main as mem

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "memory.db"
        with redirect_stdout(io.StringIO()):
            if mem(["seed-sample", "--db-path", str(db)]) != 0:
                return 1
        server, url = serve(db)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 820})
            sources = {}
            for item in page.request.get(url + "/sources?limit=500").json()["sources"]:
                sources.setdefault(item["source_type"], item["id"])

            def shot(name: str) -> None:
                page.screenshot(path=str(args.out / f"{name}.png"))
                print(args.out / f"{name}.png")

            page.goto(url + "/?" + urlencode({"q": QUESTION, "no_llm": "true"}))
            expect(page.locator("#answer")).to_have_attribute("data-state", "final")
            page.locator("a.ev-open").first.click()
            expect(page.locator("#panel .chunk.cited")).to_have_count(1)
            page.evaluate("() => window.scrollTo(0, 0)")
            shot("ask")
            page.goto(url + "/ui/sources")
            shot("sources")
            page.goto(url + f"/ui/sources/{sources['pdf']}")
            shot("source-pdf")
            page.goto(url + f"/ui/sources/{sources['commit']}")
            shot("source-commit")
            page.goto(url + "/ui/stats")
            expect(page.locator("#month-chart canvas")).to_have_count(1)
            shot("stats")
            page.goto(url + "/ui/drift")
            shot("drift-empty")
            page.emulate_media(color_scheme="dark")
            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(url + "/?" + urlencode({"q": QUESTION, "no_llm": "true"}))
            expect(page.locator("#answer")).to_have_attribute("data-state", "final")
            shot("ask-phone-dark")
            browser.close()
        server.should_exit = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
