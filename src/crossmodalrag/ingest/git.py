"""`ingest_git`: the commits of repositories, apart from the file-based connectors' ingest."""

from __future__ import annotations

from pathlib import Path

from crossmodalrag.connectors import git
from crossmodalrag.errors import CMRAGError
from crossmodalrag.ingest.report import IngestReport, Progress
from crossmodalrag.ingest.storing import ingest_documents
from crossmodalrag.repository_moves import RepositoryMoves
from crossmodalrag.store import Store
from crossmodalrag.store.documents import known_fingerprints
from crossmodalrag.wording import counted


def ingest_git(
    store: Store,
    repos: list[Path],
    max_commits: int | None = None,
    author: str | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    progress: Progress | None = None,
) -> IngestReport:
    """Ingest commits of each repository; a bad path fails alone and the others still ingest.
    Stored commits that no branch or tag reaches any more (amended, rebased, a branch deleted)
    leave the memory: rewriting history is how people take a leaked secret out of a repository. So
    do those the include/exclude globs now leave out: the same globs give the same memory whatever
    was ingested before."""
    from crossmodalrag import repositories  # it builds on this package's reports and removals

    report = IngestReport()
    for repo in repos:
        try:
            root = git.repository_root(Path(repo).expanduser().resolve())
            name = git.stored_name(root)
            known = known_fingerprints(store, f"{name}@", "commit")
            oversized: list[str] = []
            shallow: list[str] = []
            left_out: list[str] = []
            selecting: list[str] = []
            commits = repositories.read_repository(
                store, root, name, known, (max_commits, author, include, exclude), left_out
            )
            before = report.read
            noted = repositories.noting_gaps(commits, known, oversized, shallow, selecting)
            seen = ingest_documents(store, noted, known, report, progress, RepositoryMoves(store))
            if left_out and not selecting and any(uri in known for uri in left_out):
                # a mistyped pattern, not every change to go: as ingest-notes refuses one selecting no note
                patterns = [f"--include {p!r}" for p in include or []] + [f"--exclude {p!r}" for p in exclude or []]
                report.failures.append(
                    f"{root}: {' '.join(patterns)} {'selects' if len(patterns) == 1 else 'select'} none of its commits "
                    "(hint: check the patterns; nothing was removed)"
                )
                continue
            if report.read == before:
                report.notices.append(f"{root}: no commits" + (f" by {author!r}" if author else "") + " to read")
            if oversized:
                report.notices.append(
                    f"{root}: the diffs of {counted(len(oversized), 'changed file')} over "
                    f"{git.MAX_FILE_DIFF_CHARS:,} characters were left out, their names kept (e.g. {oversized[0]})"
                )
            if shallow:
                report.notices.append(repositories.shallow_notice(root, shallow))
            repositories.remove_dropped_commits(store, root, known, seen, left_out, report)
        except CMRAGError as error:
            report.failures.append(str(error))
            if progress:
                progress(report)
    return report
