"""An excerpt starts where the query's words are (retrieval/snippets.py)."""

from __future__ import annotations

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.snippets import focus
from crossmodalrag.types import excerpt, flat_body
from tests.conftest import write_note

FILLER = "The weekly review covered the budget, the roadmap and the hiring plan. " * 8


def test_the_excerpt_shows_the_match_at_the_end_of_a_long_chunk(store, settings, tmp_path):
    write_note(tmp_path / "v", "trip.md", f"# Trip\n\n{FILLER}Then we bought a hippogriff saddle in Tromsø.\n")
    ingest_notes(store, [tmp_path / "v"])
    answer = ask_without_llm(
        open_retriever(store, settings, lexical_only=True), "Where did we buy the hippogriff saddle?"
    )
    shown = answer.to_dict()["evidence"][0]["excerpt"]
    assert shown.startswith("… ") and "hippogriff saddle in Tromsø." in shown and len(shown) <= 284


def test_the_top_is_kept_when_it_shows_as_many_words_and_accents_and_forms_fold():
    body = flat_body(f"crumb\nRotation of the staging key: monthly. {FILLER}")
    assert focus(body, "how often does the staging key rotate?", 280) == 0
    far = flat_body(f"crumb\n{FILLER}Le café a fermé.")
    assert excerpt(f"crumb\n{FILLER}Le café a fermé.", start=focus(far, "cafe ferme", 280)).endswith("Le café a fermé.")
    assert focus(far, "the and of", 280) == 0  # function words point nowhere


ZH_FILLER = "今天上午团队讨论了季度计划和预算安排，大家对进度表示满意。" * 12


def test_a_chinese_excerpt_past_the_top_shows_its_text_not_an_empty_cut(store, settings, tmp_path):
    # Chinese has no spaces: cutting at the last space kept only the leading "…" ("… …").
    write_note(tmp_path / "v", "会议.md", f"# 周会纪要\n\n{ZH_FILLER}最后决定：服务器迁移定在六月十五日晚上进行。\n")
    ingest_notes(store, [tmp_path / "v"])
    answer = ask_without_llm(open_retriever(store, settings, lexical_only=True), "服务器迁移定在哪天？")
    shown = answer.to_dict()["evidence"][0]["excerpt"]
    assert shown.startswith("… ") and "服务器迁移定在" in shown and len(shown) <= 284


def test_an_unspaced_excerpt_begins_after_a_near_clause_end_and_ends_at_a_character():
    text = f"crumb\n{ZH_FILLER}"
    shown = excerpt(text, limit=40, start=25)
    assert shown == "… 今天上午团队讨论了季度计划和预算安排，大家对进度表示满意。今天上午团队讨论了 …"
    assert excerpt("crumb\nサーバー移行 Grafana port 3000 です", limit=20) == "サーバー移行 Grafana port …"


def test_a_chinese_excerpt_shows_the_sentence_its_question_asks_about_whole():
    """Counted one by one, 天 of 哪天 matched every 今天 above the answer, and the window holding the
    most characters began there and cut the answer off; character pairs match as the index does."""
    body = flat_body(
        "今天上午团队讨论了季度计划和预算安排，大家对进度表示满意。" * 12
        + "最后决定：服务器迁移定在六月十五日晚上进行，由王小明负责回滚方案。"
    )
    shown = excerpt(body, 280, focus(body, "服务器迁移定在哪天？", 280))
    assert "服务器迁移定在六月十五日晚上进行，由王小明负责回滚方案" in shown
