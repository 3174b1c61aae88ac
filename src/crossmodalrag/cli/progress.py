"""Live counts on stderr while sources are ingested (only on a terminal), and the closing summary."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossmodalrag.ingest import IngestReport


class ProgressLine:
    """Redraws `label: N done, S unchanged, F failed` at most ten times a second on a TTY."""

    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.last_draw = 0.0

    def __call__(self, report: "IngestReport") -> None:
        now = time.monotonic()
        if not self.live or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        done = report.added + report.updated
        self.stream.write(f"\r{self.label}: {done} stored, {report.unchanged} unchanged, {report.failed} failed")
        self.stream.flush()

    def finish(self, report: "IngestReport") -> None:
        if self.live:
            self.stream.write("\r\033[K")
        self.stream.write(f"{self.label}: {report.summary()}\n")
        self.stream.flush()


class EmbedProgress:
    """`embedding: N/M chunks (R chunks/s, about T left)` on a TTY while vectors are computed (a whole
    memory's backlog takes hours on 2 cores: the rate alone left the sum to the user)."""

    BACKLOG = 1000  # chunks: past this, a run without a terminal says once what it is doing

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.announced = False

    def __call__(self, report, remaining: int) -> None:
        rate = report.chunks / report.seconds if report.seconds else 0.0
        if self.live:
            left = f", about {time_left((remaining - report.chunks) / rate)} left" if rate and report.chunks > 0 else ""
            self.stream.write(f"\rembedding: {report.chunks}/{remaining} chunks ({rate:.1f}/s{left})\033[K")
            self.stream.flush()
        elif not self.announced and remaining >= self.BACKLOG:
            # Ingesting one note after a model was installed embeds the whole memory's backlog.
            minutes = f", about {remaining / rate / 60:.0f} min" if rate else ""
            self.stream.write(
                f"embedding {remaining:,} chunks that have no vector yet{minutes}"
                " (stopping is safe: `mem reindex-embeddings` goes on from there)\n"
            )
            self.stream.flush()
            self.announced = True

    def finish(self, report) -> None:
        if self.live:
            self.stream.write("\r\033[K")
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
        self.live = self.stream.isatty()
        self.started = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if self.live and done < total:
            self.stream.write(f"\rre-tokenizing the search index: {done}/{total} chunks")
            self.stream.flush()
        elif done >= total:
            if self.live:
                self.stream.write("\r\033[K")
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
        self.live = self.stream.isatty()
        self.drawn = False

    def __call__(self, stage: str) -> None:
        if self.live:
            self.stream.write(f"\r\033[K{self.label}: {stage}…")
            self.stream.flush()
            self.drawn = True

    def finish(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.drawn = False
