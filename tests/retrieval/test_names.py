"""Names a question uses that nothing in memory holds (retrieval/names.py) and the gate that reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.agent.memories import remember
from crossmodalrag.answer.evidence import abstention_text
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.gate import is_weak
from crossmodalrag.retrieval.names import question_names
from crossmodalrag.retrieval.search import SearchOptions, search
from tests.conftest import write_note


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("What industry does AMCOR primarily operate in?", ["AMCOR"]),  # five capitals or more: a name
        ("Is growth in JnJ's adjusted EPS expected to accelerate in FY2023?", ["JnJ"]),  # EPS, FY: abbreviations
        ("Is 3M a capital-intensive business?", []),
        ("When did we ship OAuth2 support, and IPv6 or Word2Vec?", ["OAuth2", "IPv6", "Word2Vec"]),  # as indexed
        ("How much did PepsiCo borrow from Zürich banks?", ["PepsiCo", "Zürich"]),
        ("What did Caroline do in May, on Aug 15th and on Friday?", ["Caroline"]),  # no months or days
        ("Does Dr Seuss write for Mr Jones?", ["Seuss", "Jones"]),  # titles are no names
        ("Why did I change the parser? Because It was slow", []),  # a sentence's first word
        ("Wann hat Anna das Haus gekauft?", []),  # English only: German capitalises every noun,
        ("¿Cómo se llamaba el trabajo de Ghandi?", []),  # and other languages' dev sets spell names otherwise
        ("Apple Lossless是哪个公司的无损音频压缩编码格式？", []),
    ],
)
def test_question_names(question, names):
    assert question_names(question) == names


@pytest.fixture
def memory(any_store, tmp_path: Path):  # SQLite and PostgreSQL
    notes = {
        "adobe.md": "# Adobe results\n\nAdobe grew its operating margin to 35 percent in fiscal 2022. It uses OAuth2.",
        "margins.md": "# Margins\n\nOur operating margin fell because packaging costs rose.",
        "trek.md": "# Trek\n\nThe Himalayas trek took twelve days.",
    }
    for name, text in notes.items():
        write_note(tmp_path / "v", name, text)
    ingest_notes(any_store, [tmp_path / "v"])
    return any_store


def test_a_name_nowhere_in_memory_is_refused_whatever_else_matches(memory):
    asked = "What was the operating margin of Kenvue in fiscal 2022?"
    found = search(memory, asked, SearchOptions())
    assert found.hits and found.coverage > 0.4  # the rest of the question matches well
    assert found.unknown_names == ["Kenvue"] and is_weak(found, SearchOptions())
    assert abstention_text(found, SearchOptions()).endswith('(nothing in memory mentions "Kenvue").')
    known = search(memory, "What was the operating margin of Adobe in fiscal 2022?", SearchOptions())
    assert known.unknown_names == [] and not is_weak(known, SearchOptions())
    with_digits = search(memory, "Which protocol did Adobe use, OAuth2?", SearchOptions())  # "OAuth" is in no chunk
    assert with_digits.unknown_names == [] and not is_weak(with_digits, SearchOptions())
    other_form = search(memory, "How long was the Himalayan trek?", SearchOptions())  # of "Himalayas"
    assert other_form.unknown_names == [] and not is_weak(other_form, SearchOptions())


def test_a_comparison_is_never_refused_for_a_name(memory):
    assert not is_weak(search(memory, "Adobe vs Kenvue operating margin", SearchOptions()), SearchOptions())


def test_guesses_and_chat_evidence_are_not_refused_for_a_name(memory):
    """ "Would she enjoy Vivaldi?" asks beyond what is stored; and chat questions spell names otherwise
    ("Lebron James" of "LeBron"): LoCoMo dev named something its conversation never holds in 7 of 762
    answerable questions (retrieval/gate.py `SHORT_KINDS`)."""
    guess = search(memory, "Would Adobe buy Kenvue for its operating margin?", SearchOptions())
    assert guess.unknown_names == [] and not is_weak(guess, SearchOptions())
    remember(memory, "Nate hung his LeBron poster above the bed in the new flat.")
    chat = search(memory, "Where did Nate hang his Lebron James poster?", SearchOptions())
    assert chat.hits[0].source_type == "memory" and chat.unknown_names == ["James"]
    assert not is_weak(chat, SearchOptions())
