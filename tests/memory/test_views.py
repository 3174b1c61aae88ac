"""Retrieval at a level, usage, forgetting, recall cards, drift and distillation."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.config import Settings
from crossmodalrag.memory import usage
from crossmodalrag.memory.distill import distill_view, stand_ins
from crossmodalrag.memory.drift import concept_drift, sparkline
from crossmodalrag.memory.forgetting import forgetting
from crossmodalrag.memory.recall import llm_card, recall_cards
from crossmodalrag.memory.retrieve import LevelRetriever, at_level, with_nodes
from crossmodalrag.memory_views import MemoryNotBuilt
from crossmodalrag.types import Document
from tests.memory.helpers import ScriptedExtractor, add_docs, build, event, events_output, semantic_for

DAY = 86400.0
CACHE = "We dropped the LRU render cache and memoized rendering by content hash."
XSS = "We escaped link titles to fix the XSS hole in the renderer."


def _doc(name: str, text: str, days: float) -> Document:
    return Document(f"/work/{name}/n.md", "note", name, f"# {name}\n\n{text}\n", "markdown",
                    timestamp=1_735_689_600.0 + days * DAY, locator=f"{name}/n.md")  # fmt: skip


class PerSource(ScriptedExtractor):
    """Answers with the event whose statement is the source's own sentence (it is in the prompt)."""

    def stream(self, messages, generation):
        statement = CACHE if "LRU" in messages[-1]["content"] else XSS
        self.outputs = [json.dumps(events_output(event(statement)))]
        yield from super().stream(messages, generation)


@pytest.fixture
def memory(store, db_path):
    add_docs(store, _doc("cache", CACHE, 0), _doc("xss", XSS, 2), _doc("cache2", CACHE + " Again.", 40))
    build(store, db_path, llm=PerSource("{}"))
    return store


def _retriever(store, db_path, level, top_k=3, lexical=True):
    base = open_retriever(store, Settings(db_path=db_path), top_k, lexical_only=lexical)
    return at_level(base, level, Settings(db_path=db_path))


@pytest.mark.parametrize("level", ["event", "episode", "concept"])
def test_levels_drill_down_to_l0_chunks_and_name_their_nodes(memory, db_path, level) -> None:
    retriever = _retriever(memory, db_path, level, lexical=level != "concept")
    if level == "concept":
        retriever = LevelRetriever(retriever.base, "concept")
        retriever.base.semantic = semantic_for(memory, db_path)
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    assert answer.level == level and answer.matched_nodes
    assert answer.evidence and "LRU" in answer.evidence[0].hit.text
    assert len(answer.evidence) <= 3  # only the top-k drilled-down chunks, never every chunk under a node
    payload = answer.to_dict()
    assert payload["matched_nodes"][0]["evidence"][0]["chunk_id"]


@pytest.mark.parametrize("level", ["episode", "concept"])
def test_a_node_sharing_nothing_with_the_question_is_not_matched(memory, db_path, level) -> None:
    retriever = LevelRetriever(_retriever(memory, db_path, level).base, level)
    retriever.base.semantic = semantic_for(memory, db_path)
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    matched = " ".join(node["title"] for node in answer.to_dict()["matched_nodes"])
    assert "XSS" not in matched and "xss" not in matched
    assert all("XSS" not in item.hit.text for item in answer.evidence)


@pytest.mark.parametrize("level", ["event", "episode", "concept"])
def test_a_level_drills_down_only_to_evidence_the_date_window_lets_through(memory, db_path, level) -> None:
    """--after narrows a level's evidence as it narrows plain retrieval: the LRU cache was dropped on
    day 0 and again on day 40, and only the second is inside the window."""
    from crossmodalrag.agent.recall import with_recall

    base = open_retriever(memory, Settings(db_path=db_path), 3, lexical_only=level != "concept")
    if level == "concept":
        base.semantic = semantic_for(memory, db_path)
    retriever = at_level(with_recall(base, "direct", "2025-01-20", None), level, Settings(db_path=db_path))
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    assert answer.evidence and {item.hit.source_uri for item in answer.evidence} == {"/work/cache2/n.md"}
    shown = {e["source_uri"] for node in answer.to_dict()["matched_nodes"] for e in node["evidence"]}
    assert shown == {"/work/cache2/n.md"}


