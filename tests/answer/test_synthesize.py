"""`ask_with_llm` with a scripted model: the gate, streaming, citations, abstention and fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.answer.llm import LLMError, LLMUnavailable
from crossmodalrag.answer.synthesize import MarkerGuard, ask_with_llm
from crossmodalrag.config import Settings
from crossmodalrag.ingest import ingest_notes
from tests.conftest import write_note
from tests.fakes import ScriptedLLM

QUESTION = "Why did I rewrite the tokenizer?"


@pytest.fixture
def retriever(store, settings: Settings, tmp_path: Path):
    vault = tmp_path / "vault"
    write_note(vault, "tokenizer.md", "# Tokenizer rewrite\n\nI rewrote the tokenizer because regexes backtracked.\n")
    write_note(vault, "garden.md", "# Garden\n\nThe tomatoes need water every morning in July.\n")
    ingest_notes(store, [vault])
    return open_retriever(store, settings, lexical_only=True)


def test_a_cited_answer_streams_and_resolves_its_citations(retriever, settings: Settings) -> None:
    llm = ScriptedLLM("The regexes backtracked, so I rewrote the tokenizer [E1].")
    streamed: list[str] = []
    answer = ask_with_llm(retriever, QUESTION, settings, streamed.append, llm=llm)
    assert answer.mode == "llm" and not answer.abstained
    assert "".join(streamed) == answer.text == "The regexes backtracked, so I rewrote the tokenizer [E1]."
    assert len(streamed) > 3  # it arrived in pieces
    assert [c["id"] for c in answer.citations] == ["E1"]
    assert answer.citations[0]["source_uri"].endswith("tokenizer.md")
    assert answer.llm == {"provider": "fake", "model": "scripted"}
    assert {"retrieval_seconds", "first_token_seconds", "generation_seconds", "total_seconds"} <= set(answer.timing)
    data = answer.to_dict()
    assert data["citation_warnings"] == [] and data["abstention_reason"] is None


def test_an_answer_that_writes_out_its_instructions_falls_back_to_the_evidence(retriever, settings: Settings) -> None:
    echo = "Answer: line first, then the support, each with its [E#] citations; or reply INSUFFICIENT_EVIDENCE"
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM(echo))
    assert answer.mode == "evidence" and not answer.abstained, "an echo of the prompt is no refusal"
    assert "instructions instead of an answer" in answer.notices[0] and answer.evidence


def test_weak_retrieval_abstains_without_calling_the_model(retriever, settings: Settings) -> None:
    llm = ScriptedLLM("should never be asked")
    answer = ask_with_llm(retriever, "What is the capital of France?", settings, llm=llm)
    assert answer.abstained and answer.abstention_reason == "weak_retrieval"
    assert llm.calls == []


def test_the_model_judging_evidence_irrelevant_abstains_and_the_marker_never_streams(
    retriever, settings: Settings
) -> None:
    streamed: list[str] = []
    answer = ask_with_llm(retriever, QUESTION, settings, streamed.append, llm=ScriptedLLM("INSUFFICIENT_EVIDENCE"))
    assert answer.abstained and answer.abstention_reason == "llm_insufficient"
    assert streamed == [] and answer.citations == []
    assert answer.evidence  # what was retrieved is still shown


def test_a_refusal_in_other_words_also_abstains(retriever, settings: Settings) -> None:
    llm = ScriptedLLM("The provided evidence does not mention why the tokenizer was rewritten.")
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.abstention_reason == "llm_insufficient"


def test_invented_citations_are_removed_from_the_answer(retriever, settings: Settings) -> None:
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("Regexes backtracked [E1][E4]."))
    assert answer.text == "Regexes backtracked [E1]."
    assert [w["citation"] for w in answer.citation_warnings] == ["[E4]"]


STATEMENT = "I rewrote the tokenizer because regexes backtracked."


@pytest.mark.parametrize(
    ("text", "margins", "withheld"),
    [
        ("INSUFFICIENT_EVIDENCE", [], "llm_insufficient"),  # the marker
        ("Answer: Yes [E1]", [-9.0], "llm_insufficient"),  # the gate
        ("Answer: Yes [E1]", [5.0, -9.0], "unsupported"),  # the sentence check
    ],
)
def test_a_statement_the_model_cannot_settle_shows_its_evidence_not_an_abstention(
    retriever, settings: Settings, text, margins, withheld
) -> None:
    """A claim whose evidence retrieval found is never "no answer" because the model gave no
    verdict: the evidence answer, saying the verdict is not settled and which check withheld it."""
    answer = ask_with_llm(retriever, STATEMENT, settings, llm=ScriptedLLM(text, margins=list(margins)))
    assert not answer.abstained and answer.abstention_reason is None and answer.mode == "evidence"
    assert answer.text.startswith("Not settled: ") and "[E1] Tokenizer rewrite" in answer.text
    assert answer.verification["withheld"] == withheld and answer.llm == {"provider": "fake", "model": "scripted"}
    assert [c["id"] for c in answer.citations] == ["E1"] and answer.short_answer is None
    # the same words asked as a question, the model's "no" stays an abstention
    asked = "Did I rewrite the tokenizer because regexes backtracked?"
    question = ask_with_llm(retriever, asked, settings, llm=ScriptedLLM(text, margins=list(margins)))
    assert question.abstained and question.abstention_reason == withheld


def test_a_statement_the_model_settles_is_answered_as_usual(retriever, settings: Settings) -> None:
    answer = ask_with_llm(retriever, STATEMENT, settings, llm=ScriptedLLM("Answer: Yes [E1]"))
    assert answer.mode == "llm" and answer.short_answer == "Yes" and "withheld" not in answer.verification


@pytest.mark.parametrize("failure", [LLMUnavailable("cannot connect"), LLMError("server said 500")])
def test_a_failing_model_falls_back_to_the_evidence_answer(retriever, settings: Settings, failure) -> None:
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("x", fail=failure))
    assert answer.mode == "evidence" and not answer.abstained
    assert answer.text.startswith("Found ") and "[E1]" in answer.text
    assert len(answer.notices) == 1 and "showing the evidence answer" in answer.notices[0]


def test_a_model_failing_mid_answer_says_so(retriever, settings: Settings) -> None:
    llm = ScriptedLLM("Regexes backtracked badly [E1].", fail=LLMError("connection reset"), fail_after=2)
    answer = ask_with_llm(retriever, QUESTION, settings, llm=llm)
    assert answer.mode == "evidence" and "mid-answer" in answer.notices[0]


def test_no_configured_model_falls_back_with_a_notice(retriever, settings: Settings, monkeypatch) -> None:
    settings.llm_provider = "none"
    answer = ask_with_llm(retriever, QUESTION, settings)
    assert answer.mode == "evidence" and "no language model" in answer.notices[0]


def test_debug_keeps_the_prompt_and_raw_output(retriever, settings: Settings) -> None:
    answer = ask_with_llm(retriever, QUESTION, settings, llm=ScriptedLLM("Regexes [E1]."), debug=True)
    assert answer.debug["raw_output"] == "Regexes [E1]."
    assert answer.debug["prompt"][1]["content"].count("[E1]") >= 1
    assert answer.debug["retrieval"]["hits"]


def test_the_marker_guard_holds_back_only_a_leading_marker() -> None:
    out: list[str] = []
    guard = MarkerGuard(out.append)
    for piece in ["INSUFF", "ICIENT", "_EVIDENCE"]:
        guard.feed(piece)
    assert out == []
    out.clear()
    guard = MarkerGuard(out.append)
    for piece in ["In", "sulin ", "is ", "mentioned [E1]."]:
        guard.feed(piece)
    assert "".join(out) == "Insulin is mentioned [E1]."


def test_a_follow_up_with_the_same_best_excerpt_keeps_the_last_prompts_order(
    store, settings: Settings, tmp_path: Path
) -> None:
    """In a chat the model stays loaded with the last prompt in its KV cache: a follow-up whose best
    excerpt opened the last prompt gets the excerpts the last prompt had in its order, numbered anew,
    so its prompt opens like the last one (llama.cpp reads only what follows); citations resolve to
    the new numbering. A follow-up with another best excerpt keeps rank order: E1 is its best."""
    vault = tmp_path / "vault"
    write_note(vault, "parser.md", "# Parser\n\nI rewrote the parser in March because the regexes backtracked.\n")
    write_note(vault, "regexes.md", "# Regexes\n\nThe regexes backtracked on long lines, slowing the parser.\n")
    write_note(vault, "lexer.md", "# Lexer\n\nThe lexer splits the regexes and the parser input into tokens.\n")
    ingest_notes(store, [vault])
    retriever = open_retriever(store, settings, lexical_only=True)
    first = "Why did I rewrite the parser in March?"
    same_best, other_best = "When in March did I rewrite the parser, and what tokens?", "Why did the regexes backtrack?"
    assert [h.title for h in retriever.search(first).hits] == ["Parser", "Regexes", "Lexer"]
    assert [h.title for h in retriever.search(same_best).hits] == ["Parser", "Lexer", "Regexes"]
    assert [h.title for h in retriever.search(other_best).hits][0] == "Regexes"
    llm = ScriptedLLM("Answer: the parser slowed [E1]")
    opened = ask_with_llm(retriever, first, settings, llm=llm)
    judged = len(llm.judged)
    answer = ask_with_llm(retriever, same_best, settings, llm=llm)
    assert [item.hit.title for item in answer.evidence] == [item.hit.title for item in opened.evidence]  # reordered
    assert [item.id for item in answer.evidence] == [f"E{n}" for n in range(1, len(answer.evidence) + 1)]
    opening = llm.calls[0][1]["content"].split("Question:")[0]
    assert llm.calls[1][1]["content"].startswith(opening)
    assert llm.judged[judged][1]["content"].startswith(opening)  # the gate's prompt too
    unrelated = ask_with_llm(retriever, other_best, settings, llm=llm)
    assert unrelated.evidence[0].hit.title == "Regexes" and unrelated.verification["gate_evidence"] == "E1"


def test_a_question_about_now_tells_the_model_which_note_on_its_subject_is_newest(
    store, settings: Settings, tmp_path: Path
) -> None:
    """Two notes state the rent at different dates: asked for the current rent, the model is told
    which is newer (in the gate's prompt too), and its answer from the newer one cites it."""
    vault = tmp_path / "vault"
    write_note(vault, "rent.md", "---\ndate: 2024-01-05\n---\n# Rent\n\nThe rent is 1,450 EUR per month.\n")
    write_note(vault, "raise.md", "---\ndate: 2025-03-01\n---\n# Raise\n\nThe rent went up to 1,620 EUR per month.\n")
    ingest_notes(store, [vault])
    retriever = open_retriever(store, settings, lexical_only=True)
    llm = ScriptedLLM("Answer: 1,620 EUR per month [E1]")
    answer = ask_with_llm(retriever, "What is my current rent?", settings, llm=llm)
    newer = next(item.id for item in answer.evidence if item.hit.title == "Raise")
    older = next(item.id for item in answer.evidence if item.hit.title == "Rent")
    told = f"{newer} (1 March 2025) is newer than {older} (5 January 2024)"
    assert told in llm.calls[0][1]["content"] and told in llm.judged[0][1]["content"]
    plain = ScriptedLLM("Answer: 1,450 EUR per month [E1]")
    ask_with_llm(retriever, "What was my rent?", settings, llm=plain)
    assert "is newer than" not in plain.calls[0][1]["content"]


@pytest.mark.parametrize("verify", [True, False])
def test_the_note_on_which_excerpt_is_newest_never_reaches_the_answer(
    store, settings: Settings, tmp_path: Path, verify: bool
) -> None:
    """The model sometimes copies the prompt's note on dates into its answer: those sentences go, checked
    or not, and a warning says so (what streamed is then shown again without them)."""
    vault = tmp_path / "vault"
    write_note(vault, "rent.md", "---\ndate: 2024-01-05\n---\n# Rent\n\nThe rent is 1,450 EUR per month.\n")
    write_note(vault, "raise.md", "---\ndate: 2025-03-01\n---\n# Raise\n\nThe rent went up to 1,620 EUR per month.\n")
    ingest_notes(store, [vault])
    settings.llm_verify = verify
    retriever = open_retriever(store, settings, lexical_only=True)
    question = "What is my current rent?"
    ids = {item.hit.title: item.id for item in ask_with_llm(retriever, question, settings, llm=ScriptedLLM()).evidence}
    newer, older = ids["Raise"], ids["Rent"]
    copied = (
        f"{newer} (1 March 2025) is newer than {older} (5 January 2024): where they differ, {newer} tells how "
        "things are now and the older how they were before."
    )
    text = (
        f"Answer: 1,620 EUR per month [{newer}]\n{copied} The rent went up to 1,620 EUR [{newer}].\n{newer} is newer."
    )
    answer = ask_with_llm(retriever, question, settings, llm=ScriptedLLM(text))
    assert answer.text == f"Answer: 1,620 EUR per month [{newer}]\nThe rent went up to 1,620 EUR [{newer}]."
    assert [w["kind"] for w in answer.citation_warnings].count("prompt_echo") == 2
