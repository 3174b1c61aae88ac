"""The opt-in session judge: the model picks which of the first sessions lead episodic answers."""

from __future__ import annotations

import pytest

import crossmodalrag.answer.synthesize  # noqa: F401 - imported before a test patches load_llm, which it binds
from crossmodalrag.agent.judge import LEAD, SessionJudge, session_judge
from crossmodalrag.agent.recall import recall, with_recall
from crossmodalrag.answer.evidence import open_retriever
from crossmodalrag.answer.llm.base import LLMError, LLMUnavailable
from crossmodalrag.cli.main import main
from crossmodalrag.config import Settings, load_settings
from tests.agent.test_recall import hit, locomo_memory
from tests.fakes import ScriptedLLM


def by_source(found):
    return found.source_id


def test_the_sessions_the_model_judges_relevant_lead_in_the_fused_order_otherwise():
    # 8 sessions; session 1 has two turns. The model likes sessions 7 and 8 best.
    hits = [hit(1, 1, 1.0), hit(2, 1, 0.95)] + [hit(chunk, chunk - 1, 1.0 - chunk / 10) for chunk in range(3, 10)]
    llm = ScriptedLLM(margins=[1.0, 0.5, 0.4, 0.3, 0.2, -1.0, 3.0, 2.0])
    led = SessionJudge(llm, sessions=8).lead("What did Ana paint?", hits, by_source)
    assert [h.chunk_id for h in led] == [8, 9, 1, 3, 4, 2, 5, 6, 7]  # 7 and 8 lead; then 1, 2, 3; the rest in order
    assert len(llm.judged) == 8  # one judgement per session, of its best turn
    assert all(p[1]["content"].startswith("Question: What did Ana paint?") for p in llm.judged)  # a shared prefix


def test_only_the_first_sessions_are_judged_and_too_few_are_not_judged_at_all():
    hits = [hit(chunk, chunk, 1.0 - chunk / 100) for chunk in range(1, 12)]
    llm = ScriptedLLM(margins=[0.0] * 5 + [9.0])
    assert [h.chunk_id for h in SessionJudge(llm, sessions=6).lead("q", hits, by_source)][:2] == [6, 1]
    assert len(llm.judged) == 6
    few = ScriptedLLM()
    assert SessionJudge(few, sessions=8).lead("q", hits[:LEAD], by_source) == hits[:LEAD] and not few.judged


def test_a_model_error_keeps_the_fused_order_and_says_so():
    class Failing(ScriptedLLM):
        def support_margins(self, prompts):
            raise LLMError("the model timed out", "raise CMRAG_LLM_TIMEOUT")

    hits = [hit(chunk, chunk, 1.0 - chunk / 100) for chunk in range(1, 9)]
    judge = SessionJudge(Failing(), sessions=8)
    assert judge.lead("q", hits, by_source) == hits
    assert judge.notices == ["sessions not judged: the model timed out (hint: raise CMRAG_LLM_TIMEOUT)"]


def test_the_judge_is_off_by_default_and_a_missing_model_is_a_notice(monkeypatch):
    notices: list[str] = []
    assert session_judge(Settings(), notices) is None and not notices

    def unavailable(settings):
        raise LLMUnavailable("no GGUF model at x.gguf", "run `mem models install --llm`")

    monkeypatch.setattr("crossmodalrag.answer.llm.load_llm", unavailable)
    assert session_judge(Settings(recall_judge_sessions=8), notices) is None
    assert notices == ["sessions not judged: no GGUF model at x.gguf (hint: run `mem models install --llm`)"]


@pytest.fixture
def six_sessions(store, tmp_path):
    topics = ["a red kite", "a blue boat", "a green lamp", "a pottery class", "a yellow car", "a watercolor of a lake"]
    sessions = [(f"2023-05-0{n}", [("Ana", f"I painted {topic}.")]) for n, topic in enumerate(topics, 1)]
    return locomo_memory(store, tmp_path, sessions)


def test_episodic_answers_lead_with_the_judged_sessions_and_show_the_same_evidence(six_sessions, settings):
    question = "What did Ana paint?"
    plain = recall(with_recall(open_retriever(six_sessions, settings, 6), "episodic", None, None), question, "episodic")
    order = [h.source_id for h in plain.hits]
    llm = ScriptedLLM(margins=[0.0, 0.0, 0.0, 0.0, 0.0, 4.0])  # the sixth session by fused order is the one
    judged = with_recall(open_retriever(six_sessions, settings, 6), "episodic", None, None, SessionJudge(llm))
    hits = recall(judged, question, "episodic").hits
    assert len(llm.judged) == 6 and [h.source_id for h in hits] == [order[5]] + order[:5]
    few = ScriptedLLM()
    top = with_recall(open_retriever(six_sessions, settings, 3), "episodic", None, None, SessionJudge(few))
    assert [h.source_id for h in recall(top, question, "episodic").hits] == order[:3] and not few.judged


def test_mem_ask_without_a_model_never_loads_the_judge(six_sessions, settings, monkeypatch, capsys):
    def no_model(settings):
        raise AssertionError("--no-llm must not load a model")

    monkeypatch.setattr("crossmodalrag.answer.llm.load_llm", no_model)
    monkeypatch.setenv("CMRAG_RECALL_JUDGE_SESSIONS", "8")
    assert load_settings().recall_judge_sessions == 8
    assert main(["ask", "What did Ana paint?", "--no-llm", "--json", "--strategy", "episodic"]) == 0
    assert "painted" in capsys.readouterr().out