@pytest.mark.parametrize("level", ["event", "episode", "concept"])
def test_a_level_finds_nothing_in_a_modality_its_nodes_have_no_evidence_in(memory, db_path, level) -> None:
    base = open_retriever(memory, Settings(db_path=db_path), 3, modalities=("image",))
    base.semantic = semantic_for(memory, db_path)
    retriever = at_level(base, level, Settings(db_path=db_path))
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    assert not answer.evidence and not answer.matched_nodes


def test_a_level_refuses_as_of_its_nodes_are_built_from_memory_now(memory, db_path) -> None:
    from crossmodalrag.errors import CMRAGError
    from crossmodalrag.versioning.asof import PastRetriever, PastState

    base = open_retriever(memory, Settings(db_path=db_path), 3, lexical_only=True)
    past = PastRetriever(memory, base.options, None, past=PastState(1, set(), None))
    with pytest.raises(CMRAGError, match="--as-of cannot be combined with --level episode"):
        at_level(past, "episode", Settings(db_path=db_path))


def test_a_level_that_is_not_built_says_what_to_run(store, db_path) -> None:
    base = open_retriever(store, Settings(db_path=db_path), 3, lexical_only=True)
    with pytest.raises(MemoryNotBuilt, match="no concept nodes"):
        at_level(base, "concept", Settings(db_path=db_path))


def test_usage_is_opt_in_and_never_stores_the_question(memory, db_path) -> None:
    settings = Settings(db_path=db_path)
    assert not usage.is_enabled(settings) and usage.is_enabled(settings, track=True)
    assert not usage.is_enabled(Settings(db_path=db_path, usage_tracking=True), no_track=True)
    retriever = _retriever(memory, db_path, "event")
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    assert usage.record_answer(memory, answer) > 0
    dump = "\n".join(" ".join(map(str, row)) for row in memory.conn.execute("SELECT * FROM memory_usage"))
    assert "dropped" not in dump and "LRU" not in dump and "chunk:" in dump and "ev_" in dump
    strength = usage.strength(memory.conn, [answer.matched_nodes[0]["id"]], 14.0, 5.0)
    assert 0.0 < next(iter(strength.values())) < 1.0
    assert usage.clear(memory) > 0 and usage.usage_view(memory)["events"] == 0


def test_forgetting_is_importance_times_staleness_and_usage_refreshes(memory) -> None:
    items = forgetting(memory, "event", top=10, now=1_735_689_600.0 + 100 * DAY)
    assert items and all(i["risk"] == pytest.approx(i["importance"] * i["staleness"], abs=1e-5) for i in items)
    assert all(i["touched_by"] == "content_age" and i["evidence"] for i in items)
    usage.record(memory, [items[0]["id"]], "accepted")
    again = {i["id"]: i for i in forgetting(memory, "event", top=10)}
    assert again[items[0]["id"]]["touched_by"] == "usage" and again[items[0]["id"]]["staleness"] < 0.01


def test_min_support_counts_only_episodes_and_concepts_and_an_empty_view_says_why(memory, db_path, capsys) -> None:
    from crossmodalrag.cli.main import main

    db = ["--db-path", str(db_path)]
    assert main(["forgetting", "--level", "event", "--min-support", "5", *db]) == 0
    assert "LRU" in capsys.readouterr().out  # an event holds no events: --min-support leaves it alone
    for command in ("forgetting", "recall"):
        assert main([command, "--level", "episode", "--min-support", "5", *db]) == 0
        shown = capsys.readouterr()
        assert not shown.out and "no episode node has at least 5 events" in shown.err


def test_recall_on_an_empty_hierarchy_says_it_is_not_built(store, db_path, capsys) -> None:
    from crossmodalrag.cli.main import main

    assert main(["recall", "--db-path", str(db_path)]) == 0
    shown = capsys.readouterr()
    assert not shown.out and "no memory nodes yet: run `mem build-memory`" in shown.err


