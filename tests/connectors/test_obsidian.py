"""Obsidian's own markup in a vault's notes: aliases are searchable, markup hidden in Obsidian's
reading view is not indexed, and links read in labels as Obsidian shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors.notes import read_note
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import Store
from tests.conftest import write_note


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    root.mkdir()
    return root


def read(vault: Path, relative: str, text: str | bytes):
    return read_note(vault, write_note(vault, relative, text))


def searched(store: Store, query: str) -> set[str]:
    return {Path(hit.source_uri).name for hit in search(store, query, SearchOptions()).hits}


# --- aliases ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frontmatter",
    [
        "aliases: [Skunkworks, Moonbeam initiative]",
        "aliases:\n  - Skunkworks\n  - Moonbeam initiative",
        "aliases: Skunkworks, Moonbeam initiative",
        "alias: [Skunkworks, Moonbeam initiative, Project Zeta]",
    ],
)
def test_aliases_are_read_and_carried_by_every_chunks_breadcrumb(vault: Path, frontmatter: str) -> None:
    doc = read(vault, "zeta.md", f"---\n{frontmatter}\n---\n# Project Zeta\n\n## Budget\n\n42000 euros.\n")
    assert doc.metadata["aliases"] == ["Skunkworks", "Moonbeam initiative"]  # not the title again
    [chunk] = chunk_document(doc)
    assert chunk.text.split("\n")[0] == "Project Zeta (Skunkworks, Moonbeam initiative) > Budget"
    assert chunk.locator == "zeta.md#Budget"


def test_a_question_by_alias_finds_the_note(store: Store, vault: Path) -> None:
    write_note(vault, "zeta.md", "---\naliases: [Skunkworks]\n---\n# Project Zeta\n\nThe budget is 42000 euros.\n")
    write_note(vault, "g.md", "# Groceries\n\nbuy milk and eggs\n")
    ingest_notes(store, [vault])
    assert searched(store, "Skunkworks") == {"zeta.md"}


def test_a_note_of_frontmatter_only_is_found_by_its_alias(vault: Path) -> None:
    doc = read(vault, "todo.md", "---\naliases: [Plumber call]\ntags: [home]\n---\n")
    assert chunk_document(doc)[0].text.startswith("todo (Plumber call)\n")
