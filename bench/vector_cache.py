#!/usr/bin/env python3
"""The memory-mapped vector copy after a small change: updated in place of rebuilt.

    python bench/vector_cache.py [--notes 3000] [--rows 100000] [--workdir DIR]

Generates a vault (../shared/tools/make_vault.py), ingests it, and stores random unit vectors for
its chunks, several pieces a chunk, until there are --rows vector rows (what the rows mean does not
matter to reading them). Then, each step in a fresh process (its wall time and peak RSS): the first
copy built from SQLite; a note's worth of change (rows added, rows deleted) and the copy updated;
and, the baseline in the same run, the same state's copy rebuilt from SQLite (the copy removed first),
which is what every change cost before the update path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import DEFAULT_SHARED, clean_environment, log, make_vault, print_result

STEP = """
import json, resource, sys, time
from crossmodalrag.index.embed import ModelIdentity
from crossmodalrag.index.embeddings import cached_vectors, vectors_stamp
from crossmodalrag.store import open_store
identity = ModelIdentity(**json.loads(sys.argv[2]))
with open_store(sys.argv[1]) as store:
    started = time.perf_counter()
    ids, chunks, matrix = cached_vectors(store, identity, vectors_stamp(store, identity))
    seconds = time.perf_counter() - started
print(json.dumps({"rows": len(ids), "seconds": round(seconds, 3),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def store_pieces(db_path: Path, rows: int) -> dict:
    """Random unit vectors under a made-up model identity, `rows` of them over the chunks."""
    import numpy as np

    from crossmodalrag.index.embed import ModelIdentity
    from crossmodalrag.index.embeddings import model_row
    from crossmodalrag.store import open_store

    identity = ModelIdentity(name="bench-random", sha256="0" * 64, dim=384, max_tokens=256)
    rng = np.random.default_rng(0)
    with open_store(db_path) as store:
        model_id = model_row(store, identity)
        chunks = [row[0] for row in store.conn.execute("SELECT id FROM chunks ORDER BY id")]
        pieces = -(-rows // len(chunks))
        wanted = [(chunk, piece) for piece in range(pieces) for chunk in chunks][:rows]
        with store.transaction() as conn:
            for start in range(0, len(wanted), 10_000):
                block = wanted[start : start + 10_000]
                vectors = rng.standard_normal((len(block), identity.dim)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                conn.executemany(
                    "INSERT INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector) VALUES (?, ?, ?, ?, ?)",
                    [(c, model_id, p, pieces, v.tobytes()) for (c, p), v in zip(block, vectors, strict=True)],
                )
    return {"name": identity.name, "sha256": identity.sha256, "dim": identity.dim, "max_tokens": identity.max_tokens}


def change_a_note(db_path: Path) -> None:
    """What saving one note does to the vectors: its old rows deleted, new ones added."""
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        chunk, model = conn.execute("SELECT chunk_id, model_id FROM chunk_vectors ORDER BY id LIMIT 1").fetchone()
        vectors = conn.execute(
            "SELECT piece, pieces, vector FROM chunk_vectors WHERE chunk_id = ?", (chunk,)
        ).fetchall()
        conn.execute("DELETE FROM chunk_vectors WHERE chunk_id = ?", (chunk,))
        conn.executemany(
            "INSERT INTO chunk_vectors (chunk_id, model_id, piece, pieces, vector) VALUES (?, ?, ?, ?, ?)",
            [(chunk, model, *row) for row in vectors],
        )


def step(db_path: Path, identity: dict) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", STEP, str(db_path), json.dumps(identity)],
        env=clean_environment(),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--notes", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-vector-cache-"))
    db_path = work / "memory.db"
    log(f"generating and ingesting {args.notes} notes")
    make_vault(args.shared, work / "vault", args.notes)
    env = {**clean_environment(), "CMRAG_DB_PATH": str(db_path)}
    command = [sys.executable, "-m", "crossmodalrag", "ingest-notes", str(work / "vault")]
    subprocess.run(command, env=env, check=True, capture_output=True)
    log(f"storing {args.rows} vector rows")
    identity = store_pieces(db_path, args.rows)
    first = step(db_path, identity)
    change_a_note(db_path)
    updated = step(db_path, identity)
    shutil.rmtree(db_path.with_name(db_path.name + ".vectors"))
    rebuilt = step(db_path, identity)
    print_result(
        {
            "benchmark": "vector_cache",
            "first_copy": first,
            "after_one_note_updated": updated,
            "after_one_note_rebuilt_baseline": rebuilt,
            "update_over_rebuild_seconds": round(updated["seconds"] / rebuilt["seconds"], 3),
        }
    )


if __name__ == "__main__":
    sys.exit(main())