def test_recall_without_a_database_prints_only_the_error(tmp_path, capsys) -> None:
    from crossmodalrag.cli.main import main

    assert main(["recall", "--db-path", str(tmp_path / "none.db")]) == 1
    shown = capsys.readouterr().err
    assert shown.startswith("error: ") and "template cards" not in shown


def test_recall_cards_are_cached_per_node_and_cite_real_text(memory) -> None:
    cards = recall_cards(memory, "event", top=2)
    assert cards and all(c["generator"] == "template" and c["cited"] for c in cards)
    for card in cards:
        assert card["answer"].rstrip(" …") in " ".join(card["cited"][0]["excerpt"].split())  # real L0 text
    model = ScriptedExtractor({"question": "What was memoized instead?", "answer": "Rendering.", "evidence": 1})
    assert recall_cards(memory, "event", top=2, llm=model) == cards and not model.calls  # cached
    regenerated = recall_cards(memory, "event", top=2, llm=model, regenerate=True)
    assert regenerated[0]["question"] == "What was memoized instead?" and len(model.calls) == 2
    assert len(model.judged) == 2 and "Claim: The answer to" in model.judged[0][-1]["content"]
    assert recall_cards(memory, "event", top=2, regenerate=True) == regenerated  # no model: its cards are kept
    unsupported = ScriptedExtractor({"question": "What improved?", "answer": "Performance and errors.", "evidence": 1})
    unsupported.margins = [-3.0, -3.0]  # the excerpt does not say it: the template card stands
    assert recall_cards(memory, "event", top=2, llm=unsupported, regenerate=True) == cards


HIKE = 'Went hiking near the lake; started reading "Designing Data-Intensive Applications". #reading'


def test_a_model_card_answer_loses_the_punctuation_it_opens_with() -> None:
    """qwen2.5-coder-1.5b's card answered ", went hiking near the lake; started reading ..."."""
    card = {"question": "What did I do near the lake?", "answer": ", went hiking near the lake.", "evidence": 1}
    made = llm_card(ScriptedExtractor(card), {"evidence": [{"excerpt": HIKE}]})
    assert made is not None and made["answer"] == "went hiking near the lake."


@pytest.mark.parametrize("answer", ["-18 °C at night", ".NET 8 for the backend"])
def test_a_model_card_answer_keeps_a_sign_or_dot_that_belongs_to_it(answer) -> None:
    """Opening punctuation goes, a minus sign or a name's leading dot stays."""
    excerpt = "Camp notes: it dropped to -18 °C at night. The backend runs on .NET 8 for the backend."
    card = {"question": "What did the notes say about it?", "answer": answer, "evidence": 1}
    made = llm_card(ScriptedExtractor(card), {"evidence": [{"excerpt": excerpt}]})
    assert made is not None and made["answer"] == answer


@pytest.mark.parametrize(
    "excerpt, question, answer",
    [
        # nothing beyond the question's words
        (
            "Docs: README — 日本語",
            "What does the README file for the project say?",
            "It is a README file for the project.",
        ),
        # words of no excerpt: the turn says the request was interrupted
        (
            "user: [Request interrupted by user for tool use]",
            "What error did you encounter while running the server?",
            "The error occurred while running the server.",
        ),
        # figures of another excerpt: the landlord's line holds no rent (the QA sweep's card, session 34)
        (
            "Landlord: Mr. Okafor, phone in contacts.",
            "What is the rent and deposit amount?",
            "The rent is 1450 EUR/month, the deposit is 4350 EUR, paid to the landlord Mr. Okafor.",
        ),
    ],
)
def test_a_model_card_whose_answer_says_nothing_of_its_excerpt_is_not_kept(excerpt, question, answer) -> None:
    """The judge passed these cards of qwen2.5-coder-1.5b; the template card stands instead."""
    model = ScriptedExtractor({"question": question, "answer": answer, "evidence": 1})
    assert llm_card(model, {"evidence": [{"excerpt": excerpt}]}) is None


