"""What an ingest of a git repository knows beyond the commits it stores: which stored commits are
current without asking git for their patches, what a shallow clone cannot tell, and which stored
commits history dropped (ingest.ingest_git reads a repository through these)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from crossmodalrag.connectors import git
from crossmodalrag.connectors.globs import FOLDER_SYNTAX, read_otherwise_before
from crossmodalrag.connectors.globs import SYNTAX as GLOB_SYNTAX
from crossmodalrag.file_moves import known_files
from crossmodalrag.ingest import Unchanged, remove_sources
from crossmodalrag.store import Store, documents
from crossmodalrag.types import Document
from crossmodalrag.wording import counted

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport


def noting_gaps(
    commits: Iterable[Document | Unchanged],
    known: dict,
    oversized: list[str],
    shallow: list[str],
    selecting: list[str],
) -> Iterator[Document | Unchanged]:
    """The commits as they come, noting the files of new ones whose diffs were too large to store,
    the shallow clone's oldest commits, whose diffs git cannot tell, and those that changed a file
    the globs select (`selecting`)."""
    for commit in commits:
        if isinstance(commit, Unchanged):  # stored under these very globs: they are no typo
            selecting.append(commit.uri)
            yield commit
            continue
        if commit.metadata.get("files"):
            selecting.append(commit.uri)
        if commit.uri not in known:
            oversized.extend(commit.metadata.get("skipped_files", []))
        if commit.metadata.get("_shallow_boundary"):
            shallow.append(commit.metadata["sha"])
        yield commit


def shallow_notice(root: Path, shallow: list[str]) -> str:
    example = shallow[0][:7]
    oldest = f"commit {example} is" if len(shallow) == 1 else f"{len(shallow)} commits (e.g. {example}) are"
    return (
        f"{root}: a shallow clone: its oldest {oldest} stored without a diff, git not having the parent to "
        "compare with (hint: run `git fetch --unshallow` in the repository, then ingest it again)"
    )


def _past_boundary_notice(root: Path, count: int) -> str:
    return (
        f"{root}: a shallow clone: {counted(count, 'stored commit')} past its oldest kept as stored, git not "
        "holding them here to tell whether history still has them (hint: run `git fetch --unshallow` in "
        "the repository, then ingest it again)"
    )


def read_repository(
    store: Store,
    root: Path,
    name: Path,
    known: dict[str, str],
    select: tuple[int | None, str | None, list[str] | None, list[str] | None],
    left_out: list[str],
) -> Iterator[Document | Unchanged]:
    """The commits `select` (max commits, author, include, exclude) names: those stored as they would be
    derived now as Unchanged, without asking git for their patches (a no-op sync of a repository with a
    50 MB file read 50 MB of diff each time), the others read and stamped."""
    max_commits, author, include, exclude = select
    ids = git.commit_ids(root, max_commits, author)
    stamp = _commit_stamp(include, exclude)
    stamps = {uri: stored.stamp for uri, stored in known_files(store, f"{name}@", "commit").items()}
    boundary = git.shallow_boundary(root)
    # A shallow clone's oldest commit stored at all stays as stored: git diffs it against nothing, and a
    # re-clone with `--depth` must not cost it its stored diff.
    current = {
        sha for sha in ids if stamps.get(f"{name}@{sha}") == stamp or (sha in boundary and f"{name}@{sha}" in known)
    }
    yield from (Unchanged(f"{name}@{sha}") for sha in ids if sha in current)
    unread = [sha for sha in ids if sha not in current]
    for commit in git.read_commits(root, None, None, include, exclude, name, left_out, only=unread):
        # stored while on the boundary (message only), it is read again once the clone is unshallowed
        commit.metadata["file_stamp"] = stamp + (" shallow" if commit.metadata["_shallow_boundary"] else "")
        yield commit


def _commit_stamp(include: list[str] | None, exclude: list[str] | None) -> str:
    """What besides its id decides what is stored of a commit, kept as its `file_stamp`: the reader (bump
    git.READER_VERSION when what it derives changes), the chunker, the diff cap and the globs."""
    given: list = [include or [], exclude or []]
    if any("[" in glob for side in given for glob in side):  # read otherwise before: selected other commits
        given.append(GLOB_SYNTAX)
    if any(read_otherwise_before(glob) for side in given[:2] for glob in side):  # likewise
        given.append(FOLDER_SYNTAX)
    globs = hashlib.sha256(json.dumps(given).encode()).hexdigest()[:16]
    reader = f"{git.EXTRACTOR} reader {git.READER_VERSION}"
    return f"{reader} chunker {documents.CHUNKER_VERSION} cap {git.MAX_FILE_DIFF_CHARS} globs {globs}"


def remove_dropped_commits(
    store: Store, root: Path, known: dict[str, str], seen: set[str], left_out: list[str], report: IngestReport
) -> None:
    """Remove stored commits the globs now leave out (a first ingest with them would not store them),
    and those no branch, tag or HEAD reaches any more. A commit only another branch reaches stays: it
    is still the repository's history, and a linked work tree's branch adds its commits under the same name."""
    filtered = [uri for uri in left_out if uri in known]
    unseen = {uri.rpartition("@")[2]: uri for uri in known if uri not in seen and uri not in filtered}
    unreachable = git.unreachable(root, list(unseen))
    # a shallow clone's `rev-list --all` stops at its boundary: what lies past it was not taken away
    unknown = set(git.past_shallow_boundary(root, unreachable))
    if unknown:
        report.notices.append(_past_boundary_notice(root, len(unknown)))
    gone = [unseen[sha] for sha in unreachable if sha not in unknown]
    if filtered or gone:
        report.removed += remove_sources(store, filtered + gone)
