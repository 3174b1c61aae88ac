"""Multilingual retrieval through the real store and FTS5 index: CJK, accents, compounds, match modes,
the abstention gate's coverage per script, and byte offsets on evidence."""

from __future__ import annotations

import unicodedata

import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, is_weak, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.types import Evidence
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note


@pytest.fixture
def memory(store):
    add_docs(
        store,
        note(
            "parser-zh",
            "# 解析器重写\n解析器为什么要重写？因为正则表达式回溯太慢，我们在 parseConfig 里改用了分词器。",
            title="解析器重写",
        ),
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


@pytest.mark.parametrize("question", ["猫在哪里？", "猫はどこ？", "猫"])
def test_a_one_character_word_is_found_inside_a_question_and_at_the_end_of_a_run(store, question):
    add_docs(
        store,
        note("zh-cat", "# 周末\n我和小王去公园看了猫。"),
        note("ja-cat", "# 日記\n今日は雨でした。猫と一緒に家にいました。"),
        note("other", "# 会議\n来週の会議は東京本社で開かれます。"),
    )
    result = search(store, question, SearchOptions())
    assert set(uris(result)) == {"zh-cat", "ja-cat"} and not is_weak(result, SearchOptions())


def test_a_one_character_word_between_particles_is_a_term(store):
    add_docs(store, note("ja-rain", "# 日記\n今日は雨でした。"), note("other", "# 会議\n会議は東京本社で開かれます。"))
    result = search(store, "雨の日に何をした？", SearchOptions())
    assert uris(result)[0] == "ja-rain" and not is_weak(result, SearchOptions())


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


@pytest.mark.parametrize(
    ("written", "typed"),
    [
        ("Η συνάντηση έγινε στην Αθήνα.", "συναντηση Αθηνα"),  # Greek typed without its accents
        ("Η συναντηση εγινε στην Αθηνα.", "συνάντηση Αθήνα"),  # and written without them
        ("Встреча с Алёной прошла в Москве.", "Аленой"),  # ё typed as е
        ("Встреча с Аленой прошла в Москве.", "Алёной"),
    ],
)
def test_greek_and_cyrillic_find_the_note_typed_with_or_without_marks(store, written, typed):
    add_docs(store, note("marked", f"# Notes\n{written}"), note("other", "# Notes\nThe meeting was in Paris."))
    result = search(store, typed, SearchOptions())
    assert uris(result) == ["marked"] and not is_weak(result, SearchOptions())


def test_the_cyrillic_breve_is_a_letter_of_its_own(store):
    # Not мой/мои: forms of one word, which the Russian stem now joins; чаиник is чайник misspelt.
    add_docs(store, note("chainik", "# Заметка\nЭто чаиник."))
    assert uris(search(store, "чайник", SearchOptions())) == []  # й is not и


@pytest.mark.parametrize(
    "question",
    ["Wann ist mein Zahnarzttermin?", "¿Dónde dejé mis llaves?", "Où est mon passeport ?"],
)
def test_a_personal_question_about_nothing_stored_is_weak_in_german_spanish_and_french(store, question):
    """A possessive counted as a content word: "mein" matched a diary's "meinen", half the question
    covered, and a note about the cinema was the answer to a dentist appointment."""
    add_docs(
        store,
        note("de", "# Tagebuch\nAm Samstag war ich mit meinen Eltern im Kino."),
        note("es", "# Diario\nEl sábado fui al cine con mis padres y tu hermana."),
        note("fr", "# Journal\nSamedi, je suis allé au cinéma avec mon frère."),
    )
    assert is_weak(search(store, question, SearchOptions()), SearchOptions())


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
    semantic = semantic_index(memory, embedder, Settings(db_path=db_path))
    anything = search(memory, "rate limit retries", SearchOptions(top_k=8), semantic)
    assert len(anything.hits) > 2  # vectors bring in notes without the words
    for mode in ("all", "phrase"):
        query = "rate limit retries" if mode == "all" else "rate limit"
        result = search(memory, query, SearchOptions(match=mode), semantic)
        assert uris(result) == ["en"]


def test_evidence_in_another_script_is_not_refused_for_a_name_it_may_hold_transliterated(store, db_path):
    add_docs(store, note("ru", "# Отпуск\nАлёна забронировала гостиницу в Сочи на две недели."))
    embedder = HashingEmbedder()
    embed_missing(store, embedder)
    semantic = semantic_index(store, embedder, Settings(db_path=db_path))
    result = search(store, "Who is booking the hotel in Sochi?", SearchOptions(), semantic)
    assert uris(result) == ["ru"] and result.cross_language and result.unknown_names == []
    add_docs(store, note("en", "# Trip\nWe booked the hotel for two weeks."))
    english = search(store, "Who is booking the hotel in Sochi?", SearchOptions(), semantic)
    assert uris(english)[0] == "en" and english.unknown_names == ["Sochi"]  # the same script: checked


def test_a_vietnamese_word_typed_with_accents_is_covered_only_by_its_own_spelling(store):
    """Folded, táo ("apple") is tạo ("make"): an off-topic question covered 74% of a passage."""
    add_docs(store, note("make", "# Tài khoản\nQuy trình tạo tài khoản gồm ba bước."))
    accented = search(store, "Làm bánh táo", SearchOptions())
    assert uris(accented) == ["make"] and accented.coverage == 0.0  # still found, not covered
    assert search(store, "tạo tài khoản", SearchOptions()).coverage == 1.0
    assert search(store, "tao tai khoan", SearchOptions()).coverage == 1.0  # typed without accents: folds


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


@pytest.fixture
def spanish_and_vietnamese(store):
    add_docs(
        store,
        # Only Snowball conflates declaraciones/declaración and publicaron/publicó (Porter does not).
        note("es-gold", "# Prensa\nLas declaraciones del gobierno se publicaron en mayo, tras la reunión."),
        note("es-other", "# Ciudad\nEl gobierno de la ciudad cambió en mayo."),
        # The same four syllables, together (the handover process) and scattered in a shorter note.
        note("vi-together", "# Dự án\nTuần trước nhóm đã viết lại quy trình bàn giao cho toàn bộ dự án mới."),
        note("vi-scattered", "# Kho\nGiao bàn mới theo quy định, trình ký."),
        note("en", "# Rate limits\nThe client retries after a rate limit with exponential backoff."),
    )
    return store


def test_a_spanish_question_finds_other_forms_of_its_words_through_their_stems(spanish_and_vietnamese):
    question = "¿Cuándo publicó el gobierno su declaración?"
    result = search(spanish_and_vietnamese, question, SearchOptions())
    assert uris(result)[0] == "es-gold" and not is_weak(result, SearchOptions())
    # The stems also count as coverage for the gate: "publicó" and "declaración" are covered.
    assert result.coverage == 1.0


def test_vietnamese_syllables_that_stand_together_rank_first_accented_or_not(spanish_and_vietnamese):
    for question in ("quy trình bàn giao", "quy trinh ban giao", "Quy trình bàn giao là gì?"):
        assert uris(search(spanish_and_vietnamese, question, SearchOptions()))[0] == "vi-together", question
    # Pairs only add to the score in mode any; all still requires every word.
    assert set(uris(search(spanish_and_vietnamese, "quy trình bàn giao", SearchOptions(match="all")))) == {
        "vi-together",
        "vi-scattered",
    }


@pytest.mark.parametrize("question", ["гостиница", "гостиницы", "Где гостиница?"])
def test_a_russian_word_finds_and_covers_its_other_cases_through_its_stem(store, question):
    add_docs(
        store,
        note("ru", "# Отпуск\nАлёна забронировала гостиницу в Сочи на две недели."),
        note("en", "# Trip\nWe booked two hotels in Lisbon."),
    )
    result = search(store, question, SearchOptions())
    assert uris(result) == ["ru"] and not is_weak(result, SearchOptions())


def test_the_russian_stem_keeps_the_breve():
    from crossmodalrag.index.stems import stem_token

    assert stem_token("чайник", "en") == "zqчайник"  # й is not и
    assert stem_token("ёлку", "en") == stem_token("елка", "en")


def test_stem_and_pair_tokens_go_only_to_text_of_their_language():
    from crossmodalrag.index.fts import index_body

    english = index_body("The government published its statements in May, after the meeting.")
    spanish = index_body("Las declaraciones del gobierno se publicaron en mayo.")
    vietnamese = index_body("Quy trình bàn giao dự án gồm ba bước. Đội thủ")
    assert "zq" not in english and "zv" not in english
    assert "zqdeclar" in spanish.split() and "zv" not in spanish
    assert {"zvquytrinh", "zvbangiao", "zvdoithu"} <= set(vietnamese.split())
    assert "zvbuocdoi" not in vietnamese  # no pair across a sentence end


def test_unaccented_vietnamese_is_recognised_by_its_function_words():
    from crossmodalrag.index.fts import query_pairs
    from crossmodalrag.retrieval.stopwords import guess_language

    assert guess_language("quy trinh ban giao cua du an la gi".split()) == "vi"
    assert guess_language("que es la declaracion del gobierno".split()) == "es"
    assert "zvbangiao" in query_pairs("quy trinh ban giao")  # no function words: may be Vietnamese
    assert query_pairs("how does the rate limit work") == []  # English: no pairs


@pytest.fixture
def store(any_store):  # every test here runs on SQLite and on PostgreSQL (issue 16)
    return any_store


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_a_decomposed_query_finds_what_its_composed_form_finds(memory, form):
    # Text pasted from a macOS file name is decomposed: `\w` split "Gebäudekomplex" at the mark.
    query = unicodedata.normalize(form, "Gebäudekomplex fertiggestellt")
    result = search(memory, query, SearchOptions())
    assert uris(result) == ["de"] and result.coverage == 1.0
    phrase = unicodedata.normalize(form, "Der Gebäudekomplex wurde")
    assert uris(search(memory, phrase, SearchOptions(match="phrase"))) == ["de"]


def test_a_vietnamese_note_saved_decomposed_is_found_and_covered_by_a_typed_question(store):
    # A note saved by macOS (NFD) had no exact-form or pair tokens: an accented question covered 0%.
    text = "# Sao lưu\nĐã quyết định: chị Phạm Thị Hương phụ trách sao lưu dữ liệu."  # đ: read as Vietnamese
    add_docs(store, note("vi-nfd", unicodedata.normalize("NFD", text)), note("en", "# Backup\nNightly backup."))
    for question in ("Ai phụ trách sao lưu dữ liệu?", "Phạm Thị Hương", "Pham Thi Huong"):
        result = search(store, question, SearchOptions())
        assert uris(result)[0] == "vi-nfd" and result.coverage == 1.0, question


@pytest.fixture
def widths(store):
    add_docs(
        store,
        note("ja-wide", "# 移行メモ\nデータベースを ＰｏｓｔｇｒｅＳＱＬ に移行した。"),
        note("ja-half", "# ﾒﾓ\nﾃﾞｰﾀﾍﾞｰｽのﾊﾞｯｸｱｯﾌﾟは毎晩とる。"),
        note("en", "# DB notes\nWe moved the database to PostgreSQL last week."),
    )
    return store


@pytest.mark.parametrize("query", ["PostgreSQL", "ＰｏｓｔｇｒｅＳＱＬ", "postgresql"])
def test_full_width_latin_and_its_usual_spelling_find_each_other(widths, query):
    result = search(widths, query, SearchOptions())
    assert sorted(uris(result)) == ["en", "ja-wide"] and result.coverage == 1.0


@pytest.mark.parametrize("query", ["ﾃﾞｰﾀﾍﾞｰｽ", "データベース"])
def test_half_width_katakana_and_full_width_katakana_find_each_other(widths, query):
    assert sorted(uris(search(widths, query, SearchOptions()))) == ["ja-half", "ja-wide"]


def test_a_full_width_phrase_finds_the_note_as_typed(widths):
    result = search(widths, "データベースを ＰｏｓｔｇｒｅＳＱＬ", SearchOptions(match="phrase"))
    assert uris(result) == ["ja-wide"]


@pytest.mark.parametrize(
    ("written", "typed"),
    [
        ("ذَهَبَ الطَّالِبُ إِلَى الْمَدْرَسَةِ مُبَكِّرًا.", "المدرسة"),  # vocalised Arabic typed without harakat
        ("ذهب الطالب إلى المدرسة مبكرا.", "الْمَدْرَسَةِ"),  # and written without them
        ("הפגישה עם דָּנִי נדחתה ליום רביעי.", "דני"),  # Hebrew with niqqud typed without
        ("הפגישה עם דני נדחתה ליום רביעי.", "דָּנִי"),
    ],
)
def test_arabic_and_hebrew_find_the_note_typed_with_or_without_marks(store, written, typed):
    # FTS5 and Python's \w both split a word at each haraka or niqqud mark: only its folded form is whole.
    add_docs(store, note("marked", f"# Notes\n{written}"), note("other", "# Notes\nThe meeting was in Paris."))
    result = search(store, typed, SearchOptions())
    assert uris(result) == ["marked"] and not is_weak(result, SearchOptions())


@pytest.mark.parametrize(
    ("written", "typed"),
    [
        ("Die Wohnung liegt an der Bahnhofstraße 12.", "Bahnhofstrasse"),  # Swiss German always writes ss
        ("Die Straßenbahn fährt alle sieben Minuten.", "Strassenbahn"),
        ("Die Strassenbahn fährt alle sieben Minuten.", "Straßenbahn"),  # and the other way round
    ],
)
def test_sharp_s_and_ss_find_each_other(store, written, typed):
    add_docs(store, note("de", f"# Umzug\n{written}"), note("other", "# Notes\nThe meeting was in Paris."))
    result = search(store, typed, SearchOptions())
    assert uris(result) == ["de"] and not is_weak(result, SearchOptions())


@pytest.fixture
def thai_and_hindi(store):
    add_docs(
        store,
        note(
            "th",
            "# แผนการเดินทาง\nเราจะไปเชียงใหม่ในเดือนธันวาคม จองโรงแรมใกล้ประตูท่าแพแล้ว อยากไปดอยสุเทพและตลาดวโรรส",
        ),
        note("hi", "# बैठक के नोट्स\nअगले सप्ताह दिल्ली में परियोजना की समीक्षा होगी। राहुल बजट की रिपोर्ट तैयार करेगा।"),
        note("hi-lentils", "# खाना\nदाल"),
        note("hi-heart", "# कविता\nआज मेरा दिल बहुत खुश है और मैं गाना गा रहा हूँ।"),
        note("en", "# Trip\nWe booked a hotel near the old town gate."),
    )
    return store


@pytest.mark.parametrize("query", ["ดอยสุเทพ", "โรงแรม", "ตลาดวโรรส", "เชียงใหม่"])
def test_a_thai_word_inside_a_sentence_is_found(thai_and_hindi, query):
    # Thai has no spaces and FTS5 splits at its vowel signs and tone marks: runs are letter bigrams.
    result = search(thai_and_hindi, query, SearchOptions())
    assert uris(result) == ["th"] and result.coverage == 1.0
    assert uris(search(thai_and_hindi, query, SearchOptions(match="phrase"))) == ["th"]


@pytest.mark.parametrize("query", ["दिल्ली", "राहुल", "बजट की रिपोर्ट"])
def test_a_hindi_word_inside_a_sentence_is_found(thai_and_hindi, query):
    # FTS5 splits a Devanagari word at each vowel sign and virama (दिल्ली → द ल ल); \w did too.
    result = search(thai_and_hindi, query, SearchOptions())
    assert uris(result)[0] == "hi" and not is_weak(result, SearchOptions())


def test_a_hindi_word_ranks_the_note_with_its_own_vowels_first(thai_and_hindi):
    # दिल "heart" and दाल "lentils" are both द ल to FTS5: only the whole-word token tells them apart.
    assert uris(search(thai_and_hindi, "दिल", SearchOptions()))[0] == "hi-heart"


def test_a_lone_long_word_no_note_holds_matches_as_a_prefix(store):
    add_docs(
        store,
        note("de", "# Umzug\nDie Heizungsanlage ist neu."),
        note("en", "# Storage\nThe database runs nightly backups."),
        note("en-other", "# Pool\nThe databaseconnection pool is full."),
    )
    # A bare German noun has no function words to say German; the note has it inside a compound.
    result = search(store, "Heizung", SearchOptions())
    assert uris(result) == ["de"] and not is_weak(result, SearchOptions())
    # A word some note holds as it is matches exactly, as before: no identifier variants pulled in.
    assert uris(search(store, "database", SearchOptions())) == ["en"]
