"""SQLite vs PostgreSQL (issue 16), benchmarks 2 and 3: a synthetic vault at scale, then `mem migrate`.

    python bench/postgres.py scale [--notes 10000] [--clients 1 8 32] [--seconds 20] [--rls]
        [--workdir DIR [--build-only | --reuse]] [--parallel-build] [--no-migrate] [--backends ...]

  2. The vault from shared/tools/make_vault.py ingested by `ingest_notes` into a SQLite file and a
     PostgreSQL database (chunks/s); vectors stored for every chunk by `embed_missing` with a 384-dim
     hashing embedder (tests/fakes.py: the dimension of MiniLM, no model time, identical on both
     sides: this measures the stores, not an embedding model); the vector index built (PostgreSQL:
     the HNSW index; SQLite: the in-process index's first load); then hybrid `ask` (balanced
     profile, evidence answer, no LLM) by 1, 8 and 32 concurrent client processes, each its own
     connection, for --seconds each: p50/p95 latency and queries/s. Queries: make_vault's 20 gold
     questions, each client starting at a different one. With --rls the PostgreSQL clients also ask
     as a login role that is only a member of the rows' owner, so row-level security applies (the
     benchmark's own superuser connection bypasses every policy): the policies' cost, same run.
  3. `mem migrate --from <the SQLite memory> --to <an empty PostgreSQL database>` as a subprocess:
     time, rows and the per-table checksum comparison it prints.

The embedded server runs with bulk-load settings (postgres_embedded.BULK_SETTINGS, in the JSON as
`server_settings`). Each step reports wall time, the client's CPU and its server backend's CPU; asks
also CPU and statements per ask. With --workdir everything stays there: the vault, memory.db, pgdata
(the server stopped at the end) and results/<backend>-<phase>.json, each written as its phase ends (a
build's also every 30 s while it runs), so a killed run keeps what it measured. Run again on the same
workdir, a finished build is reused and an unfinished one goes on (the ingest skips stored notes, the
vectors resume); --reuse only asks, on finished builds. The asks of --reuse at 1M chunks: 32 SQLite
clients share one memory-mapped vector index (usearch view + the mapped matrix), not 32 copies.

Prints one JSON object on stdout; progress on stderr. Run it with `nice -n 5` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import postgres_embedded
from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, make_vault, print_result
from postgres_ingest import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
DIM = 384
LABEL = re.compile(r"\A\[synth\]\s*")
BACKENDS = ("sqlite", "postgresql")


def embedder():
    sys.path.insert(0, str(ROOT))
    from tests.fakes import HashingEmbedder

    return HashingEmbedder(dim=DIM, name="bench/hashing-384")


def open_backend(name: str, location: str):
    from crossmodalrag.store import open_store
    from crossmodalrag.store.postgres import open_postgres_store

    return open_postgres_store(location) if name == "postgresql" else open_store(Path(location))


def retriever(store):
    from crossmodalrag.answer.evidence import Retriever, search_options
    from crossmodalrag.config import Settings
    from crossmodalrag.retrieval.semantic import semantic_index

    settings = Settings(db_path=Path(store.location) if store.backend == "sqlite" else Path("unused.db"))
    return Retriever(store, search_options(settings, None, "balanced", ()), semantic_index(store, embedder(), settings))


class Results:
    """Each phase's figures in <folder>/results/<backend>-<phase>.json, written as the phase ends (and a
    build's also while it runs), so a killed run keeps what it measured and a later run can reuse it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "results"
        self.folder.mkdir(parents=True, exist_ok=True)

    def write(self, name: str, figures: dict) -> None:
        staging = self.folder / f".{name}.json"
        staging.write_text(json.dumps(figures, indent=2), encoding="utf-8")
        os.replace(staging, self.folder / f"{name}.json")

    def read(self, name: str) -> dict | None:
        path = self.folder / f"{name}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def merged(self) -> dict:
        """{backend: {phase: figures}} plus the top-level phases (migrate)."""
        merged: dict = {}
        for path in sorted(self.folder.glob("*.json")):
            backend, _, phase = path.stem.partition("-")
            figures = json.loads(path.read_text(encoding="utf-8"))
            if phase:
                merged.setdefault(backend, {})[phase] = figures
            else:
                merged[backend] = figures
        return merged