def test_drift_windows_flag_relearning_and_draw_a_sparkline() -> None:
    a, b = np.array([1.0, 0.0], dtype=np.float32), np.array([0.0, 1.0], dtype=np.float32)
    times = [0.0, 1 * DAY, 65 * DAY]  # window 0, window 0, (empty window 1), window 2
    result = concept_drift(times, np.vstack([a, a, b]), 30.0)
    assert [w["events"] for w in result["windows"]] == [2, 0, 1]
    assert result["relearning"] and result["windows"][2]["drift"] == pytest.approx(1.0)
    assert sparkline([w["drift"] for w in result["windows"]]) == "··█"


def test_distill_keeps_the_most_shared_real_chunks(memory) -> None:
    assert stand_ins({1: (3, 0.5), 2: (1, 0.9), 3: (1, 0.2), 4: (2, 0.1)}, 0.5) == [(1, 1.0), (4, 2 / 3)]
    for node in distill_view(memory):
        assert 1 <= len(node["stand_ins"]) <= node["chunks_total"]


def test_the_usage_profile_reranks_only_relevant_candidates(store, db_path) -> None:
    from crossmodalrag.retrieval.search import SearchOptions, search

    add_docs(
        store,
        _doc("a", "The render cache was dropped for memoization.", 0),
        _doc("b", "The render cache was dropped for memoization too.", 0),
        _doc("c", "Watering the plants on Sunday.", 0),
    )
    semantic = semantic_for(store, db_path)
    options = SearchOptions(top_k=3, profile="usage", max_chunks_per_source=1)
    before = search(store, "render cache dropped", options, semantic).hits
    second, unrelated = before[1], store.conn.execute("SELECT id FROM chunks WHERE text LIKE '%plants%'").fetchone()[0]
    usage.record(store, [usage.chunk_target(second.chunk_id)] * 1, "accepted")
    for _ in range(20):
        usage.record(store, [usage.chunk_target(second.chunk_id), usage.chunk_target(unrelated)], "retrieved")
    after = search(store, "render cache dropped", options, semantic).hits
    assert after[0].chunk_id == second.chunk_id and after[0].components["usage"] > 0.9
    assert all(h.components["usage"] == 0.0 for h in after if h.chunk_id == unrelated)
    plain = search(store, "render cache dropped", SearchOptions(top_k=3, max_chunks_per_source=1), semantic).hits
    assert [h.chunk_id for h in plain] == [h.chunk_id for h in before]  # other profiles ignore usage


def test_the_event_level_ranks_events_by_their_match_alone(memory, db_path) -> None:
    """Two events saying the same thing 40 days apart: equal for the event level (a channel fused
    with L0 search), the newer one first for the episode level (recency is a browsing prior)."""
    events = _retriever(memory, db_path, "event")
    events.search("Why was the LRU render cache dropped?")
    cache = [n for n in events.matched_nodes if "LRU" in n["title"]]
    assert len(cache) == 2 and cache[0]["score"] == cache[1]["score"]
    episodes = _retriever(memory, db_path, "episode")
    episodes.search("Why was the LRU render cache dropped?")
    first, second = (n for n in episodes.matched_nodes if "cache" in n["title"].lower())
    assert first["score"] > second["score"] and first["first_time"] > second["first_time"]


def test_an_event_about_something_else_is_not_matched_and_adds_no_chunk(memory, db_path) -> None:
    retriever = _retriever(memory, db_path, "event")
    retriever.base.semantic = semantic_for(memory, db_path)
    answer = with_nodes(ask_without_llm(retriever, "Why was the LRU render cache dropped?"), retriever)
    matched = [node["title"] for node in answer.matched_nodes]
    assert matched and all("LRU" in title for title in matched)  # the XSS fix is about something else
    assert all(node["components"]["cosine"] >= 0.55 for node in answer.matched_nodes)


