"""Small helpers shared by the scripts in bench/ (imported as a sibling module)."""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

# Data lives beside the repository, in ../shared relative to the repo root; never copied in.
DEFAULT_SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def log(message: str) -> None:
    """Progress goes to stderr; stdout carries only the final JSON."""
    print(message, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(milliseconds: Sequence[float], prefix: str = "ms") -> dict[str, float]:
    return {
        f"{prefix}_p50": round(percentile(milliseconds, 0.50), 3),
        f"{prefix}_p95": round(percentile(milliseconds, 0.95), 3),
        f"{prefix}_mean": round(sum(milliseconds) / len(milliseconds), 3) if milliseconds else float("nan"),
        "samples": len(milliseconds),
    }


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }


def print_result(result: dict) -> int:
    """Stamp a benchmark's result with the date, machine and source state, print it as JSON on
    stdout, and return the exit code 0."""
    result.update(
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine=machine(), source=source_state()
    )
    print(json.dumps(result, indent=2))
    return 0


def make_vault(shared: Path, out: Path, notes: int) -> None:
    """A synthetic vault of `notes` notes at `out` (shared/tools/make_vault.py; its gold queries go
    beside it, as `<out>_queries.json`)."""
    tool = shared / "tools" / "make_vault.py"
    log(f"make_vault: {notes} notes")
    command = [sys.executable, str(tool), "--out", str(out), "--notes", str(notes)]
    subprocess.run(command, check=True, capture_output=True)


def clean_environment() -> dict[str, str]:
    """This process's environment made benchmark-safe, and returned for subprocesses.

    Drops every CMRAG_* setting (runs measure the defaults) and sets HF_HUB_OFFLINE=1, which makes
    the product's embedder give up on a model that is not on disk instead of probing the hub:
    benchmarks never touch the network.
    """
    dropped = sorted(k for k in os.environ if k.startswith("CMRAG_"))
    if dropped:
        log(f"note: ignoring {', '.join(dropped)} from the environment (benchmarks run with defaults)")
    for key in dropped:
        del os.environ[key]
    os.environ["HF_HUB_OFFLINE"] = "1"
    return dict(os.environ)


def source_state() -> dict[str, object]:
    """Which code was measured: the repository's commit and whether src/ had uncommitted changes."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = [line for line in git("status", "--porcelain", "--", "src").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "--short", "HEAD") or None, "src_uncommitted_files": len(changed)}


def fastembed_alone(settings):
    """fastembed's own `TextEmbedding` over the installed offline MiniLM's files, with the threads the
    product would use: the baseline the embedding pipeline (which runs that model on onnxruntime
    directly, index/onnx_embed.py) is compared with."""
    from crossmodalrag.cpu import auto_threads
    from crossmodalrag.index.embed import FastEmbedder
    from crossmodalrag.index.models import resolve_model

    spec = resolve_model(settings)
    return FastEmbedder(spec, str(settings.models_dir / "fastembed"), auto_threads(settings.embed_threads))._model
