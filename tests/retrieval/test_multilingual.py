"""Multilingual retrieval through the real store and FTS5 index: CJK, accents, compounds, match modes,
the abstention gate's coverage per script, and byte offsets on evidence."""

from __future__ import annotations

import pytest

from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, is_weak, search
from crossmodalrag.retrieval.semantic import SemanticIndex
from crossmodalrag.config import Settings
from crossmodalrag.types import Evidence
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note


@pytest.fixture
def memory(store):
    add_docs(
        store,
        note("parser-zh", "# 解析器重写\n解析器为什么要重写？因为正则表达式回溯太慢，我们在 parseConfig 里改用了分词器。", title="解析器重写"),
        note("cache-zh", "# 缓存\n渲染缓存在配置变更后返回了过期的页面。"),
        note("ja", "# 東京の会議\n来週の会議は東京本社で開かれます。議題は予算の見直しです。"),
        note("vi-handover", "# Bàn giao\nQuy trình bàn giao dự án gồm ba bước."),
        note("vi-sale", "# Bán hàng\nQuy trình bán hàng gồm hai bước."),
        note("de", "# Bau\nDer Gebäudekomplex wurde 1912 fertiggestellt."),
        note("en", "# Rate limits\nThe client retries after a rate limit with exponential backoff."),
        note("en-other", "# Limits\nA limit on the rate of writes keeps the disk healthy."),
    )
    return store


def uris(result) -> list[str]:
    return [hit.source_uri.removeprefix("/vault/").removesuffix(".md") for hit in result.hits]


def test_a_chinese_question_finds_the_chinese_note_and_is_not_weak(memory):
    result = search(memory, "解析器为什么要重写？", SearchOptions())
    assert uris(result)[0] == "parser-zh"
    assert result.coverage >= 0.5 and not is_weak(result, SearchOptions())


def test_a_two_character_chinese_word_is_a_term(memory):
    result = search(memory, "缓存", SearchOptions())
    assert uris(result) == ["cache-zh"] and result.coverage == 1.0


def test_english_identifiers_inside_chinese_prose_match_both_ways(memory):
    assert uris(search(memory, "parse config", SearchOptions()))[0] == "parser-zh"
    assert uris(search(memory, "parseConfig 分词器", SearchOptions()))[0] == "parser-zh"


def test_japanese_kanji_and_kana_are_found(memory):
    result = search(memory, "会議はどこで開かれますか", SearchOptions())
    assert uris(result)[0] == "ja" and not is_weak(result, SearchOptions())


def test_a_cjk_title_gets_the_title_boost(memory):
    hit = search(memory, "解析器", SearchOptions()).hits[0]
    assert hit.components["title"] > 0


def test_unaccented_vietnamese_finds_the_accented_note(memory):
    assert uris(search(memory, "quy trinh ban giao", SearchOptions()))[0] == "vi-handover"


def test_a_query_typed_with_accents_prefers_the_exact_spelling(memory):
    # "bàn" (table/discuss) and "bán" (sell) fold to the same "ban": the accents decide.
    assert uris(search(memory, "quy trình bán", SearchOptions()))[0] == "vi-sale"
    assert uris(search(memory, "quy trình bàn", SearchOptions()))[0] == "vi-handover"


def test_a_long_german_word_matches_compounds_it_starts(memory):
    result = search(memory, "Wann wurde das Gebäude fertig?", SearchOptions())
    assert uris(result)[0] == "de" and not is_weak(result, SearchOptions())


def test_match_all_requires_every_term_and_phrase_the_exact_order(memory):
    assert set(uris(search(memory, "rate limit retries", SearchOptions(match="any")))) == {"en", "en-other"}
    assert uris(search(memory, "rate limit retries", SearchOptions(match="all"))) == ["en"]
    assert uris(search(memory, "rate limit", SearchOptions(match="phrase"))) == ["en"]
    assert search(memory, "limit rate", SearchOptions(match="phrase")).hits == []
    assert uris(search(memory, "正则表达式", SearchOptions(match="phrase"))) == ["parser-zh"]
    assert search(memory, "正则式表达", SearchOptions(match="phrase")).hits == []


def test_match_all_and_phrase_filter_vector_candidates_too(memory, db_path):
    embedder = HashingEmbedder()
    embed_missing(memory, embedder)
    semantic = SemanticIndex(memory, embedder, Settings(db_path=db_path))
    anything = search(memory, "rate limit retries", SearchOptions(top_k=8), semantic)
    assert len(anything.hits) > 2  # vectors bring in notes without the words
    for mode in ("all", "phrase"):
        result = search(memory, "rate limit retries" if mode == "all" else "rate limit", SearchOptions(match=mode), semantic)
        assert uris(result) == ["en"]


def test_evidence_carries_character_and_utf8_byte_offsets(memory):
    hit = search(memory, "缓存", SearchOptions()).hits[0]
    shown = Evidence("E1", hit).to_dict()
    text = "# 缓存\n渲染缓存在配置变更后返回了过期的页面。"
    body = text[shown["char_start"] : shown["char_end"]]
    assert body and body in hit.text
    assert text.encode()[shown["byte_start"] : shown["byte_end"]].decode() == body


def test_only_vietnamese_notes_carry_exact_forms(store):
    from crossmodalrag.index.fts import index_body

    assert "zx" not in index_body("El café está en la ciudad de Bogotá.")
    assert "zx" in index_body("Quy trình bàn giao dự án gồm ba bước.")