def backend_pid(store) -> int | None:
    return store.conn.execute("SELECT pg_backend_pid()").fetchone()[0] if store.backend == "postgresql" else None


class Meter:
    """Wall time, this process's CPU and its server backend's CPU (PostgreSQL) over one step."""

    def __init__(self, store) -> None:
        self.backend = backend_pid(store)
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        self.server = cpu_seconds(self.backend) if self.backend else 0.0

    def seconds(self) -> float:
        return time.perf_counter() - self.wall

    def figures(self, prefix: str) -> dict:
        server = (cpu_seconds(self.backend) - self.server) if self.backend else 0.0
        return {
            f"{prefix}_seconds": round(self.seconds(), 1),
            f"{prefix}_client_cpu_seconds": round(time.process_time() - self.cpu, 1),
            f"{prefix}_server_cpu_seconds": round(server, 1),
        }


def every(seconds: float, action):
    """`action(*args)` at most once per `seconds` (progress written to disk while a step runs)."""
    last = [time.monotonic()]

    def maybe(*args) -> None:
        if time.monotonic() - last[0] >= seconds:
            last[0] = time.monotonic()
            action(*args)

    return maybe


def build(name: str, location: str, vault: Path, folder: Path) -> None:
    """Ingest, store vectors, build the vector index; each step's figures (wall, client and server CPU)
    written to results/<name>-build.json as it ends, and its progress every 30 s while it runs."""
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.ingest import ingest_notes

    results, phase = Results(folder), f"{name}-build"
    figures: dict = {"finished": False}
    earlier = results.read(phase)
    if earlier:  # an unfinished earlier run: the ingest skips the notes it stored, the vectors resume
        figures["earlier_attempt"] = earlier

    def progress(step: str, meter: Meter, done: int) -> None:
        figures[f"{step}_so_far"] = {
            "chunks": done,
            **meter.figures(step),
            "per_second": round(done / meter.seconds(), 1),
        }
        results.write(phase, figures)

    with open_backend(name, location) as store:
        meter = Meter(store)
        report = ingest_notes(store, [vault], progress=every(30, lambda r: progress("ingest", meter, r.chunks)))
        chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        figures.update(sources=report.added, chunks=chunks, chunks_written=report.chunks, **meter.figures("ingest"))
        figures["ingest_chunks_per_second"] = round(report.chunks / meter.seconds(), 1)
        results.write(phase, figures)
        if name == "postgresql":  # as a DBA after a bulk load: the visibility map lets BM25 read postings
            meter = Meter(store)  # index-only (schema 7) before autovacuum gets there
            store.conn.raw.execute("VACUUM (ANALYZE) chunk_postings")  # no SQL rewrite: PostgreSQL syntax
            figures.update(**meter.figures("vacuum"))
            results.write(phase, figures)
        meter = Meter(store)
        embedded = embed_missing(store, embedder(), 256, every(30, lambda r, _: progress("vectors", meter, r.chunks)))
        figures.update(vectors=embedded.chunks, **meter.figures("vectors"))
        figures["vectors_per_second"] = round(embedded.chunks / max(meter.seconds(), 1e-9), 1)
        results.write(phase, figures)
        meter = Meter(store)
        ask = retriever(store)
        ask.semantic.nearest(embedder().embed(["warm up the index"])[0], 10)  # builds or loads it
        figures.update(**meter.figures("index_build"), finished=True)  # a parallel HNSW worker's CPU is not counted
        results.write(phase, figures)


def counted(conn) -> list[int]:
    """Count the statements a PostgreSQL connection sends (each a round trip unless pipelined)."""
    count, execute = [0], conn.execute

    def counting(*args, **kwargs):
        count[0] += 1
        return execute(*args, **kwargs)

    conn.execute = counting
    return count


