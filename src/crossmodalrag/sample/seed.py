"""`mem seed-sample`: materialize the bundled sample deterministically, ingest it, load its queries.

The git repository is rebuilt from `repo.json` with fixed author and committer identities and
dates, so its commit shas (and therefore its source uris and eval gold) are the same everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from crossmodalrag.errors import CMRAGError, MissingExtraError
from crossmodalrag.evals.queries import EvalQuery, upsert_queries
from crossmodalrag.ingest import IngestReport, Progress, ingest_git, ingest_images, ingest_notes, ingest_pdfs
from crossmodalrag.sample.assets import write_assets
from crossmodalrag.store import Store

MARKER = ".cmrag-sample"
QUERY_PREFIX = "[sample]"
UNDATED_NOTE_MTIME = datetime.fromisoformat("2025-06-15T09:00:00+00:00").timestamp()


@dataclass
class SeedReport:
    workspace: Path
    notes: IngestReport
    git: IngestReport | None
    queries: int
    notices: list[str] = field(default_factory=list)
    files: list[IngestReport] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace": str(self.workspace),
            "notes": self.notes.to_dict(),
            "git": self.git.to_dict() if self.git else None,
            "files": [report.to_dict() for report in self.files],
            "queries": self.queries,
            "notices": self.notices,
        }


def prepare_workspace(workspace: Path, force: bool) -> None:
    """Empty the workspace if it is ours (or --force); refuse to clobber someone's folder."""
    if workspace.exists() and any(workspace.iterdir()):
        if not (workspace / MARKER).exists() and not force:
            raise CMRAGError(
                f"{workspace} is not empty and was not made by seed-sample",
                "pass --force to replace it, or choose another --workspace-dir",
            )
        shutil.rmtree(workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / MARKER).write_text("made by `mem seed-sample`; safe to delete\n", encoding="utf-8")


def write_vault(target: Path) -> None:
    """Copy the sample notes; notes without a date get a fixed mtime so timestamps are stable."""
    source = resources.files("crossmodalrag.sample") / "vault"
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target)
    for path in target.rglob("*.md"):
        os.utime(path, (UNDATED_NOTE_MTIME, UNDATED_NOTE_MTIME))


def build_repo(target: Path) -> list[str]:
    """Replay repo.json as real commits; returns the sha of each commit in order."""
    commits = json.loads((resources.files("crossmodalrag.sample") / "repo.json").read_text(encoding="utf-8"))
    target.mkdir(parents=True)
    _git(target, {}, "init", "-q")
    shas = []
    for commit in commits:
        for name, content in commit["files"].items():
            path = target / name
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
        identity = {
            "GIT_AUTHOR_NAME": commit["author_name"],
            "GIT_AUTHOR_EMAIL": commit["author_email"],
            "GIT_COMMITTER_NAME": commit["author_name"],
            "GIT_COMMITTER_EMAIL": commit["author_email"],
            "GIT_AUTHOR_DATE": commit["date"],
            "GIT_COMMITTER_DATE": commit["date"],
        }
        _git(target, identity, "add", "-A")
        _git(target, identity, "commit", "-q", "--no-verify", "-m", commit["message"])
        shas.append(_git(target, identity, "rev-parse", "HEAD").strip())
    return shas


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    isolated = {**os.environ, **env, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=isolated,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise CMRAGError(f"building the sample repository failed: {result.stderr.strip()}", "check that git works")
    return result.stdout


def sample_queries(vault: Path, repo: Path | None, shas: list[str]) -> list[EvalQuery]:
    """The bundled queries with their symbolic gold (`note:path`, `commit:N`) made into uris."""
    raw = json.loads((resources.files("crossmodalrag.sample") / "queries.json").read_text(encoding="utf-8"))
    queries = []
    for item in raw:
        uris = []
        for ref in item["expected"]:
            kind, _, value = ref.partition(":")
            if kind == "note":
                uris.append(str(vault / value))
            elif kind == "commit" and repo is not None:
                uris.append(f"{repo}@{shas[int(value)]}")
        queries.append(EvalQuery(item["query_text"], uris))
    return queries


def seed_sample(store: Store, workspace: Path, force: bool = False, progress: Progress | None = None) -> SeedReport:
    """Write the sample vault, repository and cross-modal files into workspace, ingest what the
    installed extras can read, upsert the queries."""
    workspace = workspace.expanduser().resolve()
    prepare_workspace(workspace, force)
    vault, repo = workspace / "vault", workspace / "quillmark"
    write_vault(vault)
    notices = []
    shas: list[str] = []
    if shutil.which("git"):
        shas = build_repo(repo)
    else:
        notices.append("git is not installed: the sample repository was skipped (apt-get install git)")
    notes_report = ingest_notes(store, [vault], progress=progress)
    git_report = ingest_git(store, [repo], progress=progress) if shas else None
    queries = sample_queries(vault, repo if shas else None, shas)
    extra_reports, xmodal = ingest_assets(store, workspace / "files", notices, progress)
    upsert_queries(store, queries + xmodal)
    return SeedReport(workspace, notes_report, git_report, len(queries) + len(xmodal), notices, extra_reports)


def ingest_assets(
    store: Store, folder: Path, notices: list[str], progress: Progress | None
) -> tuple[list[IngestReport], list[EvalQuery]]:
    """Generate the PDF and images; ingest those an installed extra can read; their queries."""
    assets = write_assets(folder)
    ingested: dict[str, Path] = {}
    reports = []
    for kinds, ingest, extra in ((("spec",), ingest_pdfs, "pdf"), (("whiteboard", "diagram"), ingest_images, "ocr")):
        paths = [assets[kind] for kind in kinds if kind in assets]
        try:
            reports.append(ingest(store, paths, progress) if paths else IngestReport())
            ingested.update({kind: assets[kind] for kind in kinds if kind in assets})
        except MissingExtraError:
            notices.append(
                f'the {extra} extra is not installed: {", ".join(kinds)} not ingested (pip install -e ".[{extra}]")'
            )
    raw = json.loads((resources.files("crossmodalrag.sample") / "xmodal_queries.json").read_text(encoding="utf-8"))
    queries = []
    for item in raw:
        kinds = [ref.partition(":")[2] for ref in item["expected"]]
        if all(kind in ingested for kind in kinds):
            queries.append(EvalQuery(item["query_text"], [str(ingested[kind].resolve()) for kind in kinds]))
    return reports, queries
