"""A period the question names holds its evidence (agent/periods.py, recall.py: `diversify_by_session`)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from crossmodalrag.agent import recall as recall_module
from crossmodalrag.agent.periods import named_periods
from crossmodalrag.agent.recall import diversify_by_session, with_recall
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.types import Hit

ANCHOR = datetime(2023, 8, 1, 12, 0, tzinfo=timezone.utc)


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    "question, periods",
    [
        ("what did we discuss about the logo in March 2023?", [("2023-03-01", "2023-04-01")]),
        ("What did Melanie do last week?", [("2023-07-24", "2023-07-31")]),
        ("What did Ana bake recently in May 2023?", [("2023-05-01", "2023-06-01")]),  # "recently": no period
        ("What did Ana bake recently?", []),
        # the date places what is referred to, not the answer: the meeting may be in September
        ("When did John meet his teammates after his trip in August 2023?", []),
        # a bound: "the week" counts from it, told in a session of 9 June ("last week I ...")
        ("Where was Tim in the week before 9 June 2023?", []),
        ("What did Ana do last weekend before April 10, 2023?", []),
        ("What did Ana paint?", []),
    ],
)
def test_the_periods_a_question_names(question, periods):
    found = named_periods(question, ANCHOR)
    assert [(span.start, span.end) for span in found] == [(day(start), day(end)) for start, end in periods]


@pytest.fixture
def logo_memory(store, tmp_path):
    """One March session about the logo; later months mention it too."""
    march = [
        ("Ana", "We discussed a first logo draft: a blue circle."),
        ("Ben", "To discuss: the logo needs a thinner font."),
        ("Ana", "Logo colours discussed: blue and white."),
        ("Ben", "Lunch at noon tomorrow?"),
    ]
    sessions = [
        ("2023-03-29", march),
        ("2023-05-25", [("Ana", "The logo, the logo again: the logo in the website header.")]),
        ("2023-07-20", [("Ben", "Did we discuss the logo? The logo, logo sizes?")]),
        ("2023-08-01", [("Ana", "The new logo on the mugs looks great.")]),
    ]
    conversation = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, (when, turns) in enumerate(sessions, 1):
        conversation[f"session_{number}_date_time"] = datetime.fromisoformat(when).strftime("%I:%M %p on %d %B, %Y")
        conversation[f"session_{number}"] = [
            {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text} for i, (speaker, text) in enumerate(turns, 1)
        ]
    path = tmp_path / "logo.json"
    path.write_text(json.dumps([{"sample_id": "logo", "conversation": conversation}]))
    ingest_conversations(store, [path])
    return store


def turn(chunk: int, session: int, score: float, bm25: float, cosine: float) -> Hit:
    return Hit(chunk, f"s{session}", "conversation", "text", "t", "", "t\nbody", None, score,
               {"bm25": bm25, "cosine": cosine}, source_id=session)  # fmt: skip


def test_session_diversity_stays_inside_the_named_period_while_it_holds_hits_about_the_question():
    # The QA repro's figures: "what did we discuss about the logo in March 2023?"; sessions 23 and 24
    # are March's, 10 and 20 July's and May's turns fused far below them.
    ranked = [
        turn(1, 23, 0.0532, 5.98, 0.47),
        turn(2, 23, 0.0531, 5.72, 0.48),
        turn(3, 23, 0.0514, 3.23, 0.51),
        turn(4, 24, 0.0400, 4.00, 0.50),
        turn(5, 23, 0.0350, 3.00, 0.40),
        turn(6, 10, 0.0146, 4.73, 0.30),  # July: "Last weekend our city held a pride parade!"
        turn(7, 20, 0.0128, 3.84, 0.10),  # May
    ]
    march = {1, 2, 3, 4, 5}
    assert [h.chunk_id for h in diversify_by_session(ranked, 5, cosine_floor=0.37)] == [1, 4, 2, 6, 3]
    assert [h.chunk_id for h in diversify_by_session(ranked, 5, cosine_floor=0.37, period=march)] == [1, 4, 2, 3, 5]
    # No hit of the period about the question (or none left): other sessions spread the head as before.
    unrelated = [turn(1, 23, 0.05, 5.0, 0.5), turn(2, 23, 0.049, 0.0, 0.1), turn(3, 10, 0.03, 4.0, 0.3)]
    assert [h.chunk_id for h in diversify_by_session(unrelated, 3, cosine_floor=0.37, period={1, 2})] == [1, 3, 2]
    assert [h.chunk_id for h in diversify_by_session(unrelated, 3, cosine_floor=0.37, period={2})] == [1, 3, 2]


def test_recall_hands_the_named_period_to_session_diversity(logo_memory, settings, monkeypatch):
    seen = []

    def diversify(hits, limit, **kwargs):
        seen.append({h.locator.rsplit(":", 1)[0][-2:] for h in hits if h.chunk_id in kwargs["period"]})
        return hits[:limit]

    monkeypatch.setattr(recall_module, "diversify_by_session", diversify)
    retriever = with_recall(open_retriever(logo_memory, settings, 4, lexical_only=True), "episodic", None, None)
    retriever.search("what did we discuss about the logo in March 2023?")
    retriever.search("When did we discuss the logo in March 2023?")  # the date places it: no period
    retriever.search("what did we discuss about the logo?")
    assert seen == [{"D1"}, set(), set()]
