"""Git history: the commit ids of `git log`, then one streamed `git log -p` of those to read (those
not stored yet; see git_log), parsed into one Document per commit.

A single streamed `git log` reads ~1,000 commits with diffs in 0.08 s here; driving git through a
library object per commit (GitPython) took 5.6 s for the same work.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from itertools import islice
from pathlib import Path
from typing import Iterator

from crossmodalrag.chunking.diff import DIFF_LEFT_OUT, FILE_START, file_diffs
from crossmodalrag.connectors import git_log
from crossmodalrag.connectors.git_log import FIELD, MAX_FILE_DIFF_CHARS, log_failed
from crossmodalrag.connectors.globs import selected
from crossmodalrag.errors import ConnectorError
from crossmodalrag.privacy import has_private, strip_private
from crossmodalrag.types import Document

# In each commit's fingerprint (Document.extractor): commits stored when they were dated by committer
# date re-derive with their author date on the next ingest.
EXTRACTOR = "git log, author date"
# In each commit's stamp only (repositories._commit_stamp): bumped, every stored commit is read again
# (git reads 1,000 in well under a second) and only those that now read otherwise are rewritten and
# embedded. 2: an oversized file's diff header kept (_header_only).
READER_VERSION = "2"
HUNK_START = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
COMBINED_HUNK_START = re.compile(r"^(@@@+) (?:-\d+(?:,\d+)? )+\+(\d+)(?:,\d+)? \1")
NOTE_SUFFIXES = (".md", ".markdown")
BLOB_BATCH = 256  # commits whose notes are read back in one `git cat-file --batch`


def repository_root(path: Path) -> Path:
    """The top folder of the repository at path. Raises ConnectorError if there is none."""
    if shutil.which("git") is None:
        raise ConnectorError("the git command is not installed", "install git (e.g. apt-get install git)")
    if not path.is_dir():
        what = "a file, not a repository folder" if path.exists() else "no such folder"
        raise ConnectorError(f"{path}: {what}", "give the repository's folder")
    bare = _git(path, "rev-parse", "--is-bare-repository")
    if bare.returncode != 0:
        raise ConnectorError(f"{path} is not a git repository", "pass the folder that contains .git")
    # A bare repository (a server's copy, a backup) has history but no work tree: its git folder is its root.
    if bare.stdout.strip() == b"true":
        return _rev_parse_path(path, "--absolute-git-dir")
    top = _rev_parse_path(path, "--show-toplevel")
    if top is None and _git(path, "rev-parse", "--is-inside-git-dir").stdout.strip() == b"true":
        top = _rev_parse_path(path, "--absolute-git-dir").parent  # given repo/.git: the repository is repo
    if top is None:
        raise ConnectorError(f"{path} is not inside the repository's work tree", "pass the folder that contains .git")
    return top


def stored_name(root: Path) -> Path:
    """The folder a repository's commits are stored under: root itself, except in a linked work tree
    (`git worktree add`), whose commits are the main work tree's objects: stored under the main one's
    name, a commit read from both is one source (the worktree's own branch still adds its commits)."""
    git_dir = _rev_parse_path(root, "--absolute-git-dir")
    common = _rev_parse_path(root, "--git-common-dir")
    if git_dir is None or common is None or (root / common).resolve() == git_dir.resolve():
        return root  # not a linked work tree (a submodule's git folder is its own common folder too)
    listed = _git(root, "worktree", "list", "--porcelain").stdout.decode("utf-8", "replace")
    main = listed.partition("\n")[0].removeprefix("worktree ")  # the main work tree is listed first
    return Path(main) if listed.startswith("worktree ") and Path(main).is_dir() else root


def _rev_parse_path(path: Path, option: str) -> Path | None:
    """A folder `git rev-parse` names, or None where it names none (--show-toplevel inside .git prints
    nothing: read as a path, that was the current folder, whatever repository it is in)."""
    found = _git(path, "rev-parse", option)
    text = found.stdout.decode("utf-8", "replace").strip()
    return Path(text) if found.returncode == 0 and text else None


def read_commits(
    root: Path,
    max_commits: int | None = None,
    author: str | None = None,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    name: Path | None = None,
    left_out: list[str] | None = None,
    only: list[str] | None = None,
) -> Iterator[Document]:
    """Commits of HEAD's history in `git log` order (newest committed first), as Documents of message
    plus diff hunks, stored under name (default root; see stored_name). With `only`, those commits
    (from commit_ids) in that order: git is asked for no other commit's patch.

    With include/exclude globs, a commit none of whose changed files is selected is left out, its uri
    appended to left_out: a stored copy of it must go, as a first ingest with those globs never stores it.
    The oldest commits of a shallow clone keep their message only (see shallow_boundary).
    Raises ConnectorError if git log fails.
    """
    shas = commit_ids(root, max_commits, author) if only is None else only
    boundary = shallow_boundary(root)
    records = git_log.log_records(root, shas)
    while batch := [
        _commit(name or root, record, include or [], exclude or [], boundary) for record in islice(records, BLOB_BATCH)
    ]:
        blobs = _read_blobs(root, [spec for commit in batch for spec in _private_specs(commit)])
        for commit in batch:
            if commit.metadata.pop("_filtered_out"):
                if left_out is not None:
                    left_out.append(commit.uri)
                continue
            message, diff = _without_private(commit, blobs)
            commit.text, commit.metadata["_message_chars"] = f"{message}\n\n{diff}" if diff else message, len(message)
            yield commit


def commit_ids(root: Path, max_commits: int | None = None, author: str | None = None) -> list[str]:
    """The ids of HEAD's history in `git log` order, the newest max_commits, by author when given: a
    list without patches, so a stored commit's patch need not be read again. Raises ConnectorError if
    git log fails (a bad --author pattern)."""
    if not _has_commits(root):
        return []  # no commits yet: nothing to remember
    args = ["log", "--format=%H"]
    if max_commits:
        args.append(f"--max-count={max_commits}")
    if author:
        args.append(f"--author={author}")
    result = _git(root, *args)
    if result.returncode != 0:
        raise log_failed(root, result.stderr, result.returncode, author)
    return result.stdout.decode("ascii", "replace").split()


def unreachable(root: Path, shas: list[str]) -> list[str]:
    """Those of the commits that no branch, tag or HEAD reaches (git may still hold them until it
    collects garbage, but the repository's history no longer has them)."""
    if not shas:
        return []
    result = _git(root, "rev-list", "--all")
    if result.returncode != 0:
        return []  # cannot tell: keep everything
    reachable = set(result.stdout.decode("ascii", "replace").split())
    return [sha for sha in shas if sha not in reachable]


def past_shallow_boundary(root: Path, shas: list[str]) -> list[str]:
    """Those of the commits that a shallow clone (`git clone --depth`) does not hold: history past its
    boundary is not known here, and cannot be told from history rewritten away. None in a full clone,
    whose `rev-list --all` is the whole history."""
    if not shas or not shallow_boundary(root):
        return []
    result = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-check"],
        input="\n".join(shas).encode("ascii") + b"\n",
        capture_output=True,
        check=False,
    )
    answers = result.stdout.decode("utf-8", "replace").splitlines()
    if result.returncode != 0 or len(answers) != len(shas):
        return list(shas)  # cannot tell: keep them all
    return [sha for sha, answer in zip(shas, answers, strict=True) if answer.endswith(" missing")]


