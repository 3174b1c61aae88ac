"""Events stating a name, figure or script their source lacks are unsupported (memory/grounding.py)."""

from __future__ import annotations

import pytest

from crossmodalrag.memory.events import list_events
from crossmodalrag.memory.grounding import not_in_evidence
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output, note

READING = (
    '# Reading notes\n\nFinished "Designing Data-Intensive Applications". The chapter on stream processing made me'
    " think the backfill partition in Tidepool is really a late-arriving-data watermark problem.\n"
)
INGEST = (
    "# Ingest design for Tidepool\n\nWe decided to store raw readings in Parquet files partitioned by station and"
    " day, instead of one big Postgres table, because the Postgres table hit 400 million rows and vacuum took"
    " four hours.\n"
)


@pytest.mark.parametrize(
    ("statement", "source", "missing"),
    [
        ("Finished reading 'Designing Data-Intensive Applications' by Martin Fowler.", READING, ["Martin", "Fowler"]),
        ("Tidepool moved raw readings to Parquet because vacuum took four小时.", INGEST, ["four小时"]),
        ("Tidepool moved raw readings to Parquet because the table hit 900 million rows.", INGEST, ["900 million"]),
        ("Tidepool moved raw readings to Parquet because the Postgres table hit 400 million rows.", INGEST, []),
        ("On March 4 Tidepool chose PostgreSQL's rival, Parquet, for 2 kinds of files.", INGEST, []),  # dates, counts
        ("Priya's plan: Tidepool stores readings by station.", "Priya will own the Tidepool readings.", []),
        ("Die Tabelle in Postgres wurde zu groß, also Parquet.", INGEST, []),  # German capitalises every noun
        ("移行は月曜日に完了した。", "# 移行\n\nデータベースの移行は月曜日に完了した。", []),
    ],
)
def test_names_figures_and_scripts_the_source_lacks_are_found(statement, source, missing) -> None:
    assert not_in_evidence(statement, [source]) == missing


def test_an_event_adding_a_name_to_its_source_is_unsupported_and_says_why(store, db_path) -> None:
    add_docs(store, note("reading", READING))
    invented = "Finished reading 'Designing Data-Intensive Applications' by Martin Fowler."
    llm = ScriptedExtractor(events_output(event(invented, kind="learning")))
    report = build(store, db_path, llm=llm, levels=("event",))
    assert report.levels["event"]["unsupported"] == 1
    (listed,) = list_events(store)
    assert not listed["supported"] and listed["not_in_source"] == ["Martin", "Fowler"]
