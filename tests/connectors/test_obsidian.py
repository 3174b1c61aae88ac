"""Obsidian's own markup in a vault's notes: aliases are searchable, markup hidden in Obsidian's
reading view is not indexed, and links read in labels as Obsidian shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.chunking import chunk_document
from crossmodalrag.connectors.obsidian import templates_folders
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.store import Store
from tests.conftest import write_note
from tests.connectors.conftest import read


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


# --- what the reading view hides --------------------------------------------------------------

DRAWING = (
    "---\nexcalidraw-plugin: parsed\ntags: [excalidraw]\n---\n"
    "==⚠  Switch to EXCALIDRAW VIEW in the MORE OPTIONS menu of this document. ⚠==\n\n\n"
    "# Text Elements\nWhiteboard label ocelot ^abc123\n\nSecond label ^def456\n\n"
    '%%\n# Drawing\n```json\n{"type":"excalidraw","elements":['
    + ",".join('{"id":"el%d","type":"rectangle","seed":%d}' % (i, 1000 + i) for i in range(300))
    + "]}\n```\n%%\n"
)


def test_an_excalidraw_drawing_is_its_labels_titled_by_its_file_name(vault: Path) -> None:
    doc = read(vault, "plans/board.excalidraw.md", DRAWING)
    assert doc.title == "board"
    [chunk] = chunk_document(doc)
    assert chunk.text == "board > Text Elements\nWhiteboard label ocelot\n\nSecond label"
    assert "rectangle" not in doc.text and "EXCALIDRAW VIEW" not in doc.text


def test_comments_are_not_indexed_but_code_keeps_its_percent_signs(vault: Path) -> None:
    text = (
        "# Plain\n\nVisible text.%%hidden armadillo%%After.\n\n%%\nA whole\nhidden block\n%%\n## Next\n\n"
        '```mermaid\ngraph TD %% a mermaid comment\n```\n\n`printf("%%d")` stays, and 100%% sure\n'
    )
    doc = read(vault, "plain.md", text)
    assert "armadillo" not in doc.text and "hidden block" not in doc.text
    assert "Visible text. After." in doc.text  # the words around a comment stay apart
    assert "graph TD %% a mermaid comment" in doc.text and '`printf("%%d")` stays, and 100%% sure' in doc.text
    assert [chunk.locator for chunk in chunk_document(doc)] == ["plain.md", "plain.md#Next"]  # still a heading


def test_stored_offsets_follow_the_stored_text(vault: Path) -> None:
    doc = read(vault, "a.md", "# A\n\nÜber %%geheim%% alles. ^blk1\n\n## B ^x\n\nMehr.\n")
    for chunk in chunk_document(doc):
        assert chunk.text.endswith(doc.text[chunk.char_start : chunk.char_end])
    assert "^blk1" not in doc.text


# --- links and block ids in labels ---------------------------------------------------------


def test_headings_read_as_obsidian_shows_them_in_titles_breadcrumbs_and_locators(vault: Path) -> None:
    doc = read(
        vault,
        "launch.md",
        "# Launch of [[Projects/Zeta|Zeta]]\n\n## Party with [[Alpha|the alpha team]]\n\n"
        "Celebrate with a pangolin cake. ^cake42\n\n## Budget and [[Finance#Q3]] ^bud\n\nThe budget is 42000 euros.\n",
    )
    assert doc.title == "Launch of Zeta"
    chunks = chunk_document(doc)
    assert [c.locator for c in chunks] == ["launch.md#Party with the alpha team", "launch.md#Budget and Finance > Q3"]
    assert chunks[0].text == "Launch of Zeta > Party with the alpha team\nCelebrate with a pangolin cake."
    assert chunks[1].metadata["headings"] == ["Launch of Zeta", "Budget and Finance > Q3"]
    assert doc.metadata["wikilinks"] == ["Alpha", "Finance", "Projects/Zeta"]  # the links themselves stay


# --- canvases and templates ----------------------------------------------------------------------

CANVAS = '{"nodes":[{"id":"1","type":"text","text":"call the flamingo supplier"}],"edges":[]}'


def test_a_canvas_is_said_not_read(store: Store, vault: Path) -> None:
    write_note(vault, "boards/plan.canvas", CANVAS)
    write_note(vault, "real.md", "# Real\n\nreal note\n")
    report = ingest_notes(store, [vault])
    assert report.added == 1
    assert [n for n in report.notices if "canvas" in n] == [
        f"{vault}: 1 canvas file not read (e.g. plan.canvas; Obsidian canvases are not notes:"
        " keep what should be remembered in a note)"
    ]
    assert not [n for n in ingest_notes(store, [vault], exclude=["boards"]).notices if "canvas" in n]


def test_the_configured_templates_folder_is_not_read_and_its_stored_templates_leave(store: Store, vault: Path) -> None:
    write_note(vault, "Templates/daily.md", "---\ntags: template\n---\n# {{title}}\n\n## Tasks\n- [ ] placeholder\n")
    write_note(vault, "real.md", "# Real\n\nreal note\n")
    write_note(vault, "more.md", "# More\n\nmore notes\n")
    assert ingest_notes(store, [vault]).added == 3  # no setting yet: the template is a note...
    title = "SELECT title FROM sources WHERE uri LIKE '%daily.md'"
    assert store.conn.execute(title).fetchone()[0] == "daily"  # ...titled by its file, not `{{title}}`
    write_note(vault, ".obsidian/templates.json", '{"folder": "Templates"}')
    report = ingest_notes(store, [vault])
    assert (report.removed, report.unchanged) == (1, 2)
    assert f"{vault}: Templates/ is not read: it is Obsidian's templates folder (set in {vault}/.obsidian)" in (
        report.notices
    )
    assert not any("templates folder" in n for n in ingest_notes(store, [vault]).notices)  # said once


def test_templaters_folder_setting_is_read_too(vault: Path) -> None:
    write_note(vault, ".obsidian/plugins/templater-obsidian/data.json", '{"templates_folder": "meta/tpl/"}')
    write_note(vault, ".obsidian/templates.json", "{not json")
    assert templates_folders(vault) == ["meta/tpl"]
