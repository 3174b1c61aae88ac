#!/usr/bin/env python3
"""`mem forget` at scale: forgetting N of M stored notes, step by step, against the per-title loop.

    python bench/forget_scale.py [--notes 5000] [--forget 1,500,5000] [--shared DIR] [--workdir DIR]

Generates a vault (shared/tools/make_vault.py), ingests it once (no embedding model: this measures
the store), then for each N: a fresh copy of that database forgets the first N notes (by uri) as
`mem forget --path` does: the search for copies of their text still in memory (versioning/lineage.py
`live_copies`), then `forget_sources`, timed per step through its `stage` callback (erasing the
stored versions, deleting the rows, purging the text index, which FTS5 'optimize' rewrites whole; the
purge step includes the commit), and the write-ahead log's size at its end.
The baseline, measured in the same run on the same copy: the search for copies as it was before,
one `SELECT uri FROM sources WHERE title = ?` per title (no index on title: a scan of every source
each), which made forgetting a whole vault take minutes. Both must find the same copies.

Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from benchlib import DEFAULT_SHARED, log, make_vault, print_result

from crossmodalrag.forget import find_sources, forget_sources, still_in_memory
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import open_store
from crossmodalrag.versioning.lineage import _states_of, document_text_key
from crossmodalrag.versioning.log import has_log
from crossmodalrag.versioning.sources import read_source


def per_title_copies(conn, uris: list[str]) -> list[str]:
    """`live_copies` as it was at session 33's start: a query, so a scan of `sources`, per title."""
    if not has_log(conn):
        return []
    states = [state for uri in uris for state in _states_of(conn, uri)]
    keys, titles = {document_text_key(state) for state in states}, {state.get("title") for state in states}
    found = []
    for title in sorted(t for t in titles if t):
        for (uri,) in conn.execute("SELECT uri FROM sources WHERE title = ?", (title,)).fetchall():
            state = read_source(conn, uri)
            if uri not in uris and state is not None and state["chunks"] and document_text_key(state) in keys:
                found.append(uri)
    return [uri for uri in sorted(set(found)) if uri not in uris]


STEPS = {"erasing": "erase_versions", "deleting": "delete_rows", "purging": "purge_text_index"}  # first words


class StageClock:
    """Seconds spent in each step `forget_sources` announces (a step lasts until the next one)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.current, self.started = None, time.perf_counter()

    def __call__(self, stage: str) -> None:
        self.stop()
        self.current, self.started = STEPS[stage.split()[0]], time.perf_counter()

    def stop(self) -> None:
        if self.current is not None:
            self.seconds[self.current] = round(time.perf_counter() - self.started, 3)
        self.current = None


def forget_first(base: Path, work: Path, count: int) -> dict:
    database = work / "forget.db"
    for suffix in ("", "-wal", "-shm", "-writers"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(base, database)
    with open_store(database) as store:
        everything = find_sources(store, path=work / "vault")
        stored = len(everything)
        sources = everything[:count]
        uris = sorted({source.uri for source in sources})
        started = time.perf_counter()
        before = per_title_copies(store.conn, uris)
        per_title = time.perf_counter() - started
        started = time.perf_counter()
        copies = still_in_memory(store, sources)
        one_pass = time.perf_counter() - started
        assert copies == before, (copies, before)
        clock = StageClock()
        started = time.perf_counter()
        report = forget_sources(store, sources, stage=clock)
        clock.stop()
        forgetting = time.perf_counter() - started
        wal = Path(f"{database}-wal")  # before closing, which checkpoints it
        wal_mb = round(wal.stat().st_size / 2**20, 1) if wal.exists() else 0.0
    result = {
        "forgotten": len(sources),
        "stored": stored,
        "chunks_forgotten": report.chunks,
        "copies_found": len(copies),
        "copies_lookup_seconds": round(one_pass, 3),
        "per_title_lookup_seconds": round(per_title, 3),
        "lookup_speedup": round(per_title / one_pass, 1) if one_pass else None,
        "forget_sources_seconds": round(forgetting, 3),
        "steps_seconds": clock.seconds,
        "total_seconds": round(one_pass + forgetting, 3),
        "total_seconds_with_per_title_lookup": round(per_title + forgetting, 3),
        "wal_mb": wal_mb,
    }
    log(
        f"forget {len(sources)} of {stored}: lookup {one_pass:.2f} s (per title {per_title:.2f} s),"
        f" forget_sources {forgetting:.2f} s {clock.seconds}"
    )
    return result


def run(args: argparse.Namespace) -> dict:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cmrag-forget-scale-"))
    vault, base = work / "vault", work / "base.db"
    if not vault.is_dir():
        make_vault(args.shared, vault, args.notes)
    if not base.exists():
        started = time.perf_counter()
        with open_store(base) as store:
            report = ingest_notes(store, [vault])
            chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        log(f"ingest: {time.perf_counter() - started:.1f} s ({report.summary()})")
    else:
        with open_store(base) as store:
            chunks = store.conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    runs = [forget_first(base, work, count) for count in args.forget]
    return {"notes": args.notes, "chunks_stored": chunks, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=5000)
    parser.add_argument("--forget", type=lambda text: [int(n) for n in text.split(",")], default=[1, 500, 5000])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--workdir", type=Path)
    return print_result(run(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