def shallow_boundary(root: Path) -> set[str]:
    """The commits a shallow clone (`git clone --depth`) holds without their parents. git diffs such a
    commit against nothing, as if it added the whole tree: stored so, a search for any line of any file
    would cite it."""
    found = _git(root, "rev-parse", "--git-path", "shallow")
    listed = root / found.stdout.decode("utf-8", "replace").strip()
    if found.returncode != 0 or not listed.is_file():
        return set()
    return set(listed.read_text("ascii", "replace").split())


def _has_commits(root: Path) -> bool:
    """Does HEAD name a commit? False for a new repository (HEAD names a branch with no commits yet).
    Raises ConnectorError if HEAD names neither, e.g. its branch file holds garbage: that must not
    pass for "no commits yet". Decided from git's exit codes, not from the wording of its messages.
    """
    if _git(root, "rev-parse", "--verify", "-q", "HEAD").returncode == 0:
        return True
    if _git(root, "symbolic-ref", "-q", "HEAD").returncode == 0:
        return False
    raise ConnectorError(
        f"{root}: HEAD does not point at a readable commit or branch", "run `git fsck` in the repository"
    )


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, check=False)


def _commit(root: Path, record: str, include: list[str], exclude: list[str], boundary: set[str]) -> Document:
    sha, name, email, authored, message, patch = record.split(FIELD, 5)
    message = message.strip()
    patch = "" if sha in boundary else patch.strip("\n")  # its real changes are unknown: none is stored
    diff, files, skipped = _filter_diff(patch, include, exclude)
    subject = _title(message)
    metadata = {"repo": str(root), "sha": sha, "author": name, "email": email, "files": files}
    # where the diff starts: a message may itself quote a `diff --git` line (underscore keys are not stored)
    metadata["_message_chars"] = len(message)
    metadata["_shallow_boundary"] = sha in boundary
    # it changed files, none of them selected; a commit that changed none (empty, a merge) is kept
    metadata["_filtered_out"] = not files and bool(include or exclude) and bool(FILE_START.search(patch))
    if skipped:
        metadata["skipped_files"] = skipped
    return Document(
        uri=f"{root}@{sha}",
        source_type="commit",
        title=subject,
        text=f"{message}\n\n{diff}" if diff else message,
        format="diff",
        modality="code",
        timestamp=float(authored),
        locator=f"{root.name}@{sha[:7]}",
        metadata=metadata,
        extractor=EXTRACTOR,
    )


