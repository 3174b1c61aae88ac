"""Work too long for one tool call (ingesting a folder, digesting a big transcript) runs as a job:
the call returns its id at once and `memory_job` reports progress. Jobs run one at a time on their
own thread with their own database connection; they live as long as the server process.

An agent may only make `mem` read paths the user already configured (vaults, repositories, PDF,
image and chat folders): a tool argument can never point the memory at ~/.ssh, nor at another
project's agent transcripts in ~/.claude/projects the user never chose to keep.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

from crossmodalrag.agent.tools import InvalidArgument
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.store import Store
from crossmodalrag.types import iso_time

MAX_JOBS_KEPT = 200

Work = Callable[[Store, Callable[[dict], None]], dict]


@dataclass
class Job:
    id: str
    kind: str
    target: str
    status: str = "queued"  # queued | running | done | failed
    progress: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    error: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.id,
            "kind": self.kind,
            "target": self.target,
            "status": self.status,
            "progress": self.progress,
            "result": self.result,
            "error": self.error,
            "started": iso_time(self.started),
            "finished": iso_time(self.finished),
        }


class JobRunner:
    def __init__(self, open_store: Callable[[], Store]) -> None:
        self.open_store = open_store
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mem-job")
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()

    def start(self, kind: str, target: str, work: Work) -> Job:
        job = Job(uuid.uuid4().hex[:12], kind, target)
        with self.lock:
            self.jobs[job.id] = job
            for stale in list(self.jobs)[:-MAX_JOBS_KEPT]:
                del self.jobs[stale]
        self.pool.submit(self._run, job, work)
        return job

    def _run(self, job: Job, work: Work) -> None:
        job.status = "running"
        try:
            with self.open_store() as store:
                job.result = work(store, lambda progress: setattr(job, "progress", progress))
            job.status = "done"
        except CMRAGError as error:
            job.status, job.error = "failed", str(error)
        except Exception as error:  # noqa: BLE001 - a job must never take the server down
            job.status, job.error = "failed", f"unexpected {type(error).__name__}: {error}"
        job.finished = time.time()

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(str(job_id))
        if job is None:
            raise InvalidArgument(
                f"no job {str(job_id)[:20]!r}", "job ids come from memory_ingest, memory_digest_session or memory_ask"
            )
        return job

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class IngestTarget(NamedTuple):
    connector: str
    path: Path  # what is read: the path asked for, or a whole repository (its history, not files)
    root: Path  # the configured folder it lies in


def ingest_target(settings: Settings, path: str, transcripts: bool = False) -> IngestTarget:
    """What to ingest for a path inside a configured folder. Raises InvalidArgument."""
    if not isinstance(path, str) or not path or len(path) > 4096 or "\x00" in path:
        raise InvalidArgument("path must be a file or folder path", "e.g. a note folder configured for mem")
    resolved = Path(path).expanduser().resolve()
    if not resolved.exists():  # said, not read as a note gone from its vault (which removes it)
        raise InvalidArgument(f"{path}: no such file or folder", "check the path")
    roots = [
        ("notes", settings.notes_paths),
        ("git", settings.git_paths),
        ("pdf", settings.pdf_paths),
        ("image", settings.image_paths),
        ("chat", settings.chat_paths),
    ]
    for connector, folders in roots:
        for folder in folders:
            root = Path(folder).expanduser().resolve()
            if resolved == root or root in resolved.parents:
                if transcripts and connector != "chat":
                    continue
                return IngestTarget(connector, root if connector == "git" else resolved, root)
    if transcripts:
        raise InvalidArgument(
            f"{path} is outside the folders mem is configured to read chats from",
            "the user adds its folder (e.g. ~/.claude/projects) as CHAT_PATH_1 or to [connectors] chats first",
        )
    raise InvalidArgument(
        f"{path} is outside the folders mem is configured to read",
        "add the folder to [connectors] in crossmodalrag.toml (notes, git, pdf, images, chats) first",
    )


def ingest_work(settings: Settings, connector: str, path: Path, root: Path | None = None) -> Work:
    """The job that ingests one configured path (inside the configured folder `root`, default path
    itself) and embeds what is new."""
    root = root or path

    def work(store: Store, progress: Callable[[dict], None]) -> dict:
        from crossmodalrag import ingest
        from crossmodalrag.conversations import ingest_conversations

        step = lambda report: progress(report.to_dict())  # noqa: E731
        # confine: a symlink inside a configured folder must not lead the agent's read outside it.
        if connector == "notes":  # a note or folder of the vault, read as the vault's ingest reads it
            only = path if path != root else None
            include, exclude = settings.notes_include, settings.notes_exclude
            report = ingest.ingest_notes(store, [root], include, exclude, step, confine=True, only=only)
        elif connector == "git":
            report = ingest.ingest_git(store, [path], settings.git_max_commits or None, progress=step)
        elif connector == "pdf":
            report = ingest.ingest_pdfs(store, [path], step, settings.ocr_engine, confine=True)
        elif connector == "image":
            report = ingest.ingest_images(store, [path], step, settings.ocr_engine, confine=True)
        else:
            report = ingest_conversations(store, [path], step, confine=True)
        if report.failed and not (report.added or report.updated or report.unchanged):
            more = f" (and {report.failed - 1} more)" if report.failed > 1 else ""
            raise CMRAGError(report.failures[0] + more)  # nothing ingested: the job failed, and says why
        ingested = report.to_dict()
        # Always: chunks an earlier job stored but could not embed (its client left, the server was
        # stopped) are embedded by the next ingest of the path, as nothing else would for an agent.
        embedding = lambda done, to_embed: progress({**ingested, "embedded": done, "to_embed": to_embed})  # noqa: E731
        return {**ingested, "embedded": embed_new(store, settings, embedding)}

    return work


def ask_work(
    settings: Settings, question: str, top_k: int, after: str | None, before: str | None, strategy: str, llm
) -> Work:
    """The job that answers a question through the language model `llm()` returns, as `mem ask --json`."""

    def work(store: Store, progress: Callable[[dict], None]) -> dict:
        from crossmodalrag.agent.tools import ask_memory
        from crossmodalrag.answer.evidence import open_retriever

        retriever = open_retriever(store, settings, top_k)
        return ask_memory(retriever, question, after, before, strategy, settings, llm())

    return work


def embed_new(store: Store, settings: Settings, progress: Callable[[int, int], None] | None = None) -> int:
    """Embed chunks without vectors when a model is available (0 otherwise); `progress` hears
    (chunks embedded, chunks there were to embed) after each batch, as a job's progress."""
    from crossmodalrag.agent.memories import load_memory_embedder

    embedder, _ = load_memory_embedder(settings)
    if embedder is None:
        return 0
    from crossmodalrag.index.embeddings import embed_missing

    heard = (lambda report, to_embed: progress(report.chunks, to_embed)) if progress else None
    return embed_missing(store, embedder, settings.embed_batch_size, heard).chunks
