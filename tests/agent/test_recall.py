"""Recall strategies: temporal expressions on the memory's own timeline, RRF fusion, session MMR."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from crossmodalrag.agent.memories import remember
from crossmodalrag.agent.recall import (
    agent_sessions,
    diversify_by_session,
    episodic_variants,
    event_ranges,
    favour_named_speaker,
    favour_stated_time,
    fuse,
    neighbours,
    recall,
    with_neighbour_support,
    with_recall,
)
from crossmodalrag.agent.temporal import asks_when, states_time, time_ranges
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings
from crossmodalrag.conversations import ingest_conversations
from crossmodalrag.types import Hit

ANCHOR = datetime(2023, 5, 20, 15, 0, tzinfo=timezone.utc)


def day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    "question, start, end, rest",
    [
        (
            "what did we decide about the cache last week?",
            "2023-05-08",
            "2023-05-15",
            "what did we decide about the cache ?",
        ),
        ("what happened yesterday", "2023-05-19", "2023-05-20", "what happened"),
        ("what happened in May?", "2023-05-01", "2023-06-01", "what happened ?"),
        ("plans in December", "2022-12-01", "2023-01-01", "plans"),  # the latest December up to the anchor
        ("news from last month", "2023-04-01", "2023-05-01", "news from"),
        ("what changed since 2023-04-01", "2023-04-01", None, "what changed"),
        ("anything before March 2023?", None, "2023-03-01", "anything ?"),
        # days written out, as people (and LoCoMo's questions) write them
        ("what did Gina find on 1 February, 2023?", "2023-02-01", "2023-02-02", "what did Gina find on ?"),
        ("what did Jon say on October 13, 2022", "2022-10-13", "2022-10-14", "what did Jon say on"),
        ("the gift they gave on Aug 15th", "2022-08-15", "2022-08-16", "the gift they gave on"),  # the latest August
        ("what did she read on 8th December,2022?", "2022-12-08", "2022-12-09", "what did she read on ?"),
        ("what happened in June, 2022", "2022-06-01", "2022-07-01", "what happened"),
        ("the week before August 3, 2022", None, "2022-08-03", "the week"),
        # one range from the first date to the last, the first in the last one's year unless it says otherwise
        ("where was John between August 11 and August 15 2022?", "2022-08-11", "2022-08-16", "where was John ?"),
        ("what did we plan from December to February", "2022-12-01", "2023-03-01", "what did we plan"),
        ("releases between 2021 and 2022", "2021-01-01", "2023-01-01", "releases"),
        # where a date must stand, "May" is the month, not the verb
        ("what did Ana paint between May and July?", "2022-05-01", "2022-08-01", "what did Ana paint ?"),
        ("anything since May 4?", "2023-05-04", None, "anything ?"),
    ],
)
def test_temporal_expressions_resolve_against_the_memory_timeline(question, start, end, rest):
    (span,), remaining = time_ranges(question, ANCHOR)
    assert span.start == (day(start) if start else None) and span.end == (day(end) if end else None)
    assert remaining == rest


def test_no_temporal_expression_and_may_the_verb():
    assert time_ranges("May I ask when Caroline went to the support group?", ANCHOR) == (
        [],
        "May I ask when Caroline went to the support group?",
    )
    for question in ("may 4 people come?", "the 10 may come along"):
        assert time_ranges(question, ANCHOR) == ([], question)


def hit(chunk: int, source: int, score: float = 0.0, components: dict | None = None) -> Hit:
    """A turn whose BM25 is its score, unless `components` say otherwise."""
    parts = {"bm25": score} if components is None else components
    return Hit(chunk, f"s{source}", "conversation", "text", "t", "", "t\nbody", None, score, parts, source_id=source)


def test_a_replaced_memory_follows_the_chain_of_its_successors_and_a_cycle_ends():
    from crossmodalrag.retrieval.scoring import below_successors

    ranked = [hit(1, 1, 3.0), hit(2, 2, 2.0), hit(4, 4, 1.5), hit(3, 3, 1.0)]  # 1 replaced by 2, 2 by 3
    moved = below_successors(ranked, {1: 2, 2: 3})
    assert [h.source_id for h in moved] == [4, 3, 2, 1]
    assert [h.score for h in moved] == sorted((h.score for h in moved), reverse=True)
    assert len(below_successors(ranked, {1: 2, 2: 1})) == 4  # marks in a cycle: no endless moving


def test_fusion_ranks_by_reciprocal_rank_across_lists():
    fused = fuse([[hit(1, 1), hit(2, 1)], [hit(2, 1), hit(3, 2)]])
    assert [h.chunk_id for h in fused] == [2, 1, 3] and fused[0].components["rrf"] > fused[1].components["rrf"]


def test_session_diversity_spreads_the_head_and_keeps_the_tail():
    ranked = [hit(1, 1, 1.0), hit(2, 1, 0.9), hit(3, 1, 0.8), hit(4, 2, 0.6), hit(5, 3, 0.3)]
    assert [h.chunk_id for h in diversify_by_session(ranked, 5, head=2)] == [1, 4, 2, 3, 5]
    assert [h.chunk_id for h in diversify_by_session(ranked, 3, head=0)] == [1, 2, 3]


def test_session_diversity_never_promotes_a_turn_unrelated_to_the_question():
    # The QA repro's shape: the logo session holds every good hit; other sessions' turns share no word
    # with the question and are far from it in meaning, yet their fused RRF scores lie close by.
    def turn(chunk, source, score, bm25, cosine):
        return hit(chunk, source, score, {"bm25": bm25, "cosine": cosine})

    ranked = [
        turn(1, 1, 0.036, 18.7, 0.79),  # the question itself
        turn(2, 1, 0.0355, 17.8, 0.48),  # the answer
        turn(3, 1, 0.0347, 10.4, 0.53),
        turn(4, 2, 0.0263, 0.0, 0.18),  # "[REDACTED_TEXT len=647 sha=...]"
        turn(5, 3, 0.0255, 0.0, 0.17),
        turn(6, 4, 0.025, 3.2, 0.13),  # "bd create --title=... Code Quality"
        turn(7, 5, 0.024, 0.0, 0.45),  # no shared word, close in meaning: still spreads the head
    ]
    picked = [h.chunk_id for h in diversify_by_session(ranked, 5, cosine_floor=0.37)]
    assert picked == [1, 7, 2, 3, 4]
    assert [h.chunk_id for h in diversify_by_session(ranked, 7, cosine_floor=0.37)][5:] == [5, 6]  # fused order


@pytest.fixture
def memory(store, tmp_path):
    sessions = [
        ("2023-04-03", "We moved the cache to Redis on port 6379."),
        ("2023-05-10", "We moved the cache to port 7379 after the outage."),
        ("2023-05-19", "Lunch plans and nothing about infrastructure."),
    ]
    conversation = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, (when, text) in enumerate(sessions, 1):
        conversation[f"session_{number}_date_time"] = datetime.fromisoformat(when).strftime("%I:%M %p on %d %B, %Y")
        conversation[f"session_{number}"] = [{"speaker": "Ana", "dia_id": f"D{number}:1", "text": text}]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "c1", "conversation": conversation}]))
    ingest_conversations(store, [path])
    return store


def test_episodic_finds_the_turn_inside_the_question_window(memory, settings):
    retriever = with_recall(open_retriever(memory, settings, 2), "episodic", None, None)
    result = recall(retriever, "where did we move the cache last week?", "episodic")
    assert result.hits[0].locator.endswith("D2:1")  # the week before the memory's newest session
    direct = with_recall(open_retriever(memory, settings, 2), "direct", None, "2023-05-01")
    assert [h.locator[-4:] for h in direct.search("cache port").hits] == ["D1:1"]  # --before filters


def test_a_date_range_with_one_content_word_searches_the_question_not_the_word(memory, settings):
    retriever = with_recall(open_retriever(memory, settings, 2), "episodic", None, None)
    variants = episodic_variants(retriever, "Where was Ana in May 2023?", retriever.options)
    assert [text for text, options in variants if options.after is not None] == ["Where was Ana"]
    variants = episodic_variants(retriever, "what did Ana move in May 2023?", retriever.options)
    assert [text for text, options in variants if options.after is not None] == ["Ana move"]


def test_cli_strategy_and_dates(memory, capsys):
    args = ["ask", "where is the cache?", "--no-llm", "--json", "--strategy", "fusion", "--after", "2023-05-01"]
    assert main(args) == 0
    evidence = json.loads(capsys.readouterr().out)["evidence"]
    assert [e["locator"][-4:] for e in evidence] == ["D2:1"]
    with pytest.raises(SystemExit) as exit_info:  # a usage error (tests/cli/test_cli.py)
        main(["ask", "cache", "--no-llm", "--after", "last tuesday"])
    assert exit_info.value.code == 2 and "--after: the date must be an ISO date" in capsys.readouterr().err


def test_the_default_strategy_is_a_setting():
    assert Settings().strategy in ("direct", "episodic", "fusion")


def locomo_memory(store, tmp_path, sessions: list[tuple[str, list[tuple[str, str]]]]):
    """A LoCoMo-style memory: (date, [(speaker, text), ...]) per session."""
    conversation = {"speaker_a": "Ana", "speaker_b": "Ben"}
    for number, (when, turns) in enumerate(sessions, 1):
        conversation[f"session_{number}_date_time"] = datetime.fromisoformat(when).strftime("%I:%M %p on %d %B, %Y")
        conversation[f"session_{number}"] = [
            {"speaker": speaker, "dia_id": f"D{number}:{i}", "text": text} for i, (speaker, text) in enumerate(turns, 1)
        ]
    path = tmp_path / "talk.json"
    path.write_text(json.dumps([{"sample_id": "c2", "conversation": conversation}]))
    ingest_conversations(store, [path])
    return store


@pytest.mark.parametrize(
    "question, expected",
    [
        ("When did Caroline go to the support group?", True),
        ("what year did Jon open the studio", True),
        ("So, how long ago was the move?", True),
        ("In which month did we ship it?", True),
        ("What did Caroline do when she moved?", False),  # "when" that is not what is asked
        ("Who went to the support group?", False),
    ],
)
def test_a_question_asking_for_a_time(question, expected):
    assert asks_when(question) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to a support group yesterday", True),
        ("Last Friday was wild", True),
        ("we moved here in 2019", True),
        ("a few weeks back I quit", True),
        ("I'll come over tomorrow", True),
        ("We met in May", True),
        ("I may go to the support group", False),  # the verb, not the month
        ("Thanks, talk to you soon!", False),
    ],
)
def test_words_that_place_a_text_in_time(text, expected):
    assert states_time(text) is expected


def test_a_when_question_prefers_evidence_that_states_a_time():
    said = replace(hit(1, 1, 1.0), text="Ana & Ben · session 3 · 2023-05-08\nAna: The support group was great.")
    dated = replace(hit(2, 2, 0.9), text="Ana & Ben · session 2 · 2023-05-01\nAna: I went to the group yesterday.")
    assert [h.chunk_id for h in favour_stated_time([said, dated], "When did Ana go to the group?")] == [2, 1]
    # the breadcrumb's date is every turn's: only the turn's own words count; other questions keep the order
    assert [h.chunk_id for h in favour_stated_time([said, dated], "Where did Ana go?")] == [1, 2]
    undated = replace(dated, text="Ana & Ben · session 2 · 2023-05-01\nAna: I went to the group.")
    assert [h.chunk_id for h in favour_stated_time([said, undated], "When did Ana go to the group?")] == [1, 2]


def test_the_turns_of_the_speaker_a_question_names_rank_higher(store, tmp_path):
    memory = locomo_memory(
        store, tmp_path, [("2023-05-01", [("Ana", "I painted a lake."), ("Ben", "I painted a lake.")])]
    )
    ana, ben = (row[0] for row in memory.conn.execute("SELECT id FROM chunks ORDER BY id"))
    ranked = [hit(ana, 1, 1.0), hit(ben, 1, 0.95)]
    assert [h.chunk_id for h in favour_named_speaker(memory, ranked, "What did Ben paint?")] == [ben, ana]
    for question in ("What did they paint?", "What did Ana and Ben paint?"):  # none, or both: no preference
        assert [h.chunk_id for h in favour_named_speaker(memory, ranked, question)] == [ana, ben]


def test_a_turn_next_to_strong_evidence_ranks_above_an_isolated_one(store, tmp_path):
    memory = locomo_memory(
        store,
        tmp_path,
        [
            ("2023-05-01", [("Ana", "What do your kids like?"), ("Ben", "Dinosaurs, all day long.")]),
            ("2023-05-02", [("Ana", "Museums are fun."), ("Ben", "The weather was bad.")]),
        ],
    )
    question, reply, alone, other = (row[0] for row in memory.conn.execute("SELECT id FROM chunks ORDER BY id"))
    ranked = [hit(question, 1, 1.0), hit(alone, 2, 0.5), hit(reply, 1, 0.49)]
    supported = with_neighbour_support(memory, ranked)
    assert [h.chunk_id for h in supported] == [question, reply, alone]  # the reply gains 0.1 of 1.0
    assert supported[0].score == pytest.approx(1.0 + 0.1 * 0.49) and supported[2].score == 0.5  # no neighbour hit


def test_a_turn_about_nothing_in_the_question_gets_no_support_from_its_neighbours(store, tmp_path):
    """RRF scores lie close together: support lifted a turn sharing nothing with the question over an
    exact match (a memory with the question's every word, cosine 0.92; the turn 0 and 0.17)."""
    memory = locomo_memory(
        store, tmp_path, [("2023-05-01", [("Ana", "Phoenix is starting."), ("Ben", "It started on port 4000.")])]
    )
    first, second = (row[0] for row in memory.conn.execute("SELECT id FROM chunks ORDER BY id"))
    exact = replace(hit(99, 9, 0.0328, {"bm25": 14.2, "cosine": 0.92}), source_type="memory")
    unrelated = [hit(first, 1, 0.0325, {"bm25": 0.0, "cosine": 0.17}), hit(second, 1, 0.032, {"bm25": 2.0})]
    ranked = with_neighbour_support(memory, [exact, *unrelated], cosine_floor=0.37)
    assert [h.chunk_id for h in ranked] == [99, first, second] and ranked[1].score == 0.0325
    close_in_meaning = [replace(unrelated[0], components={"bm25": 0.0, "cosine": 0.5}), unrelated[1]]
    assert with_neighbour_support(memory, [exact, *close_in_meaning], cosine_floor=0.37)[0].chunk_id == first


def test_episodic_does_not_penalise_an_old_session(store, tmp_path, settings):
    """Direct ranking counts age; a question about an old conversation must not lose to a newer one."""
    memory = locomo_memory(
        store,
        tmp_path,
        [
            ("2021-03-01", [("Ana", "The kite festival at the beach had a huge red dragon kite.")]),
            ("2023-05-01", [("Ana", "Kite shopping again, maybe a red one for the festival next year.")]),
        ],
    )
    question = "What kite did Ana see at the kite festival at the beach?"
    direct = with_recall(open_retriever(memory, settings, 2), "direct", None, None).search(question).hits
    episodic = recall(with_recall(open_retriever(memory, settings, 2), "episodic", None, None), question, "episodic")
    assert direct[0].components["recency"] < direct[1].components["recency"]  # the old one pays for its age
    assert episodic.hits[0].locator.endswith("D1:1") and all(h.components["recency"] == 0 for h in episodic.hits)


def test_before_or_since_an_event_means_before_or_since_the_evidence_for_it(memory, settings):
    retriever = with_recall(open_retriever(memory, settings, 3), "episodic", None, None)
    (before,) = event_ranges(retriever, "where was the cache before the outage?", retriever.options)
    (since,) = event_ranges(retriever, "what broke since the outage?", retriever.options)
    assert (before.start, before.end) == (None, day("2023-05-10")) and (since.start, since.end) == (
        day("2023-05-10"),
        None,
    )
    found = recall(retriever, "which port did the cache use before the outage?", "episodic")
    assert found.hits[0].locator.endswith("D1:1")  # the session before the one that mentions the outage


def test_the_memories_of_one_agent_session_diversify_as_one_session(store):
    stored = [remember(store, text, session_id=session).id for text, session in MEMORIES]
    hits = [
        replace(hit(i, source, score), source_type="memory")
        for i, (source, score) in enumerate(zip(stored, (1.0, 0.5, 0.4, 0.2), strict=True), 1)
    ]
    sessions = agent_sessions(store, hits)
    assert sessions == {stored[0]: ("", "s1"), stored[1]: ("", "s1"), stored[2]: ("", "s2")}  # the 4th has none
    assert [h.chunk_id for h in diversify_by_session(hits, 4, head=2, sessions=sessions)] == [1, 3, 2, 4]
    assert [h.chunk_id for h in diversify_by_session(hits, 4, head=2)] == [1, 2, 3, 4]  # each memory its own source


MEMORIES = [
    ("The cache listens on port 7379", "s1"),
    ("Deploys need the VPN", "s1"),
    ("Releases ship on Tuesdays", "s2"),
    ("The staging key rotates monthly", ""),
]


def test_memories_stored_one_after_another_in_a_session_are_neighbours(store):
    talk = [
        ("Ana: What do your kids like?", "s1"),
        ("Ben: Dinosaurs, all day long.", "s1"),
        ("Ben: The weather was bad.", "s2"),
        ("Ana: Museums are fun.", "s1"),
    ]
    question, reply, other_session, later = (remember(store, text, session_id=s).id for text, s in talk)
    hits = [
        replace(hit(source, source, score), source_type="memory", text=f"t\n{text}")
        for source, score, (text, _) in zip(
            (question, reply, other_session, later), (1.0, 0.49, 0.5, 0.3), talk, strict=True
        )
    ]
    ranked = with_neighbour_support(store, hits)
    assert [h.source_id for h in ranked] == [question, reply, other_session, later]  # the reply gains 0.1 of 1.0
    assert ranked[3].score == pytest.approx(0.3 + 0.1 * 0.49)  # stored after the reply in s1; s2 is apart
    named = favour_named_speaker(store, hits, "What does Ben like?")  # the "Name:" label is the speaker
    assert [h.source_id for h in named] == [question, other_session, reply, later]  # Ben's two, x1.1
    assert named[1].score == pytest.approx(0.5 * 1.1) and named[2].score == pytest.approx(0.49 * 1.1)


def test_memories_of_a_session_follow_their_own_time_then_storage_order(store):
    """Turns stored out of order, each with when it was said, are neighbours in speaking order."""
    said = [datetime(2023, 5, 8, 13, minute, tzinfo=timezone.utc).timestamp() for minute in (1, 2, 3)]
    reply = remember(store, "Ben: Dinosaurs, all day long.", session_id="s1", when=said[1]).id
    question = remember(store, "Ana: What do your kids like?", session_id="s1", when=said[0]).id
    later = remember(store, "Ana: Museums are fun.", session_id="s1", when=said[2]).id
    hits = [replace(hit(source, source), source_type="memory") for source in (question, reply, later)]
    places = neighbours(store, hits)
    assert places[reply] == (("memory", reply), ("memory", question), ("memory", later))
    assert places[question][1] == ("memory", None)  # nothing said before it in s1


def test_evidence_to_answer_from_is_the_fused_order_without_the_lift_or_the_spread(store, tmp_path, settings):
    """Listing, the named speaker's turn is lifted and sessions spread; answering, the best turns lead, so
    the subject share can still see that the best matches are someone else's words."""
    sessions = [
        (
            "2023-05-01",
            [("Ben", "I painted the lake at dawn, the lake was so calm."), ("Ben", "Painting lakes all day!")],
        ),
        ("2023-05-08", [("Ana", "I once walked by a lake.")]),
    ]
    memory = locomo_memory(store, tmp_path, sessions)
    retriever = with_recall(open_retriever(memory, settings, 2, lexical_only=True), "episodic", None, None)
    question = "What did Ana paint at the lake?"
    listed = [h.text.split("\n", 1)[1] for h in retriever.search(question).hits]
    answered = [h.text.split("\n", 1)[1] for h in retriever.search(question, answering=True).hits]
    assert any(text.startswith("Ana:") for text in listed)
    assert all(text.startswith("Ben:") for text in answered)
