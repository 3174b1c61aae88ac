"""What goes wrong while searching (the opt-in session judge's model failing) reaches the answer's
notices: printed by `mem ask` and `mem chat`, and in their JSON."""

from __future__ import annotations

import io
import json

import pytest

from crossmodalrag.agent.judge import SessionJudge
from crossmodalrag.answer.llm.base import LLMError
from crossmodalrag.cli.main import main
from tests.agent.test_recall import locomo_memory
from tests.fakes import ScriptedLLM

FAILED = "sessions not judged: the model timed out (hint: raise CMRAG_LLM_TIMEOUT)"


class TimingOut(ScriptedLLM):
    def support_margins(self, prompts):
        raise LLMError("the model timed out", "raise CMRAG_LLM_TIMEOUT")


@pytest.fixture
def failing_judge(store, tmp_path, monkeypatch):
    topics = ["a red kite", "a blue boat", "a green lamp", "a pottery class", "a yellow car", "a watercolor"]
    locomo_memory(store, tmp_path, [(f"2023-05-0{n}", [("Ana", f"I painted {t}.")]) for n, t in enumerate(topics, 1)])
    judge = lambda settings, notices: SessionJudge(TimingOut(), notices=notices)  # noqa: E731 - as session_judge
    monkeypatch.setattr("crossmodalrag.agent.judge.session_judge", judge)
    monkeypatch.setenv("CMRAG_LLM_PROVIDER", "none")  # the answer itself: the evidence answer


def test_mem_ask_reports_a_judge_that_failed_while_searching(failing_judge, settings, capsys) -> None:
    assert main(["ask", "What did Ana paint?", "--json", "--strategy", "episodic", "--top-k", "6"]) == 0
    captured = capsys.readouterr()
    assert FAILED in json.loads(captured.out)["notices"]
    assert f"note: {FAILED}" in captured.err


def test_mem_chat_reports_it_with_each_answer(failing_judge, settings, capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("What did Ana paint?\nWhat did Ana paint?\n"))
    assert main(["chat", "--json", "--strategy", "episodic", "--top-k", "6"]) == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(answers) == 2 and all(answer["notices"].count(FAILED) == 1 for answer in answers)


# --- the retriever's own notices (`--as-of`, lexical only) ------------------------------------


@pytest.fixture
def changed_memory(store, tmp_path):
    from crossmodalrag.ingest import ingest_notes
    from crossmodalrag.versioning.history import checkpoint
    from tests.conftest import write_note

    vault = tmp_path / "vault"
    write_note(vault, "alpha.md", "# Alpha\n\nThe deploy key lives in vault one.\n")
    ingest_notes(store, [vault])
    checkpoint(store, "tuesday")
    write_note(vault, "alpha.md", "# Alpha\n\nThe deploy key moved to vault two.\n")
    ingest_notes(store, [vault])


AS_OF = ["--no-llm", "--as-of", "tuesday"]


def retriever_notices(notices: list[str]) -> list[str]:
    return [n for n in notices if "as of seq" in n or n == "ranked lexically" or n.startswith("lexical retrieval")]


def test_mem_ask_json_carries_the_retriever_s_notices_and_says_them_once(changed_memory, settings, capsys) -> None:
    # the contract: an --as-of answer is "ranked lexically with a notice"; they only went to stderr
    assert main(["ask", "deploy key vault", "--json", *AS_OF]) == 0
    captured = capsys.readouterr()
    notices = json.loads(captured.out)["notices"]
    assert any("as of seq" in n for n in notices) and "ranked lexically" in notices
    for message in retriever_notices(notices):
        assert captured.err.count(f"note: {message}\n") == 1
    assert main(["ask", "deploy key vault", *AS_OF]) == 0
    err = capsys.readouterr().err
    assert err.count("note: ranked lexically\n") == 1


def test_mem_chat_json_carries_them_in_each_answer(changed_memory, settings, capsys, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("deploy key vault\ndeploy key vault\n"))
    assert main(["chat", "--json", *AS_OF]) == 0
    captured = capsys.readouterr()
    answers = [json.loads(line) for line in captured.out.splitlines()]
    assert len(answers) == 2 and all(answer["notices"].count("ranked lexically") == 1 for answer in answers)
    assert captured.err.count("note: ranked lexically\n") == 1
