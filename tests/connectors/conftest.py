"""What the notes connector's tests share: a vault folder and a note read from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.connectors.notes import read_note
from tests.conftest import write_note


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


def read(vault: Path, relative: str, text: str | bytes):
    return read_note(vault, write_note(vault, relative, text))