def _title(message: str) -> str:
    """The commit's first line without its private spans: the title is stored and searched, and it opens
    every chunk's breadcrumb line, so a secret in the subject must leave it as it leaves the body."""
    lines = strip_private(message).strip().splitlines()
    return " ".join(lines[0].split()) if lines else "(no message)"


def _needs_files(path: str, piece: str) -> bool:
    return path.lower().endswith(NOTE_SUFFIXES) or has_private(piece)


def _blob_specs(sha: str, old: str, new: str) -> tuple[str, str]:
    return f"{sha}^:{old}", f"{sha}:{new}"


def _split_message(commit: Document) -> tuple[str, str]:
    """(message, diff) of a commit's text."""
    at = commit.metadata["_message_chars"]
    return commit.text[:at], commit.text[at:].lstrip("\n")


def _private_specs(commit: Document) -> list[str]:
    """The file versions (`sha:path`) needed to strip private spans from this commit's hunks."""
    sha = commit.metadata["sha"]
    pieces = file_diffs(_split_message(commit)[1])
    return [spec for old, new, piece in pieces if _needs_files(new, piece) for spec in _blob_specs(sha, old, new)]


def _read_blobs(root: Path, specs: list[str]) -> dict[str, list[str] | None]:
    """Each `sha:path` → its lines with private spans stripped (None if it did not exist), read by one
    `git cat-file --batch` process."""
    specs = [spec for spec in specs if "\n" not in spec]  # one spec a line: such a path reads as missing
    if not specs:
        return {}
    result = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch"],
        input="\n".join(specs).encode("utf-8") + b"\n",
        capture_output=True,
        check=False,
    )
    blobs, out, position = {}, result.stdout, 0
    for spec in specs:
        end = out.find(b"\n", position)
        header = out[position:end].split()
        # "<sha> blob <size>", else "<spec> missing" (a spec's path may hold spaces: no field count tells)
        if end < 0 or len(header) != 3 or not header[2].isdigit():
            blobs[spec], position = None, end + 1
            continue
        size = int(header[2])
        text = out[end + 1 : end + 1 + size].decode("utf-8", "replace")
        blobs[spec], position = strip_private(text).split("\n"), end + 2 + size
    return blobs