def test_every_embedding_model_a_user_can_select_has_its_own_event_gate() -> None:
    """A model left out is gated at MiniLM's 0.55, which lets through 99.8% of nomic's closest pairs."""
    from crossmodalrag.index import multilingual, nomic
    from crossmodalrag.index.models import OFFLINE_NAME
    from crossmodalrag.memory.retrieve import EVENT_MIN_COSINES

    assert set(EVENT_MIN_COSINES) == {OFFLINE_NAME, multilingual.NAME, nomic.NAME}


def test_the_event_gate_reads_the_cosine_on_the_active_models_scale(memory, db_path) -> None:
    """multilingual-e5 puts unrelated text near 0.8: at MiniLM's 0.55 every event would pass."""
    from crossmodalrag.memory.retrieve import EVENT_MIN_COSINES, event_min_cosine
    from tests.fakes import HashingEmbedder

    retriever = _retriever(memory, db_path, "event")
    semantic = retriever.base.semantic = semantic_for(memory, db_path)
    question = "Why was the LRU render cache dropped?"
    retriever.search(question)
    cosines = [node["components"]["cosine"] for node in retriever.matched_nodes]
    assert cosines and all(0.55 <= c < 0.8 for c in cosines)  # matched on the fake model's (MiniLM's) scale
    semantic.embedder.identity = HashingEmbedder(name="multilingual-e5-small").identity  # same vectors, e5's scale
    assert event_min_cosine(semantic) == EVENT_MIN_COSINES["multilingual-e5-small"] > 0.8
    retriever.search(question)
    assert retriever.matched_nodes == []  # below e5's value: about something else on that scale
    assert event_min_cosine(None) == event_min_cosine(SimpleNamespace(embedder=HashingEmbedder())) == 0.55


@pytest.mark.parametrize("match", ["all", "phrase"])
@pytest.mark.parametrize("level", ["event", "episode", "concept"])
def test_every_chunk_a_level_shows_obeys_match(store, db_path, level, match) -> None:
    """Only cache2's note says "staging": its node and the first cache note's share the other words, and
    --match all|phrase leaves the first note's chunks out at every level."""
    memory = store
    add_docs(store, _doc("cache", CACHE, 0), _doc("cache2", CACHE + " Staging followed.", 1))
    build(store, db_path, llm=PerSource("{}"))
    base = open_retriever(memory, Settings(db_path=db_path), 3, lexical_only=level != "concept")
    base.options = replace(base.options, match=match)
    if level == "concept":
        base.semantic = semantic_for(memory, db_path)
    retriever = at_level(base, level, Settings(db_path=db_path))
    answer = with_nodes(ask_without_llm(retriever, "content hash. Staging"), retriever)
    assert answer.evidence and {item.hit.source_uri for item in answer.evidence} == {"/work/cache2/n.md"}
    shown = {e["source_uri"] for node in answer.to_dict()["matched_nodes"] for e in node["evidence"]}
    assert shown <= {"/work/cache2/n.md"}


def test_the_event_level_keeps_the_per_source_cap(store, db_path) -> None:
    """Four events citing four sections of one note: the fused answer still shows at most the cap."""
    sections = "\n\n".join(f"## Part {i}\n\nThe LRU render cache part {i} was tuned." for i in range(5))
    add_docs(store, Document("/work/big/n.md", "note", "big", f"# big\n\n{sections}\n", "markdown",
                             timestamp=1_735_689_600.0, locator="big/n.md"))  # fmt: skip
    chunks = [row[0] for row in store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    assert len(chunks) >= 4
    statements = [event(f"The LRU render cache part {i} was tuned.", [i + 1]) for i in range(4)]
    build(store, db_path, llm=ScriptedExtractor(events_output(*statements)))
    base = open_retriever(store, Settings(db_path=db_path), 5, lexical_only=True)
    base.options = replace(base.options, max_chunks_per_source=2)
    retriever = at_level(base, "event", Settings(db_path=db_path))
    answer = ask_without_llm(retriever, "LRU render cache tuned")
    assert 0 < len(answer.evidence) <= 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Drop LRU render cache; memoize instead\n\nRemove quillmark/cache.py. Two problems.",
         "Drop LRU render cache; memoize instead"),
        ("Some suggestions for improvements: 1. Cache less. 2. Log more.",
         "Some suggestions for improvements: 1. Cache less."),
        ("# Decision\n\nWe dropped the cache.\nIt was stale.", "We dropped the cache."),
        ("The parser was slow and\nwe rewrote it. Then more.", "The parser was slow and we rewrote it."),
        ("- Priya will own the alerting service; Marcus keeps ingest\n- Jonas is on call",
         "Priya will own the alerting service; Marcus keeps ingest"),
        ("-18 °C was the low.", "-18 °C was the low."),
    ],
)  # fmt: skip
def test_a_template_answer_is_the_first_sentence_of_the_first_paragraph(text, expected) -> None:
    from crossmodalrag.memory.recall import first_sentence

    assert first_sentence(text) == expected


