"""Progress on stderr during long runs: live lines on a terminal, a few plain lines on a pipe or log."""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import TYPE_CHECKING

from crossmodalrag.wording import counted

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport


def is_live(stream) -> bool:
    """Whether `stream` is a terminal that redraws a line in place: not a pipe or a log, nor TERM=dumb,
    which shows the erase sequence as text."""
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def redraw(stream, text: str) -> None:
    """The live line replaced by `text`, cut to the terminal's width: a line that wraps leaves its
    first part behind on the next redraw (`\r` returns only to the start of the last row)."""
    width = shutil.get_terminal_size().columns
    stream.write("\r\033[K" + text[: max(width - 1, 10)])
    stream.flush()


def clear(stream) -> None:
    """The live line erased, so what is printed next starts on a clean line."""
    stream.write("\r\033[K")
    stream.flush()


class ProgressLine:
    """Redraws `label: N done, S unchanged, F failed` at most ten times a second on a TTY."""

    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.live = is_live(self.stream)
        self.last_draw = 0.0

    def __call__(self, report: "IngestReport") -> None:
        now = time.monotonic()
        if not self.live or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        done = report.added + report.updated
        redraw(self.stream, f"{self.label}: {done} stored, {report.unchanged} unchanged, {report.failed} failed")

    def clear(self) -> None:
        """Erase the live line before errors and notes are printed (they were glued to its end)."""
        if self.live:
            clear(self.stream)

    def finish(self, report: "IngestReport") -> None:
        self.clear()
        self.stream.write(f"{self.label}: {report.summary()}\n")
        self.stream.flush()


class EmbedProgress:
    """`embedding: N/M chunks (R chunks/s, about T left)` on a TTY while vectors are computed (a whole
    memory's backlog takes hours on 2 cores: the rate alone left the sum to the user)."""

    BACKLOG = 1000  # chunks: past this, a run without a terminal says once what it is doing

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.live = is_live(self.stream)
        self.announced = False

    def __call__(self, report, remaining: int) -> None:
        rate = report.chunks / report.seconds if report.seconds else 0.0
        if self.live:
            left = f", about {time_left((remaining - report.chunks) / rate)} left" if rate and report.chunks > 0 else ""
            redraw(self.stream, f"embedding: {report.chunks}/{remaining} chunks ({rate:.1f}/s{left})")
        elif not self.announced and remaining >= self.BACKLOG:
            # Ingesting one note after a model was installed embeds the whole memory's backlog.
            minutes = f", about {remaining / rate / 60:.0f} min" if rate else ""
            self.stream.write(
                f"embedding {remaining:,} chunks that have no vector yet{minutes}"
                " (stopping is safe: `mem reindex-embeddings` goes on from there)\n"
            )
            self.stream.flush()
            self.announced = True

    def waiting(self) -> None:
        """Another process is embedding this database: this one waits instead of doing the same work."""
        self.stream.write("embedding: another mem process is embedding this memory; waiting for it to finish\n")
        self.stream.flush()

    def finish(self, report) -> None:
        if self.live:
            clear(self.stream)
        if report.chunks:
            self.stream.write(f"embedding: {report.summary()}\n")


def time_left(seconds: float) -> str:
    """'40 s', '12 min', '3 h 20 min': as precise as such an estimate is."""
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class ReindexProgress:
    """`re-tokenizing the search index: N/M chunks` while an upgrade rebuilds it (live on a TTY),
    then one closing line, so a user knows why the first command after an upgrade took longer."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.live = is_live(self.stream)
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if self.live and done < total:
            redraw(self.stream, f"re-tokenizing the search index: {done}/{total} chunks")
        elif done >= total:
            if self.live:
                clear(self.stream)
            seconds = time.monotonic() - self.started
            self.stream.write(f"search index re-tokenized for multilingual text: {total} chunks in {seconds:.1f} s\n")
            self.stream.flush()


class StageLine:
    """`forget: purging the forgotten words from the text index…` on a TTY: a command whose long
    steps are single statements over the whole memory says which one it is in (none can count its
    work); the line is cleared when the command is done."""

    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.live = is_live(self.stream)
        self.drawn = False

    def __call__(self, stage: str) -> None:
        if self.live:
            redraw(self.stream, f"{self.label}: {stage}…")
            self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            clear(self.stream)
            self.drawn = False


class ExtractProgress:
    """`events: 3/40 sources, 1 failed, ETA 2m10s: <title>` while the model extracts events: redrawn
    on a TTY; without one (a log, cron, a pipe) an opening line and then a plain line every
    EVERY seconds, since one model call per source makes a run of many minutes that was silent."""

    EVERY = 10.0  # seconds between plain lines: a log gets a pulse, not one line per source

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.live = is_live(self.stream)
        self.started = time.monotonic()
        self.last_line: float | None = None

    def __call__(self, done: int, total: int, title: str, failed: int = 0) -> None:
        counts = f"events: {done}/{total} sources" + (f", {failed} failed" if failed else "")
        eta = ""
        if done:
            left = (time.monotonic() - self.started) / done * (total - done)
            eta = f", ETA {int(left // 60)}m{int(left % 60):02d}s"
        if self.live:
            redraw(self.stream, f"{counts}{eta}: {title[:40]}")
            return
        now = time.monotonic()
        if self.last_line is None:
            self.stream.write(
                f"events: extracting from {counted(total, 'source')}"
                " (--max-minutes bounds the run; stopping keeps what is done)\n"
            )
        elif now - self.last_line >= self.EVERY:
            self.stream.write(f"{counts}{eta}\n")
        else:
            return
        self.stream.flush()
        self.last_line = now

    def finish(self) -> None:
        if self.live:
            clear(self.stream)
