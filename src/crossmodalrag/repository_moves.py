"""Commits of a repository that was moved: stored under its old path, read again under the new one.

A commit's uri is `<repository path>@<sha>`, so a repository moved (or its folder renamed) and
ingested from its new path stored every commit a second time, and answers kept citing the old path.
A new commit whose sha is stored under a repository path gone from disk is that commit, moved: it
keeps its source id (store/documents.py move_document). A clone beside the original is not a move:
the original is still on disk.
"""

from __future__ import annotations

import os

from crossmodalrag.store import Store
from crossmodalrag.types import Document


class RepositoryMoves:
    """The `origin` of ingest's moves (vaults.Moves, file_moves.FileMoves) for commits."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.by_sha: dict[str, list[str]] | None = None  # sha → uris of it under repositories gone from disk

    def _stored(self) -> dict[str, list[str]]:
        """Read once, when the first new commit is met; each repository path is looked up on disk once."""
        if self.by_sha is None:
            self.by_sha, present = {}, {}
            for (uri,) in self.store.conn.execute("SELECT uri FROM sources WHERE source_type = 'commit'"):
                repository, _, sha = uri.rpartition("@")
                if repository not in present:
                    present[repository] = os.path.lexists(repository)
                if not present[repository]:
                    self.by_sha.setdefault(sha, []).append(uri)
        return self.by_sha

    def origin(self, doc: Document, seen: set[str]) -> str | None:
        """The uri of the same commit stored under a repository path gone from disk, or None."""
        sha = doc.uri.rpartition("@")[2]
        candidates = self._stored().get(sha, [])
        for uri in candidates:
            if uri != doc.uri and uri not in seen:
                candidates.remove(uri)
                return uri
        return None