def test_a_template_question_does_not_name_its_answer() -> None:
    from crossmodalrag.memory.recall import template_card

    subject = "Switch primary keys from UUID to ULID"
    evidence = {"chunk_id": 1, "title": subject, "excerpt": subject}
    node = {"level": "event", "type": "change", "first_time": "2025-08-02T10:00:00+00:00",
            "project": "/work/falcon-repo", "evidence": [evidence]}  # fmt: skip
    card = template_card(node, subject + "\n")
    assert card["question"] == "What change is recorded in falcon-repo (2025-08-02)?" and card["answer"] == subject
    note = {**node, "evidence": [{**evidence, "title": "Database notes"}]}
    assert template_card(note)["question"] == "What change is recorded in Database notes (2025-08-02)?"


def test_an_event_and_the_episode_it_alone_makes_give_one_card(store, db_path) -> None:
    add_docs(store, _doc("cache", CACHE, 0))
    build(store, db_path, llm=PerSource("{}"))
    cards = recall_cards(store, "all", top=5)
    answers = [(card["answer"], card["cited"][0]["chunk_id"]) for card in cards]
    assert cards and len(answers) == len(set(answers))


def test_a_cached_template_card_is_made_again_so_template_fixes_show(memory) -> None:
    cards = recall_cards(memory, "event", top=2)
    memory.conn.execute("UPDATE memory_cards SET answer = 'an older template answer'")
    memory.conn.commit()
    assert recall_cards(memory, "event", top=2) == cards
    assert "an older template answer" not in {row[0] for row in memory.conn.execute("SELECT answer FROM memory_cards")}


def test_equal_forgetting_risks_put_the_longest_untouched_first(memory) -> None:
    """Years on, staleness is 1 for all three events, and (as for many nodes) importance too: the tie
    goes to the oldest (cache on day 0, xss on day 2, cache2 on day 40), not to the node id."""
    memory.conn.execute("UPDATE memory_nodes SET centrality = 0.5 WHERE level = 'event'")
    memory.conn.commit()
    items = forgetting(memory, "event", top=10, now=1_735_689_600.0 + 3000 * DAY)
    assert len({i["risk"] for i in items}) == 1
    assert [i["days_since_touched"] for i in items] == sorted((i["days_since_touched"] for i in items), reverse=True)


def test_events_of_a_source_named_as_other_commands_name_it(memory, monkeypatch) -> None:
    from crossmodalrag.memory.events import list_events

    source_id = memory.conn.execute("SELECT id FROM sources WHERE uri = '/work/cache/n.md'").fetchone()[0]
    full = list_events(memory, "/work/cache/n.md")
    assert full and all(e["source_uri"] == "/work/cache/n.md" for e in full)
    monkeypatch.chdir("/work")
    for given in (str(source_id), f"mem://source/{source_id}", "cache/n.md"):
        assert list_events(memory, given) == full


def test_drift_says_when_min_support_hides_its_concepts_and_shows_their_dates(memory, db_path, capsys) -> None:
    from crossmodalrag.cli.main import main

    db = ["--db-path", str(db_path)]
    assert main(["drift", "--min-support", "1", *db]) == 0
    shown = capsys.readouterr().out
    assert "2025-01-01 to 2025-02-10" in shown  # cache on day 0, cache2 on day 40 (the second window starts on day 30)
    assert main(["drift", "--min-support", "5", *db]) == 0
    assert "no drifting concept has at least 5 events: lower --min-support" in capsys.readouterr().err


