"""Episode and concept ids survive an edit that adds a same-day event sorting before their first one."""

from __future__ import annotations

import json

from crossmodalrag.memory.concepts import list_concepts
from crossmodalrag.memory.episodes import EventRow, lasting_ids, timeline
from crossmodalrag.memory.nodes import stable_id
from crossmodalrag.types import Document
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output

TOKENIZER = "We replaced the regex parser with a tokenizer for markdown."


def _note(uri: str, days: float, text: str) -> Document:
    return Document(uri, "note", "n.md", f"# T\n\n{text}\n", "markdown",
                    timestamp=1_735_689_600.0 + days * 86400, locator=uri)  # fmt: skip


def _added_statement_sorting_first(uri: str) -> str:
    """A same-topic statement whose event id sorts before the note's first event (ids are hashes)."""
    first = stable_id("event", uri, TOKENIZER.lower())
    for n in range(100):
        statement = f"The regex parser was replaced with a tokenizer for markdown and tables {n}."
        if stable_id("event", uri, statement.lower()) < first:
            return statement
    raise AssertionError("no statement sorts first")


def test_an_edit_adding_an_event_keeps_the_concept_and_episode_ids_and_the_name(store, db_path) -> None:
    uri = "/work/p0/n.md"
    added = _added_statement_sorting_first(uri)
    add_docs(store, _note(uri, 0, TOKENIZER), _note("/work/p1/n.md", 3, TOKENIZER))
    llm = ScriptedExtractor(events_output(event(TOKENIZER)), events_output(event(TOKENIZER)))
    build(store, db_path, llm=llm)
    (concept,) = list_concepts(store)
    episode = next(e for e in timeline(store) if e["project"] == "/work/p0")
    assert concept["support"] == 2

    add_docs(store, _note(uri, 0, f"{TOKENIZER} {added}"))
    llm.outputs.append(json.dumps(events_output(event(added), event(TOKENIZER))))
    report = build(store, db_path, llm=llm)
    (after,) = list_concepts(store)
    assert after["support"] == 3 and stable_id("event", uri, added.lower()) in after["events"]
    assert after["id"] == concept["id"] and after["title"] == concept["title"]
    assert report.levels["concept"]["llm_calls"] == 0 and report.levels["concept"]["removed"] == 0
    assert next(e for e in timeline(store) if e["project"] == "/work/p0")["id"] == episode["id"]


def test_a_split_node_keeps_its_id_on_the_larger_part_and_the_other_gets_a_new_one(store) -> None:
    """The old concept's first event founds the smaller part: its fresh id would be the kept one."""
    kept = stable_id("concept", "e1")
    with store.transaction() as conn:
        for node_id, level in [("e1", "event"), ("e2", "event"), ("e3", "event"), ("e4", "event"), (kept, "concept")]:
            conn.execute(
                "INSERT INTO memory_nodes (id, level, title, fingerprint, created_at, updated_at)"
                " VALUES (?, ?, '', '', 0, 0)",
                (node_id, level),
            )
        conn.executemany(
            "INSERT INTO memory_edges (src, dst, kind) VALUES (?, ?, 'in_concept')",
            [(e, kept) for e in ("e1", "e2", "e3")],
        )
    row = lambda name: EventRow(name, "", 0.0, "", "fact", "note", None)  # noqa: E731
    groups = [[row("e1"), row("e4")], [row("e2"), row("e3")]]
    ids = lasting_ids(store.conn, "concept", "in_concept", groups, [kept, stable_id("concept", "e2")])
    assert ids[1] == kept and ids[0] not in (kept, stable_id("concept", "e2")) and len(set(ids)) == 2
