"""Helpers for conversation tests: the shared samples and small synthetic Claude Code sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "data" / "conversations"
LOCOMO = SAMPLES.parent / "locomo" / "locomo_dev.json"

needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason="the shared conversation samples are not here")


def claude_record(uuid: str, parent: str | None, kind: str, content, **extra) -> dict:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "s-1",
        "timestamp": f"2026-02-10T21:{len(uuid):02d}:00.000Z",
        "message": {"role": kind, "content": content},
        **extra,
    }


def write_jsonl(path: Path, records: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
