"""`mem chat`: a follow-up that only refers back is asked with the previous question's topic (cli/followup.py)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from crossmodalrag.answer.forms import is_statement
from crossmodalrag.answer.subjects import named_subjects
from crossmodalrag.cli.followup import with_previous_topic
from crossmodalrag.cli.main import main
from tests.conftest import write_note

FIRST = "Which Postgres version did Helios start with?"


@pytest.mark.parametrize(
    "question, carried",
    [
        ("And what version is it on now?", ["Postgres", "Helios", "start"]),  # refers back, nothing new
        ("Why?", ["Postgres", "version", "Helios", "start"]),  # no topic of its own
        ("Why did I change the parser?", []),  # a topic of its own
        ("How did the Postgres upgrade go?", []),  # "upgrade" is new: it stands alone
        ("What did I do in August 2024?", []),  # a time is a topic here (retrieval/dates.asked_window)
        ("What did it do yesterday?", ["Postgres", "version", "Helios", "start"]),  # referring back: when, not what
    ],
)
def test_a_follow_up_carries_the_previous_topic_only_when_it_has_none_of_its_own(question, carried):
    asked, found = with_previous_topic(question, FIRST)
    assert found == carried and asked == (f"{question[:-1]} \u2014 {' '.join(carried)}?" if carried else question)


def test_happen_is_asked_with_not_about_so_a_chain_of_follow_ups_keeps_the_first_topic():
    """ "When did that happen?" stood alone ("happen" read as its topic), and the "Why?" after it was then
    searched with "happen"."""
    second, carried = with_previous_topic("And when did that happen?", "Where is Helios hosted?")
    assert carried == ["Helios", "hosted"]
    assert with_previous_topic("Why?", second)[1] == ["Helios", "hosted"]


def test_a_follow_up_still_reads_as_a_question_naming_what_the_previous_one_named():
    """The topic went after the "?" at first, and the model then judged "the statement" true or not;
    then in brackets, where "(Postgres" read as a sentence's first word and not as a name."""
    asked, _ = with_previous_topic("And what version is it on now?", FIRST)
    assert asked == "And what version is it on now \u2014 Postgres Helios start?" and not is_statement(asked)
    assert named_subjects(asked) == named_subjects(FIRST)


def test_the_first_question_stands_alone():
    assert with_previous_topic("And what version is it on now?", None) == ("And what version is it on now?", [])


def test_chat_answers_a_follow_up_about_the_previous_topic_and_says_so(capsys, monkeypatch, tmp_path):
    vault = tmp_path / "vault"
    write_note(vault, "helios.md", "# Helios database\n\nHelios started on Postgres 14 and now runs version 16.\n")
    write_note(vault, "quillmark.md", "# Quillmark release\n\nQuillmark is on version 1.0.0 now.\n")
    assert main(["ingest-notes", str(vault)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{FIRST}\nAnd what version is it on now?\n"))
    assert main(["chat", "--no-llm", "--json", "--top-k", "1"]) == 0
    out, err = capsys.readouterr()
    first, follow_up = map(json.loads, out.splitlines())
    assert [e["title"] for e in follow_up["evidence"]] == ["Helios database"]
    assert follow_up["query"] == "And what version is it on now?"  # as typed: a client matches it to its line
    assert (
        follow_up["searched_as"] == "And what version is it on now — Postgres Helios start?"
        and "searched_as" not in first
    )
    assert "read as a follow-up: searched with Postgres Helios start" in follow_up["notices"][-1]
    assert "read as a follow-up" in err


def test_a_follow_up_asking_one_new_thing_of_it_carries_the_topic_down_the_chain():
    """ "And who proposed it?" stood alone ("proposed" its topic), so "When was that?" after it searched with
    "proposed" only and found another meeting where someone proposed something."""
    second, carried = with_previous_topic("And who proposed it?", "Which database did we choose for Kestrel?")
    assert carried == ["database", "choose", "Kestrel"]
    third, carried = with_previous_topic("When was that?", second)
    assert carried == ["proposed", "database", "choose", "Kestrel"]
    assert (
        with_previous_topic("What does it cost to run Kestrel?", "Which database did we choose for Kestrel?")[1] == []
    )