def test_no_concepts_at_ask_level_names_the_real_cause(store, db_path) -> None:
    add_docs(store, _doc("cache", CACHE, 0))  # one event, with a vector: no two events to cluster
    build(store, db_path, llm=PerSource("{}"))
    base = open_retriever(store, Settings(db_path=db_path), 3, lexical_only=True)
    with pytest.raises(MemoryNotBuilt) as raised:
        at_level(base, "concept", Settings(db_path=db_path))
    assert "close enough in meaning" in raised.value.hint and "embeddings" not in raised.value.hint


def test_an_empty_build_does_not_say_to_run_the_level_it_just_ran(store, db_path) -> None:
    report = build(store, db_path)
    assert "--level event" not in report.levels["episode"]["skipped"]
    assert "--level event" in build(store, db_path, levels=("episode",)).levels["episode"]["skipped"]


DAILY = (
    "# 2026-10-14\n\nLong day. Started with the weekly planning call, which ran over by twenty minutes because\n"
    "the roadmap slides were not ready. After that I reviewed pull requests for the exporter all morning.\n"
    "In the afternoon I paired with Bo on the flaky integration tests; we fixed them with a per-worker\n"
    "temp dir. Went for a run along the canal at six, 8 km, legs heavy.\n"
)
DAILY_EVENTS = (
    "The weekly planning call ran over by twenty minutes.",
    "Bo and I fixed the flaky integration tests with a per-worker temp dir.",
    "Went for a run along the canal, 8 km.",
)


def test_the_events_of_one_long_note_each_get_their_own_card_and_excerpt(store, db_path) -> None:
    """A daily note is one chunk of many events: every template card answered with its first sentence
    ("Long day."), so repeats left one card, and every excerpt was the note's first 200 characters."""
    from crossmodalrag.memory.events import list_events

    add_docs(store, _doc("daily", DAILY, 0))
    build(store, db_path, llm=ScriptedExtractor(events_output(*(event(s, [1], "fact") for s in DAILY_EVENTS))))
    cards = recall_cards(store, "event", top=5, write=False)
    assert sorted(card["answer"] for card in cards) == [
        "In the afternoon I paired with Bo on the flaky integration tests; we fixed them with a per-worker temp dir.",
        "Started with the weekly planning call, which ran over by twenty minutes because the roadmap slides were"
        " not ready.",
        "Went for a run along the canal at six, 8 km, legs heavy.",
    ]
    excerpts = {e["statement"]: e["evidence"][0]["excerpt"] for e in list_events(store)}
    assert excerpts[DAILY_EVENTS[2]].startswith("… Went for a run along the canal")
    assert excerpts[DAILY_EVENTS[1]].startswith("… In the afternoon I paired with Bo")


def test_drift_after_a_build_says_what_would_show_it_not_to_build_again(store, db_path, capsys) -> None:
    """Running `mem build-memory` again, as the hint said, changed nothing: the concept's events were
    all in one window."""
    from crossmodalrag.cli.main import main

    add_docs(store, _doc("cache", CACHE, 0), _doc("cache2", CACHE + " Again.", 3))
    build(store, db_path, llm=PerSource("{}"))
    assert main(["drift", "--min-support", "1", "--db-path", str(db_path)]) == 0
    said = capsys.readouterr().err
    assert "the longest spans 3 days, a window 30" in said and "build-memory" not in said


def test_an_event_card_from_a_list_item_answers_without_its_bullet() -> None:
    from crossmodalrag.memory.recall import template_card

    body = "# Kickoff\n\n- Priya will own the alerting service.\n- Marcus keeps the ingest side."
    evidence = {"chunk_id": 1, "title": "Kickoff", "excerpt": body}
    node = {"level": "event", "type": "decision", "first_time": None, "project": "/notes",
            "statement": "Priya will own the alerting service.", "evidence": [evidence]}  # fmt: skip
    assert template_card(node, body)["answer"] == "Priya will own the alerting service."
