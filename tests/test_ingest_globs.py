"""--include/--exclude read as in .gitignore by the notes ingest: a folder name keeps out the whole
folder, and a pattern typed that matches no note says so (a private folder was stored, unnoticed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.ingest import ingest_notes
from crossmodalrag.store import Store
from tests.conftest import write_note


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "v"
    write_note(root, "private/diary.md", "# Diary\n\nmy secret diary about the okapi\n")
    write_note(root, "work/private/pay.md", "# Pay\n\nthe salary talk\n")
    write_note(root, "work/w.md", "# Work\n\nwork note about the heron\n")
    return root


def stored(store: Store) -> set[str]:
    return {row[0].rsplit("/v/", 1)[1] for row in store.conn.execute("SELECT uri FROM sources")}


@pytest.mark.parametrize(
    ("pattern", "kept"),
    [
        ("private", {"work/w.md"}),  # that folder name at any depth
        ("/private", {"work/w.md", "work/private/pay.md"}),  # the one at the top only
        ("private/", {"work/w.md"}),
        ("work/private", {"private/diary.md", "work/w.md"}),
    ],
)
def test_an_excluded_folder_name_keeps_out_everything_in_it(
    store: Store, vault: Path, pattern: str, kept: set[str]
) -> None:
    report = ingest_notes(store, [vault], exclude=[pattern], say_unmatched_globs=True)
    assert stored(store) == kept and report.notices == []


def test_a_typed_pattern_that_matches_no_note_says_so(store: Store, vault: Path) -> None:
    report = ingest_notes(store, [vault], include=["work", "wrok"], exclude=["Private"], say_unmatched_globs=True)
    assert stored(store) == {"work/w.md", "work/private/pay.md"}
    assert [notice.split(": ", 1)[1].split(" (hint")[0] for notice in report.notices] == [
        "--include 'wrok' matches none of its notes",
        "--exclude 'Private' matches none of its notes",
    ]
    assert "relative to the vault" in report.notices[0]


def test_configured_patterns_are_not_questioned_on_every_sync(store: Store, vault: Path) -> None:
    assert ingest_notes(store, [vault], exclude=["*.excalidraw.md"]).notices == []
