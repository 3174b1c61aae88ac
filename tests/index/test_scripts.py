"""Text preparation for many scripts: CJK bigrams and exact-form tokens, checked against FTS5 itself."""

from __future__ import annotations

import sqlite3
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from crossmodalrag.index.scripts import (
    EXACT_ALPHABET,
    EXACT_MARK,
    bigrams,
    compatibility_forms,
    exact_token,
    folded_form,
    folded_forms,
    lone_characters,
    segment_cjk,
)


def test_cjk_runs_become_overlapping_bigrams_and_other_text_stays():
    assert bigrams("解析器") == ["解析", "析器"] and bigrams("猫") == ["猫"]
    assert segment_cjk("用parseConfig解析器").split() == ["用", "parseConfig", "解析", "析器"]
    assert segment_cjk("東京で会議").split() == ["東京", "京で", "で会", "会議"]
    assert segment_cjk("plain text") == "plain text"
    assert segment_cjk("看了猫。", last_alone=True).split() == ["看了", "了猫", "猫", "。"]


def test_lone_characters_are_han_words_between_particles_question_words_or_run_edges():
    assert lone_characters("猫在哪里？") == ["猫"] and lone_characters("猫はどこ？") == ["猫"]
    assert lone_characters("雨の日に何をした？") == ["雨", "日"]
    assert lone_characters("东京在哪里") == [] and lone_characters("解析器为什么要重写") == []
    assert lone_characters("猫") == []  # a one-character run is already a term of its own


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12))
def test_an_exact_token_survives_the_index_tokenizer_unchanged_and_is_reversible(word):
    token = exact_token(word)
    if token is None:
        return
    assert token.startswith(EXACT_MARK) and set(token[2:]) <= set(EXACT_ALPHABET)
    letters = token[2:]
    decoded = bytes(
        EXACT_ALPHABET.index(letters[i]) * 16 + EXACT_ALPHABET.index(letters[i + 1]) for i in range(0, len(letters), 2)
    )
    assert decoded.decode("utf-8") == unicodedata.normalize("NFC", word.lower())
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(b, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, row)")
    conn.execute("INSERT INTO t (b) VALUES (?)", (token,))
    assert [r[0] for r in conn.execute("SELECT term FROM v")] == [token]


def test_words_that_folding_would_not_change_have_no_exact_token():
    assert exact_token("giao") is None and exact_token("解析") is None
    assert exact_token("bàn") != exact_token("bán")


def test_marked_greek_cyrillic_hebrew_and_arabic_words_fold_and_others_do_not():
    assert folded_form("Αθήνα") == "αθηνα" and folded_form("Ἀθῆναι") == "αθηναι"
    assert folded_form("Алёна") == "алена" and folded_form("мой") is None  # the breve stays
    assert folded_form("שָׁלוֹם") == "שלום" and folded_form("كَتَبَ") == "كتب"
    assert folded_form("café") is None and folded_form("bàn") is None  # Latin: unicode61 folds it itself
    assert folded_form("Αθηνα") is None and folded_form("नमस्ते") is None  # nothing to fold; Devanagari kept
    decomposed = unicodedata.normalize("NFD", "Ο Αθήνα και η Αθήνα")
    assert folded_forms(decomposed) == ["αθηνα"] and folded_forms("plain text") == []


def test_compatibility_forms_are_the_nfkc_forms_of_full_width_and_half_width_words():
    assert compatibility_forms("データベースを ＰｏｓｔｇｒｅＳＱＬ に移行") == ["PostgreSQL"]
    assert compatibility_forms("ﾃﾞｰﾀﾍﾞｰｽ") == ["デー ータ タベ ベー ース"]
    # Decomposed text is read composed (FTS5 folds it alike): nothing to add, as for plain text.
    assert compatibility_forms(unicodedata.normalize("NFD", "Geschäftsreise nach München")) == []
    assert compatibility_forms("plain ASCII") == []