def client(name: str, location: str, questions: list[str], offset: int, barrier, seconds: float, out) -> None:
    """One client process: its own connection and index; asks in a loop for `seconds` after the barrier."""
    from crossmodalrag.answer.evidence import ask_without_llm

    with open_backend(name, location) as store:
        ask = retriever(store)
        ask_without_llm(ask, questions[offset % len(questions)])  # warm-up, not timed
        statements = counted(store.conn) if store.backend == "postgresql" else [0]
        barrier.wait()
        meter = Meter(store)
        times, n, deadline = [], offset, time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            ask_without_llm(ask, questions[n % len(questions)])
            times.append((time.perf_counter() - started) * 1000)
            n += 1
        cpu = meter.figures("ask")
    out.put((times, cpu["ask_client_cpu_seconds"], cpu["ask_server_cpu_seconds"], statements[0]))


def concurrency(name: str, location: str, questions: list[str], clients: int, seconds: float) -> dict:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(clients + 1), context.Queue()
    workers = [
        context.Process(target=client, args=(name, location, questions, i * 3, barrier, seconds, out))
        for i in range(clients)
    ]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=1800)  # every client connected and warm (32 SQLite clients map a 1M-vector index)
    reports = [out.get(timeout=seconds + 600) for _ in workers]
    for worker in workers:
        worker.join()
    times = [t for report in reports for t in report[0]]
    per_ask = {  # CPU per ask: client processes, their server backends (PostgreSQL), statements sent
        "client_cpu_ms_per_ask": round(1000 * sum(r[1] for r in reports) / max(len(times), 1), 2),
        "server_cpu_ms_per_ask": round(1000 * sum(r[2] for r in reports) / max(len(times), 1), 2),
        "statements_per_ask": round(sum(r[3] for r in reports) / max(len(times), 1), 2),
    }
    return {"clients": clients, "queries": len(times), "queries_per_second": round(len(times) / seconds, 1),
            **latency_summary(times), **per_ask}  # fmt: skip


def migrate(sqlite_path: Path, url: str) -> dict:
    """`mem migrate` as a user runs it; its JSON report, condensed."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "crossmodalrag", "migrate", "--from", str(sqlite_path), "--to", url, "--json"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"mem migrate failed: {done.stderr.strip()[-500:]}")
    report = json.loads(done.stdout)
    tables = {
        table: {"rows": t["target_rows"], "identical": t["source_checksum"] == t["target_checksum"]}
        for table, t in report["tables"].items()
    }
    return {"wall_seconds": round(seconds, 1), "copy_seconds": round(report["seconds"], 1), "tables": tables,
            "identical": report["identical"], "left_behind": report.get("left_behind", {})}  # fmt: skip


def database(server, name: str, fresh: bool) -> str:
    """The url of database `name` on the server, created if missing (dropped first when `fresh`)."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and fresh:
            conn.execute(f"DROP DATABASE {name}")
        if fresh or not exists:
            conn.execute(f"CREATE DATABASE {name}")
    return server.get_uri(name)


def member_url(url: str) -> str:
    """A url for a new login role that is only a member of the role owning the rows: row-level
    security applies to it (a superuser, as the benchmark's own connection, bypasses every policy)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        owner = conn.execute("SELECT current_user").fetchone()[0]
        conn.execute("DROP ROLE IF EXISTS bench_member")
        conn.execute("CREATE ROLE bench_member LOGIN")
        conn.execute(f'GRANT "{owner}" TO bench_member')
    member = re.sub(r"postgresql://[^@/]*@", "postgresql://bench_member@", url)
    with psycopg.connect(url) as admin, psycopg.connect(member) as bound:
        visible = [conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] for conn in (admin, bound)]
    if visible[0] != visible[1]:  # the policies must hide nothing from a member: else the asks differ
        raise SystemExit(f"the member role sees {visible[1]} of {visible[0]} chunks")
    return member


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="postgres.py scale", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (tools/make_vault.py)")
    parser.add_argument("--notes", type=int, default=10_000, help="vault size (make_vault.py --notes)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each concurrency level asks")
    parser.add_argument("--workdir", type=Path, help="keep the vault, both memories and results/ here (default: temp)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--build-only", action="store_true", help="build (or finish building), ask nothing")
    parser.add_argument("--reuse", action="store_true", help="only ask, on the finished builds in --workdir")
    parser.add_argument("--parallel-build", action="store_true", help="build SQLite in a second process meanwhile")
    parser.add_argument("--no-migrate", action="store_true", help="skip benchmark 3 (`mem migrate`)")
    parser.add_argument("--rls", action="store_true", help="also ask PostgreSQL as a role bound by row-level security")
    args = parser.parse_args(argv)
    if args.reuse and not args.workdir:
        parser.error("--reuse needs the --workdir of an earlier run")
    return args


def builds(locations: dict[str, str], vault: Path, folder: Path, args: argparse.Namespace) -> None:
    """Build every backend whose build is not finished yet; with --parallel-build SQLite's runs in a
    second process beside PostgreSQL's (each step's figures then include the other's load)."""
    pending = [name for name in args.backends if not (Results(folder).read(f"{name}-build") or {}).get("finished")]
    if pending and args.reuse:
        raise SystemExit(f"--reuse: no finished build of {', '.join(pending)} in {folder}")
    beside = None
    if args.parallel_build and len(pending) == 2:
        beside = multiprocessing.get_context("spawn").Process(
            target=build, args=("sqlite", locations["sqlite"], vault, folder)
        )
        log("sqlite: ingest, vectors, index (in a second process)")
        beside.start()
        pending.remove("sqlite")
    try:
        for name in pending:
            log(f"{name}: ingest, vectors, index")
            build(name, locations[name], vault, folder)
        if beside is not None:
            beside.join()
            if beside.exitcode:
                raise SystemExit(f"the SQLite build failed (exit {beside.exitcode})")
    finally:
        if beside is not None and beside.is_alive():
            beside.terminate()
            beside.join()


