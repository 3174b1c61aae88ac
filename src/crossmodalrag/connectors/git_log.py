"""Reading `git log -p` as it comes: one record per commit, a file's oversized diff cut as it is read."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Iterator

from crossmodalrag.errors import ConnectorError

RECORD, FIELD = "\x1e", "\x1f"
# %at, the author date: when the work was written, what `git log` shows; the committer date is when
# it was last rebased, amended or cherry-picked, which would date rewritten history to the rewrite.
LOG_FORMAT = f"{RECORD}%H{FIELD}%an{FIELD}%ae{FIELD}%at{FIELD}%B{FIELD}"
MAX_FILE_DIFF_CHARS = 100_000  # generated files and lockfiles would drown the real changes
# A file's diff longer than this has more characters than the cap however it decodes (a UTF-8 character
# is at most 4 bytes, an undecodable byte one U+FFFD): it is left out whatever follows, so the rest of
# it is not read into memory (a 50 MB generated file held 377 MB on every ingest).
MAX_FILE_DIFF_BYTES = 4 * MAX_FILE_DIFF_CHARS + 1
# A record starts a line: a file holding the separator byte is not cut into records of its own
LOG_MARKS = re.compile(rb"\n\x1e|\ndiff --(?:git|cc) ")
LOG_BLOCK = 1 << 20


def log_failed(root: Path, stderr: bytes, code: int, author: str | None = None) -> ConnectorError:
    message = stderr.decode("utf-8", "replace").strip()
    return ConnectorError(
        f"{root}: git log failed: {message.splitlines()[-1] if message else code}",
        ("check the --author pattern (a regular expression), then " if author else "")
        + "run `git fsck` in the repository",
    )


LOG_ARGS = (
    "-c",
    "core.quotepath=off",
    "log",
    "-p",
    "--no-color",
    "--no-ext-diff",
    "--find-renames",
    # a merge as its combined diff: only what the merge itself wrote (a conflict's resolution); a clean
    # merge shows nothing, as without it
    "--cc",
    # the output is decoded as UTF-8: a user's i18n.logOutputEncoding (latin1, cp932) would turn every
    # message and name into mojibake; git re-encodes each message from the encoding it was written in
    "--encoding=UTF-8",
    "--src-prefix=a/",  # whatever diff.noprefix or diff.mnemonicPrefix say: _diff_paths reads these
    "--dst-prefix=b/",
    f"--format={LOG_FORMAT}",
    "--no-walk=unsorted",  # the commits given, in the order given
    "--stdin",
)


def log_records(root: Path, shas: list[str]) -> Iterator[str]:
    """The `git log -p` record of each commit, streamed: one process for them all, its output read a
    block at a time (the whole log of a repository with a 50 MB file held 377 MB). Raises
    ConnectorError if git fails."""
    if not shas:
        return
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            ["git", "-C", str(root), *LOG_ARGS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors
        )
        try:
            try:  # git reads every id before it writes a line: this cannot wait on a full output pipe
                process.stdin.write("\n".join(shas).encode("ascii") + b"\n")
                process.stdin.close()
            except BrokenPipeError:
                pass  # git has failed: its exit code and message say why
            for record in _records(process.stdout):
                yield record.decode("utf-8", "replace")
        finally:
            process.stdout.close()
            if process.poll() is None:
                process.kill()  # the caller stopped reading
            process.wait()
        if process.returncode != 0:
            errors.seek(0)
            raise log_failed(root, errors.read(), process.returncode)


def _records(stream: IO[bytes]) -> Iterator[bytes]:
    """The records of git log's output, each file's diff in them cut at MAX_FILE_DIFF_BYTES."""
    record = _Record()
    carry = b"\n"  # the first record starts the output, as the others start a line
    while block := stream.read(LOG_BLOCK):
        buffer = carry + block
        # a mark may straddle two blocks: the tail that could hold its start waits for the next block
        end = max(0, len(buffer) - len(b"\ndiff --git ") + 1)
        position = 0
        for mark in LOG_MARKS.finditer(buffer):
            if mark.start() >= end:
                break
            record.add(buffer[position : mark.start()])
            position = mark.end()
            finished = record.mark(mark.group())
            if finished is not None:
                yield finished
        record.add(buffer[position:end])
        carry = buffer[max(position, end) :]
    record.add(carry)  # the output's last bytes start no mark: a record is longer, and so is a file's mark
    finished = record.finish()
    if finished is not None:
        yield finished


class _Record:
    """One record of git log's output as it is read, its parts joined once it is whole."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.started = False  # what comes before the first record is none
        self.file_bytes: int | None = None  # read of the file diff being read; None before the first

    def add(self, data: bytes) -> None:
        if self.file_bytes is None:
            self.parts.append(data)
            return
        room = MAX_FILE_DIFF_BYTES - self.file_bytes
        if room > 0:
            self.parts.append(data[:room])
        self.file_bytes += len(data)

    def mark(self, mark: bytes) -> bytes | None:
        """A mark met: a file's diff starts (None), or a record, which returns the one it ends."""
        if mark.startswith(b"\ndiff"):
            self.parts.append(b"\n")
            self.file_bytes = 0
            self.add(mark[1:])
            return None
        return self.finish()

    def finish(self) -> bytes | None:
        """The record read (with the line break that ended it), if one was; the next one starts."""
        finished = b"".join(self.parts) + b"\n" if self.started else None
        self.parts, self.started, self.file_bytes = [], True, None
        return finished
