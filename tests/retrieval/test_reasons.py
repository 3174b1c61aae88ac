"""A why-question finds the reasons its best note gives in a section of their own (retrieval/reasons.py)."""

from __future__ import annotations

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.ingest import ingest_notes
from crossmodalrag.retrieval.reasons import REASON_FACTOR, asks_why
from tests.conftest import write_note

DECISION = """# Parser decision

We moved the parser from regular expressions to a PEG grammar. Ana proposed the move in the review.

## Reasons
- The old approach could not handle nesting.
- Error messages pointed at the wrong line.
"""
OTHERS = {
    "benchmarks.md": "# Parser benchmarks\n\nThe PEG grammar parser runs at 40 MB/s after the move.\n",
    "grammar.md": "# Grammar notes\n\nWe moved the PEG grammar of the parser to its own file.\n",
    "tests.md": "# Parser tests\n\nWe moved the parser tests next to the grammar.\n",
}


@pytest.mark.parametrize(
    "question, why",
    [
        ("Why did we move the parser?", True),
        ("And why was that?", True),
        ("What were the reasons for the move?", True),
        ("Warum haben wir den Parser umgestellt?", True),
        ("Почему перенесли запуск приложения?", True),
        ("Tại sao chúng ta chuyển sang PostgreSQL?", True),
        ("我们为什么把订单服务迁移到PostgreSQL？", True),  # the why-word follows the subject
        ("PostgreSQLに移行したのはなぜですか？", True),
        ("谁负责迁移？", False),
        ("Who moved the parser?", False),
        ("Explain why the parser moved", False),  # not a question that opens with why: left as it ranks
    ],
)
def test_a_why_question_is_told_by_its_first_word(question, why):
    assert asks_why(question) is why


def test_a_why_question_finds_the_reasons_section_of_its_best_note(store, settings, tmp_path):
    """The `## Reasons` section shares only the note's title with the question, and as the note's second
    chunk ranked at 0.8 of its score: below three other notes that say the parser moved."""
    write_note(tmp_path / "vault", "decision.md", DECISION)
    for name, text in OTHERS.items():
        write_note(tmp_path / "vault", name, text)
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 3, lexical_only=True)
    hits = retriever.search("Why did we move the parser from regular expressions to a PEG grammar?").hits
    assert hits[0].title == "Parser decision"
    reasons = [h for h in hits if h.locator.endswith("#Reasons")]
    assert reasons and reasons[0].components["reason_factor"] == REASON_FACTOR
    assert "repeat_factor" not in reasons[0].components
    # Asked what was done, the note's further section keeps its discount and stays out
    plain = retriever.search("Who moved the parser from regular expressions to a PEG grammar?").hits
    assert not [h for h in plain if h.locator.endswith("#Reasons")]


@pytest.mark.parametrize(
    "question, note",
    [
        (
            "Warum ersetzen wir die Ölheizung?",
            "# Ölheizung\n\n## Entscheidung\nWir ersetzen die Ölheizung.\n\n## Gründe\nÖl ist teuer.\n",
        ),
        (
            "¿Por qué abrimos una oficina?",
            "# Oficina\n\n## Decisión\nAbrimos una oficina.\n\n## Razones\nLas ventas crecieron.\n",
        ),
        (
            "Почему перенесли запуск?",
            "# Запуск\n\n## Решение\nПеренесли запуск.\n\n## Причины\nТесты заняли больше времени.\n",
        ),
        ("为什么迁移订单服务？", "# 订单服务\n\n## 决定\n我们迁移订单服务。\n\n## 原因\nJSONB更适合元数据。\n"),
    ],
)
def test_a_reasons_section_is_lifted_in_other_languages(store, settings, tmp_path, question, note):
    # In German "## Gründe" ranked below an unrelated Spanish note, ×0.8 as its note's second chunk.
    # Found by its breadcrumb (the title shares a word with the question), as `## Reasons` is above.
    write_note(tmp_path / "vault", "decision.md", note)
    write_note(tmp_path / "vault", "other.md", "# Other\n\nNothing related at all.\n")
    ingest_notes(store, [tmp_path / "vault"])
    hits = open_retriever(store, settings, 3, lexical_only=True).search(question).hits
    assert len(hits) >= 2 and hits[1].components.get("reason_factor") == REASON_FACTOR, [h.locator for h in hits]


def test_explain_says_why_a_reasons_section_was_lifted(store, settings, tmp_path):
    from crossmodalrag.cli.render import explain_line

    write_note(tmp_path / "vault", "decision.md", DECISION)
    ingest_notes(store, [tmp_path / "vault"])
    retriever = open_retriever(store, settings, 3, lexical_only=True)
    hits = retriever.search("Why did we move the parser from regular expressions to a PEG grammar?").hits
    reasons = next(h for h in hits if h.locator.endswith("#Reasons"))
    assert "as the best note's section giving reasons" in explain_line(reasons, retriever.options.weights(False))


def test_the_query_shift_learns_from_the_ranking_before_the_lift(store, db_path, tmp_path, monkeypatch):
    """The README's "Why did I change the parser?" lost its note's summary from the evidence: the lift
    ordered the first pass, whose best hits the query is shifted toward (search._shifted_query)."""
    from crossmodalrag.config import Settings
    from crossmodalrag.index.embeddings import embed_missing
    from crossmodalrag.retrieval import search as search_module
    from crossmodalrag.retrieval.semantic import semantic_index
    from tests.fakes import HashingEmbedder

    write_note(tmp_path / "vault", "decision.md", DECISION)
    for name, text in OTHERS.items():
        write_note(tmp_path / "vault", name, text)
    ingest_notes(store, [tmp_path / "vault"])
    embedder = HashingEmbedder()
    embed_missing(store, embedder)
    fed_back = []
    shift = search_module._shifted_query

    def recorded(known, vector, hits, options):
        fed_back.append(hits)
        return shift(known, vector, hits, options)

    monkeypatch.setattr(search_module, "_shifted_query", recorded)
    question = "Why did we move the parser from regular expressions to a PEG grammar?"
    options = search_module.SearchOptions(top_k=5)
    result = search_module.search(store, question, options, semantic_index(store, embedder, Settings(db_path=db_path)))
    assert fed_back and not any("reason_factor" in hit.components for hit in fed_back[0])
    assert any("reason_factor" in hit.components for hit in result.hits)  # what is shown is lifted
