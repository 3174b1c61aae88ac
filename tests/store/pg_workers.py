"""Worker processes for the PostgreSQL concurrency tests: `python -m tests.store.pg_workers writer URL W ROUNDS`
writes shared and own notes ROUNDS times through the real ingest path; `reader URL STOPFILE` searches until
STOPFILE exists. Each prints one JSON line: what it did, with wall-clock times."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

SHARED, OWN = 5, 5


def version(uri: str, writer: int, round_: int) -> str:
    """A note of several chunks, every paragraph tagged with who wrote it in which round."""
    tag = f"writer{writer}round{round_}"
    return f"# {uri}\n\n" + "\n\n".join(f"{tag} paragraph {p} about zebras. " * 30 for p in range(4))


def uris(writer: int) -> list[str]:
    return [f"/vault/shared{i}.md" for i in range(SHARED)] + [f"/vault/w{writer}-{i}.md" for i in range(OWN)]


def write(url: str, writer: int, rounds: int) -> dict:
    from crossmodalrag.ingest import IngestReport, ingest_documents
    from crossmodalrag.store.postgres import open_postgres_store
    from tests.retrieval.helpers import note

    started, written = time.time(), 0
    with open_postgres_store(url) as store:
        for round_ in range(rounds):
            mine = uris(writer)
            mine = mine[writer % len(mine) :] + mine[: writer % len(mine)]  # writers start at different notes
            docs = [note(uri[len("/vault/") : -len(".md")], version(uri, writer, round_)) for uri in mine]
            report = IngestReport()
            ingest_documents(store, docs, known={}, report=report)
            written += report.added + report.updated
    return {"writer": writer, "written": written, "started": started, "ended": time.time()}


def read(url: str, stop: Path) -> dict:
    from crossmodalrag.retrieval.search import SearchOptions, search
    from crossmodalrag.store.postgres import open_postgres_store

    times, errors = [], []
    with open_postgres_store(url, create=False) as store:
        while not stop.exists():
            try:
                search(store, "zebras paragraph", SearchOptions(top_k=5))
                times.append(time.time())
            except Exception as error:  # counted: the test requires none
                errors.append(repr(error))
            time.sleep(0.02)
    return {"reads": times, "errors": errors}


if __name__ == "__main__":
    kind, url = sys.argv[1], sys.argv[2]
    result = write(url, int(sys.argv[3]), int(sys.argv[4])) if kind == "writer" else read(url, Path(sys.argv[3]))
    print(json.dumps(result))