def asks(locations: dict[str, str], questions: list[str], folder: Path, args: argparse.Namespace) -> None:
    results = Results(folder)
    for name in args.backends:
        for clients in args.clients:
            log(f"{name}: hybrid ask, {clients} clients, {args.seconds:.0f} s")
            results.write(
                f"{name}-ask_{clients}_clients", concurrency(name, locations[name], questions, clients, args.seconds)
            )
        if name == "postgresql" and args.rls:
            member = member_url(locations[name])
            for clients in args.clients:
                log(f"{name}: hybrid ask as a member role (row-level security), {clients} clients")
                ask = concurrency(name, member, questions, clients, args.seconds)
                results.write(f"{name}-ask_{clients}_clients_rls", ask)


def run(folder: Path, args: argparse.Namespace, keep: bool) -> dict:
    """Every phase in `folder`; the server (kept on disk when `keep`) is stopped before returning."""
    result: dict = {"benchmark": "postgres-scale", "notes": args.notes, "embedder": f"hashing, {DIM} dims"}
    if not (folder / "vault_manifest.json").exists():  # make_vault writes it last
        if args.reuse:
            raise SystemExit(f"--reuse: no finished vault in {folder}")
        make_vault(args.shared, folder / "vault", args.notes)
    rows = json.loads((folder / "vault_queries.json").read_text(encoding="utf-8"))
    questions = [LABEL.sub("", row["query_text"], count=1) for row in rows]
    server = None
    if "postgresql" in args.backends:
        server, result["server_settings"] = postgres_embedded.start(folder / "pgdata", keep)
    try:
        locations = {"sqlite": str(folder / "memory.db")}
        if server is not None:
            locations["postgresql"] = database(server, "scale", fresh=False)
        builds(locations, folder / "vault", folder, args)
        if not args.build_only:
            asks(locations, questions, folder, args)
        if not (args.build_only or args.no_migrate) and server is not None and "sqlite" in args.backends:
            log("mem migrate: the SQLite memory into an empty PostgreSQL database")
            Results(folder).write("migrate", migrate(folder / "memory.db", database(server, "migrated", fresh=True)))
        from crossmodalrag.store.postgres.connection import close_pools

        close_pools()
    finally:  # stopped while its data folder exists (at exit, after the folder went, it keeps running)
        if server is not None:
            server.cleanup()
    return {**result, **Results(folder).merged()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clean_environment()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill PID`: the finally blocks stop the server
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return print_result(run(args.workdir.resolve(), args, keep=True))
    with tempfile.TemporaryDirectory(prefix="bench-pgscale-") as tmp:
        return print_result(run(Path(tmp), args, keep=False))


if __name__ == "__main__":
    raise SystemExit(main())
