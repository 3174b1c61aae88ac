"""Hybrid retrieval with a deterministic embedder: fusion, profiles, model identity, comparisons."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.cli.render import explain_line
from crossmodalrag.config import Settings, load_settings
from crossmodalrag.forget import find_sources, forget_sources
from crossmodalrag.index import embed as embed_module
from crossmodalrag.index.embeddings import embed_missing, vector_status
from crossmodalrag.index.models import OFFLINE_NAME
from crossmodalrag.retrieval import semantic as semantic_module
from crossmodalrag.retrieval.profiles import PROFILES
from crossmodalrag.retrieval.search import SearchOptions, is_weak, search
from crossmodalrag.retrieval.semantic import SemanticIndex, semantic_index
from crossmodalrag.store import open_configured_store, open_store
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

SYNONYMS = {"automobile": "car", "vehicle": "car", "purchase": "buy", "bought": "buy", "acquire": "buy"}


@pytest.fixture
def embedder():
    return HashingEmbedder(synonyms=SYNONYMS)


@pytest.fixture
def memory(store, embedder):
    add_docs(
        store,
        note("car", "# Car\nWe decided to buy a car in spring.", days=0),
        note("bike", "# Bike\nThe bike needs new brakes and tyres.", days=10),
        note("garden", "# Garden\nTomatoes grow well on the balcony.", days=20),
    )
    embed_missing(store, embedder)
    return store


def semantic(store, embedder, db_path) -> SemanticIndex:
    return semantic_index(store, embedder, Settings(db_path=db_path))


def test_a_paraphrase_with_no_shared_words_is_found_by_meaning(memory, embedder, db_path):
    query = "when did we acquire an automobile"
    assert search(memory, query, SearchOptions()).hits == []  # nothing lexical to go on
    result = search(memory, query, SearchOptions(), semantic(memory, embedder, db_path))
    assert result.hybrid and result.hits[0].source_uri == "/vault/car.md"
    assert result.similarity is not None and result.similarity > 0.4
    assert not is_weak(result, SearchOptions(min_similarity=0.4))
    assert is_weak(result, SearchOptions(min_similarity=0.9))  # the gate reads the similarity


def test_components_are_normalised_and_weights_sum_to_one(memory, embedder, db_path):
    result = search(memory, "buy car brakes", SearchOptions(top_k=3), semantic(memory, embedder, db_path))
    for hit in result.hits:
        assert {"vector", "lexical", "recency", "usage", "title", "cosine", "bm25"} <= set(hit.components)
        assert all(0.0 <= hit.components[name] <= 1.0 for name in ("vector", "lexical", "recency", "title"))
    assert max(h.components["vector"] for h in result.hits) == pytest.approx(1.0)
    for profile in PROFILES:
        assert sum(SearchOptions(profile=profile).weights(hybrid=True).values()) == pytest.approx(1.0)
    weights = SearchOptions().weights(hybrid=True)
    top = result.hits[0]
    assert top.score == pytest.approx(sum(weights[n] * top.components[n] for n in weights))


def test_the_recent_profile_lets_age_win_a_near_tie(store, embedder, db_path):
    add_docs(
        store,
        note("old", "# Old\nbrakes tyres service notes", days=0),
        note("new", "# New\nbrakes tyres service log", days=400),
        note("garden", "# Garden\ntomatoes on the balcony", days=10),
    )
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    options = SearchOptions(dedupe_threshold=0, title_boost_weight=0)
    recent = search(
        store, "brakes tyres service notes", SearchOptions(**{**options.__dict__, "profile": "recent"}), index
    )
    relevant = search(
        store, "brakes tyres service notes", SearchOptions(**{**options.__dict__, "profile": "relevant"}), index
    )
    assert recent.hits[0].source_uri == "/vault/new.md"
    assert relevant.hits[0].source_uri == "/vault/old.md"


def test_rrf_fusion_ranks_by_reciprocal_ranks(memory, embedder, db_path):
    result = search(memory, "buy car", SearchOptions(fusion="rrf"), semantic(memory, embedder, db_path))
    top = result.hits[0]
    assert top.source_uri == "/vault/car.md"
    assert top.score == pytest.approx(2 / 61)  # first in both rankings
    assert top.components["rrf"] == top.score


def test_long_chunks_are_embedded_in_pieces_that_cover_them(store, db_path):
    embedder = HashingEmbedder(window=5)
    words = " ".join(f"w{i}" for i in range(23)) + " zebra"
    add_docs(store, note("long", f"# Long\n{words}"))
    report = embed_missing(store, embedder)
    pieces = store.conn.execute("SELECT piece, pieces FROM chunk_vectors ORDER BY piece").fetchall()
    assert report.chunks == 1 and report.pieces == len(pieces) > 1
    assert all(count == len(pieces) for _, count in pieces)
    assert (
        "".join(embedder.split_to_window(store.conn.execute("SELECT text FROM chunks").fetchone()[0]))
        == store.conn.execute("SELECT text FROM chunks").fetchone()[0]
    )
    hit = search(store, "zebra", SearchOptions(), semantic(store, embedder, db_path)).hits[0]
    assert hit.components["cosine"] > 0.3  # the last piece, which holds "zebra", is the one that matched


def test_reindex_is_resumable_and_idempotent(store, embedder, monkeypatch):
    add_docs(store, *[note(f"n{i}", f"# N{i}\nnote number {i}") for i in range(20)])
    original = embedder.embed
    calls = {"n": 0}

    def flaky(texts):
        calls["n"] += 1
        if calls["n"] == 10:  # inside the second group of 8 single-chunk batches
            raise RuntimeError("killed mid-run")
        return original(texts)

    monkeypatch.setattr(embedder, "embed", flaky)
    with pytest.raises(RuntimeError):
        embed_missing(store, embedder, batch_size=1)
    assert vector_status(store, embedder.identity)["embedded"] == 8  # the first group was committed
    monkeypatch.setattr(embedder, "embed", original)
    assert embed_missing(store, embedder, batch_size=1).chunks == 12
    assert embed_missing(store, embedder, batch_size=1).chunks == 0
    assert vector_status(store, embedder.identity)["missing"] == 0


def test_chunks_forgotten_while_they_are_embedded_are_skipped_and_the_run_goes_on(store, embedder):
    add_docs(store, *[note(f"n{i}", f"# N{i}\nnote number {i}") for i in range(6)])
    original, calls = embedder.embed, {"n": 0}

    def forget_meanwhile(texts):  # another process forgets a note between the read and the write
        calls["n"] += 1
        if calls["n"] == 1:
            with open_configured_store(load_settings()) as other:
                forget_sources(other, find_sources(other, uri="/vault/n2.md"))
        return original(texts)

    embedder.embed = forget_meanwhile
    report = embed_missing(store, embedder)
    assert report.chunks == 5
    assert vector_status(store, embedder.identity) == {
        "chunks": 5,
        "embedded": 5,
        "missing": 0,
        "other_model_vectors": 0,
    }


def test_vectors_of_another_model_are_never_used(memory, embedder, db_path, monkeypatch):
    other = HashingEmbedder(name="fake/other-model")
    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)
    monkeypatch.setattr(embed_module, "load_embedder", lambda settings: other)
    retriever = open_retriever(memory, Settings(db_path=db_path))
    assert retriever.semantic is None
    assert any("another model" in n and "mem reindex-embeddings" in n for n in retriever.notices)
    embed_missing(memory, other)
    assert open_retriever(memory, Settings(db_path=db_path)).semantic is not None


def test_a_profile_without_vectors_says_so(store, db_path):
    add_docs(store, note("a", "text"))
    retriever = open_retriever(store, Settings(db_path=db_path), profile="recent")
    assert retriever.semantic is None and any("--profile recent needs vectors" in n for n in retriever.notices)


def test_near_duplicates_across_sources_are_removed_by_vector_similarity(store, embedder, db_path):
    add_docs(
        store,
        note("a", "we bought car", title="Purchase"),
        note("b", "we purchase automobile", title="Purchase"),  # same meaning, other words
        note("c", "# C\nbrakes"),
    )
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    deduped = search(store, "buy car", SearchOptions(dedupe_threshold=0.95), index)
    kept = [h.source_uri for h in deduped.hits]
    assert ("/vault/a.md" in kept) != ("/vault/b.md" in kept)
    assert {"/vault/a.md", "/vault/b.md"} <= {
        h.source_uri for h in search(store, "buy car", SearchOptions(dedupe_threshold=0), index).hits
    }


def test_near_duplicates_giving_other_values_are_both_kept(store, db_path):
    """MiniLM puts "gym on Monday" and "gym on Tuesday" 0.985 apart: the embedding cannot tell two
    visits from one said twice, their values can (retrieval/values.py)."""
    days = {"monday": "day", "tuesday": "day"}  # as close as the real model sees them
    embedder = HashingEmbedder(synonyms=days)
    add_docs(
        store,
        note("mon", "I went to the gym on Monday", title="Gym"),
        note("tue", "I went to the gym on Tuesday", title="Gym"),
        note("copy", "I went to the gym on Tuesday.", title="Gym"),
    )
    embed_missing(store, embedder)
    hits = search(
        store, "when did I go to the gym", SearchOptions(dedupe_threshold=0.95), semantic(store, embedder, db_path)
    ).hits
    kept = {h.source_uri.removeprefix("/vault/").removesuffix(".md") for h in hits}
    assert "mon" in kept and len(kept & {"tue", "copy"}) == 1  # the copy saying the same day still goes


def test_comparative_queries_reserve_slots_for_each_side(store, embedder, db_path):
    notes = [note(f"cache{i}", f"# Cache {i}\nthe cache cache cache detail {i}") for i in range(6)]
    add_docs(store, *notes, note("memo", "# Memo\nmemoization by content hash"))
    embed_missing(store, embedder)
    result = search(
        store, "difference between cache and memoization", SearchOptions(top_k=4), semantic(store, embedder, db_path)
    )
    assert result.comparison == {"sides": ["cache", "memoization"], "missing": []}
    assert "/vault/memo.md" in [h.source_uri for h in result.hits]
    assert {h.sub_query for h in result.hits} >= {"cache", "memoization"}


def test_a_comparison_side_without_evidence_is_reported(memory):
    from crossmodalrag.answer.evidence import render_evidence_answer
    from crossmodalrag.types import Evidence

    result = search(memory, "compare brakes with quasars", SearchOptions())
    assert result.comparison["missing"] == ["quasars"]
    assert all(h.sub_query != "quasars" for h in result.hits)
    whole = [replace(h, sub_query="compare brakes with quasars") for h in result.hits[:1]]  # the whole question's pass
    shown = render_evidence_answer([Evidence("E1", whole[0])], result.comparison)
    assert "[for: the whole question]" in shown and "No evidence found for: quasars" in shown  # not "both"


def test_the_index_sees_a_reembedded_chunk_even_when_counts_and_ids_repeat(store, embedder, db_path):
    """Re-chunking the newest source deletes and re-adds its vector: the stamp must still move."""
    add_docs(store, note("a", "# A\napples"), note("b", "# B\nbananas"))
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    assert search(store, "bananas", SearchOptions(), index).hits[0].components["cosine"] > 0.5
    add_docs(store, note("b", "# B\nblueberries"))  # same source, new text, same counts
    embed_missing(store, embedder)
    hit = search(store, "blueberries", SearchOptions(), index).hits[0]
    assert hit.source_uri == "/vault/b.md" and hit.components["cosine"] > 0.5


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    return any_store


FILLER = {
    "bread": "flour yeast salt and an oven",
    "bike": "the chain needs oil",
    "tax": "file the return by april",
    "music": "guitar lessons on tuesday",
}


def topic_notes(source_type: str = "note") -> list:
    """A question's words in one note; its topic, without its words, in another; one of its words
    in a third note about something else."""
    docs = [
        note("reef", "# Reef\ncoral reef bleaching from warm water temperature"),
        note("ocean", "# Ocean\nwarm water temperature harms coral polyps"),
        note("skin", "# Skin\nbleaching cream for dark skin spots"),
        *(note(name, f"# {name}\n{text}") for name, text in FILLER.items()),  # so that words have an idf
    ]
    return [replace(doc, source_type=source_type) for doc in docs]


def test_the_query_is_shifted_toward_its_best_hits_topic(store, embedder, db_path):
    """Rocchio feedback: the best hit's other words (coral, warm water) lift the note on the same
    topic above one that shares a question word by chance; the gate's cosine stays the question's."""
    add_docs(store, *topic_notes())
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    plain = search(store, "reef bleaching", SearchOptions(top_k=10, rocchio_hits=0, dedupe_threshold=0), index)
    shifted = search(store, "reef bleaching", SearchOptions(top_k=10, rocchio_hits=1, dedupe_threshold=0), index)
    order = [Path(h.source_uri).stem for h in plain.hits]
    assert order[0] == "reef" and order.index("skin") < order.index("ocean")
    assert [Path(h.source_uri).stem for h in shifted.hits][:2] == ["reef", "ocean"]
    asked = {h.chunk_id: h.components["cosine"] for h in plain.hits}
    assert all(h.components["cosine"] == pytest.approx(asked[h.chunk_id]) for h in shifted.hits)
    assert shifted.similarity == pytest.approx(plain.similarity)
    assert all("shifted_cosine" in h.components for h in shifted.hits)  # --explain shows what ranked
    assert not any("shifted_cosine" in h.components for h in plain.hits)


def test_no_shift_when_another_hit_is_much_closer_in_meaning_than_the_best(store, embedder, db_path, monkeypatch):
    """Best hits found by a common word alone (seven short "change N" commits, cosine 0.2) must not pull
    the query toward themselves while a hit 0.2 closer in meaning (the parser's note, 0.48) waits below."""
    from crossmodalrag.retrieval import search as search_module
    from crossmodalrag.types import Hit

    def hit(cosine: float):
        return Hit(1, "u", "note", "text", "t", "", "t\nbody", None, 0.5, {"cosine": cosine}, source_id=1)

    best = [hit(0.21), hit(0.215), hit(0.205)]
    assert search_module._meaning_disagrees([*best, hit(0.48)], best)
    assert not search_module._meaning_disagrees([*best, hit(0.35)], best)
    add_docs(store, *topic_notes())
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    monkeypatch.setattr(search_module, "SHIFT_GAP", -1.0)  # every first pass "disagrees": no shift at all
    options = SearchOptions(top_k=10, dedupe_threshold=0)
    plain = search(store, "reef bleaching", replace(options, rocchio_hits=0), index)
    kept = search(store, "reef bleaching", replace(options, rocchio_hits=1), index)
    assert [(h.chunk_id, h.score) for h in kept.hits] == [(h.chunk_id, h.score) for h in plain.hits]


def test_chat_turns_do_not_shift_the_query(store, embedder, db_path):
    """A turn or an agent memory is one statement, no picture of a topic: no feedback from it."""
    add_docs(store, *topic_notes("conversation"))
    embed_missing(store, embedder)
    index = semantic(store, embedder, db_path)
    plain = search(store, "reef bleaching", SearchOptions(rocchio_hits=0), index)
    shifted = search(store, "reef bleaching", SearchOptions(rocchio_hits=1), index)
    assert [(h.chunk_id, h.score) for h in shifted.hits] == [(h.chunk_id, h.score) for h in plain.hits]


def test_vectors_another_process_adds_are_searched(memory, embedder, db_path):
    """The index re-reads its stamp only when the database changed: a commit by another connection counts."""
    if getattr(memory, "backend", "sqlite") != "sqlite":
        pytest.skip("SQLite's in-process index (PostgreSQL's vectors stay on the server)")
    index = semantic(memory, embedder, db_path)
    assert all(h.source_uri != "/vault/kayak.md" for h in search(memory, "kayak paddle", SearchOptions(), index).hits)
    with open_store(db_path) as other:
        add_docs(other, note("kayak", "# Kayak\nA new kayak paddle for the lake."))
        embed_missing(other, embedder)
    hit = search(memory, "kayak paddle", SearchOptions(), index).hits[0]
    assert hit.source_uri == "/vault/kayak.md" and hit.components["cosine"] > 0.5


def test_connections_to_one_file_share_one_build_of_its_vectors(memory, embedder, db_path, monkeypatch):
    """The console answers from a pool of read-only connections: an index per connection read and built
    the vectors again each time another connection asked."""
    if getattr(memory, "backend", "sqlite") != "sqlite":
        pytest.skip("SQLite's in-process index (PostgreSQL's vectors stay on the server)")
    builds = []
    real = semantic_module._load_vectors
    monkeypatch.setattr(semantic_module, "_load_vectors", lambda *args: builds.append(1) or real(*args))
    with open_store(db_path) as first, open_store(db_path) as second:
        for conn in (first, second, first, second):
            assert search(conn, "bike brakes", SearchOptions(), semantic(conn, embedder, db_path)).hybrid
    assert len(builds) == 1
    add_docs(memory, note("kayak", "# Kayak\nA new kayak paddle for the lake."))
    embed_missing(memory, embedder)  # new vectors: the next search builds again, once
    with open_store(db_path) as third:
        hit = search(third, "kayak paddle", SearchOptions(), semantic(third, embedder, db_path)).hits[0]
    assert hit.source_uri == "/vault/kayak.md" and len(builds) == 2


def test_a_chunk_not_embedded_yet_is_ranked_by_its_words(store, embedder, db_path):
    """An interrupted embedding run: an exact match of a rare word scored 0 for meaning and sank
    below every embedded chunk; it is ranked as a search without vectors ranks it."""
    add_docs(store, *topic_notes())
    embed_missing(store, embedder)
    add_docs(store, note("late", "# Late\nthe zebracorn migration finished"))  # stored, never embedded
    index = semantic(store, embedder, db_path)
    found = search(store, "zebracorn", SearchOptions(top_k=5), index)
    assert Path(found.hits[0].source_uri).stem == "late" and found.coverage == 1.0


@pytest.mark.parametrize("named", [False, True])
def test_vectors_of_the_offline_model_not_beside_the_database_name_it(memory, db_path, monkeypatch, named):
    """A memory copied to another folder left its models behind: the notice named the default hub model
    (never used) as "not cached", not the offline model that made the stored vectors."""
    from crossmodalrag.index.models import OFFLINE_NAME, ModelUnavailable

    memory.conn.execute("UPDATE embedding_models SET name = ?", (OFFLINE_NAME,))

    def unavailable(settings):
        raise ModelUnavailable("embedding model BAAI/bge-small-en-v1.5 is not cached and the model hub is unreachable")

    monkeypatch.setattr(embed_module, "load_embedder", unavailable)
    settings = Settings(db_path=db_path, embed_model="BAAI/bge-small-en-v1.5" if named else None)
    notice = semantic_module.open_semantic(memory, settings).notice
    if named:  # a model asked for by name: its own error says why
        assert "bge-small-en-v1.5 is not cached" in notice
    else:
        assert f"made by {OFFLINE_NAME}" in notice and "mem models install --offline" in notice


@pytest.mark.parametrize("active", ["unavailable", "another"])
def test_vectors_of_an_installed_model_not_selected_name_the_setting_that_selects_it(
    memory, db_path, monkeypatch, active
):
    """multilingual-e5-small installed and embedded with, then CMRAG_EMBED_MODEL unset: the notice said
    to install the offline model or to embed every chunk again, not how to use the vectors stored."""
    from types import SimpleNamespace

    from crossmodalrag.index import models
    from crossmodalrag.index.models import ModelUnavailable

    memory.conn.execute("UPDATE embedding_models SET name = 'multilingual-e5-small'")
    monkeypatch.setattr(models, "installed_models", lambda settings: [SimpleNamespace(name="multilingual-e5-small")])
    monkeypatch.setattr(semantic_module, "embeddings_installed", lambda: True)

    def load(settings):
        if active == "unavailable":
            raise ModelUnavailable("embedding model BAAI/bge-small-en-v1.5 is not cached and the hub is unreachable")
        return HashingEmbedder(name="fake/other-model")

    monkeypatch.setattr(embed_module, "load_embedder", load)
    notice = semantic_module.open_semantic(memory, Settings(db_path=db_path)).notice
    assert "made by multilingual-e5-small" in notice and "set CMRAG_EMBED_MODEL=multilingual-e5-small" in notice
    assert "reindex-embeddings" not in notice


def test_a_note_holding_the_exact_code_asked_for_outranks_notes_holding_none_of_it(store, db_path):
    """The model reads an identifier as look-alike codes and unrelated words (here: the code hashes
    with "release"): notes holding no word of the question were closer in meaning than the one note
    holding it, ranked above it and pushed it out of the top 2, and the gate refused for want of
    its words. The best word match holding every word of the question ranks above them."""
    embedder = HashingEmbedder(synonyms={"zq4471x": "release"})
    add_docs(
        store,
        note(
            "ticket",
            "# Ticket\nThe crash in the importer, seen twice on Monday by the night shift while it loaded"
            " the big archive, is logged as zq4471x; a fix is pending review by the parser team.",
        ),
        note("plan", "# Plan\nrelease release notes for the release"),
        note("draft", "# Draft\nrelease checklist and release date"),
        *(note(name, f"# {name}\n{text}") for name, text in FILLER.items()),
    )
    embed_missing(store, embedder)
    options = SearchOptions(top_k=2, rocchio_hits=0, min_similarity_floor=0.99)
    found = search(store, "zq4471x", options, semantic(store, embedder, db_path))
    assert [Path(h.source_uri).stem for h in found.hits][0] == "ticket"
    assert found.hits[0].components["exact_floor"] > 0 and found.hits[0].score > found.hits[1].score
    assert found.coverage == 1.0 and not is_weak(found, options)
    # --explain says why the score is above its blend
    assert "raised above the chunks holding none" in explain_line(found.hits[0], options.weights(hybrid=True))


@pytest.mark.parametrize("model, found_first", [(OFFLINE_NAME, "meeting"), ("fake/multilingual", "weather")])
def test_an_english_models_vectors_do_not_rank_a_chinese_question(store, db_path, model, found_first):
    """MiniLM puts unrelated Chinese texts at cosines near 1 (here: the weather note hashes with the
    question); spread over the pool, that noise outweighed the note holding the question's words. A
    Chinese question is ranked by its words when the model is an English one, by both otherwise."""
    embedder = HashingEmbedder(synonyms={"服务器迁移定在哪天": "天", "今天天气很好": "天"}, name=model)
    add_docs(
        store,
        note("meeting", "# 会议\n最后决定：服务器迁移定在六月十五日晚上进行。"),
        note("weather", "# 日记\n今天天气很好"),
        *(note(name, f"# {name}\n{text}") for name, text in FILLER.items()),
    )
    embed_missing(store, embedder)
    found = search(store, "服务器迁移定在哪天", SearchOptions(top_k=2), semantic(store, embedder, db_path))
    assert Path(found.hits[0].source_uri).stem == found_first
    assert found.hybrid == (model != OFFLINE_NAME)


@pytest.mark.parametrize(
    "question, read",
    [
        ("服务器迁移定在哪天？", False),
        ("Who handles the 回滚方案?", False),  # Chinese words inside an English question
        ("Wann ist die Migration?", True),
        ("When did I meet 王?", True),  # one character: no word for the index either
        ("Who handles the rollback plan?", True),
    ],
)
def test_an_english_model_reads_no_question_holding_chinese_or_japanese_words(question, read):
    from crossmodalrag.retrieval.languages import model_reads

    assert model_reads(OFFLINE_NAME, question) is read
    assert model_reads("intfloat/multilingual-e5-small", question)
