"""What long runs say on stderr when no terminal shows a live line."""

from __future__ import annotations

import io
from types import SimpleNamespace

from crossmodalrag.cli.progress import EmbedProgress


def test_a_large_embedding_backlog_is_announced_once_without_a_terminal():
    out = io.StringIO()  # not a TTY: no live line
    progress = EmbedProgress(out)
    progress(SimpleNamespace(chunks=64, seconds=8.0), 22_000)
    progress(SimpleNamespace(chunks=128, seconds=16.0), 22_000)
    assert out.getvalue() == (
        "embedding 22,000 chunks that have no vector yet, about 46 min"
        " (stopping is safe: `mem reindex-embeddings` goes on from there)\n"
    )
    small = io.StringIO()
    EmbedProgress(small)(SimpleNamespace(chunks=5, seconds=1.0), 5)
    assert small.getvalue() == ""