def _without_private(commit: Document, blobs: dict[str, list[str] | None]) -> tuple[str, str]:
    """The commit's message and diff without `<private>` spans: the notes connector strips them from a vault, and a
    vault kept in git (the obsidian-git plugin) must not store them through its diffs either.

    A hunk shows a few lines of context, so a changed line inside a private span often shows neither
    tag: for notes, and for any file whose diff shows a tag, each line is replaced by that line of the
    whole file (before or after the commit) with its private spans stripped, which keeps line numbers.
    """
    message, diff = _split_message(commit)
    message = strip_private(message)
    pieces = []
    for old_path, new_path, piece in file_diffs(diff):
        if _needs_files(new_path, piece):
            old, new = (blobs.get(spec) for spec in _blob_specs(commit.metadata["sha"], old_path, new_path))
            piece = _strip_combined(piece, new) if piece.startswith("diff --cc ") else _strip_hunks(piece, old, new)
        pieces.append(piece)
    return message, "".join(pieces)


def _strip_hunks(piece: str, old: list[str] | None, new: list[str] | None) -> str:
    """Rewrite each hunk line from the stripped file it came from; without the file, strip the line
    itself (an unclosed tag then hides the rest of the hunk, which errs on the side of hiding)."""
    out, old_line, new_line = [], 0, 0
    for line in piece.split("\n"):
        hunk = HUNK_START.match(line)
        if hunk:
            old_line, new_line = int(hunk.group(1)), int(hunk.group(2))
            out.append(hunk.group(0))  # without the line git shows after it, which may be private
            continue
        if not old_line and not new_line or not line or line[0] not in " +-":
            out.append(line)  # headers before the first hunk, "\ No newline at end of file"
            continue
        marker, side = line[0], old if line[0] == "-" else new
        number = old_line if marker == "-" else new_line
        if side is not None and 0 < number <= len(side):
            out.append(marker + side[number - 1])
        else:
            out.append(line if not has_private(line) else marker + strip_private(line[1:]))
        old_line += marker != "+"
        new_line += marker != "-"
    return strip_private("\n".join(out)) if has_private("\n".join(out)) else "\n".join(out)


def _strip_combined(piece: str, merged: list[str] | None) -> str:
    """A merge's combined diff (`@@@ -a -b +c @@@`, a column of +/- per parent) without private spans:
    the lines the merge kept, rewritten from its stripped file; a parent's line it dropped is left
    out, as that parent's file is not read (the resolution is what the merge wrote)."""
    out, line_number, parents = [], 0, 0
    for line in piece.split("\n"):
        hunk = COMBINED_HUNK_START.match(line)
        if hunk:
            line_number, parents = int(hunk.group(2)), len(hunk.group(1)) - 1
            out.append(hunk.group(0))
            continue
        marks = line[:parents]
        if not parents or len(marks) < parents or marks.strip(" +-"):
            out.append(line)  # headers before the first hunk, "\ No newline at end of file"
            continue
        if "-" in marks:
            continue
        kept = merged[line_number - 1] if merged is not None and 0 < line_number <= len(merged) else None
        out.append(marks + (kept if kept is not None else strip_private(line[parents:])))
        line_number += 1
    return strip_private("\n".join(out)) if has_private("\n".join(out)) else "\n".join(out)


def _filter_diff(patch: str, include: list[str], exclude: list[str]) -> tuple[str, list[str], list[str]]:
    """Keep the per-file diffs the globs select; of an oversized one, only its header and a line
    saying its diff was left out: like a binary file's, it is a chunk that names the file, so "when
    did package-lock.json change?" finds the commit."""
    kept, files, skipped = [], [], []
    for _, path, piece in file_diffs(patch):
        if not selected(path, include, exclude):
            continue
        files.append(path)
        if len(piece) > MAX_FILE_DIFF_CHARS:
            skipped.append(path)
            piece = _header_only(piece)
        kept.append(piece.rstrip("\n"))
    return "\n".join(kept), files, skipped


def _header_only(piece: str) -> str:
    """An oversized file diff's lines before its first hunk, then why the hunks are not there."""
    first_hunk = re.search(r"^@@", piece, re.M)
    header = piece[: first_hunk.start() if first_hunk else len(piece)].rstrip("\n")
    return f"{header}\n{DIFF_LEFT_OUT} over {MAX_FILE_DIFF_CHARS:,} characters (a generated file, a lockfile?)"
