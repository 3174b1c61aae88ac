"""`mem chat`: the `mem ask` code path, one question after another, with the models loaded once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crossmodalrag.answer import llm as llm_package
from crossmodalrag.answer import synthesize
from crossmodalrag.cli.main import main
from tests.conftest import write_note
from tests.fakes import ScriptedLLM
from tests.llm import SMOLLM_TOKENS, require_llama_cpp, smollm_gguf

QUESTIONS = ["why did we replace the regexes with a tokenizer?", "why was the render cache dropped?"]
CITED = "Answer: they backtracked [E1]\nThe regexes backtracked, so we wrote a tokenizer [E1]."


@pytest.fixture
def vault(tmp_path: Path, capsys) -> Path:
    root = tmp_path / "vault"
    write_note(root, "parser.md", "# Parser rewrite\nWe replaced the regexes with a tokenizer: they backtracked.\n")
    write_note(root, "cache.md", "# Render cache\nWe dropped the render cache: it served stale HTML.\n")
    assert main(["ingest-notes", str(root)]) == 0
    capsys.readouterr()
    return root


def chat(capsys, monkeypatch, lines: list[str], *flags: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    code = main(["chat", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def without_timing(answer: dict) -> dict:
    return {key: value for key, value in answer.items() if key != "timing"}


def test_json_lines_are_exactly_what_mem_ask_json_prints(capsys, monkeypatch, vault):
    code, out, _ = chat(capsys, monkeypatch, QUESTIONS, "--no-llm", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 2
    for question, from_chat in zip(QUESTIONS, lines, strict=True):
        assert main(["ask", question, "--no-llm", "--json"]) == 0
        from_ask = json.loads(capsys.readouterr().out)
        assert without_timing(from_chat) == without_timing(from_ask)


def test_a_question_over_the_limit_is_refused_and_the_session_goes_on(capsys, monkeypatch, vault):
    """`mem ask`, the API and MCP refuse a question over 2,000 characters; chat took any length (the
    line is stripped: 2,399)."""
    code, out, err = chat(capsys, monkeypatch, ["why " * 600, QUESTIONS[0]], "--no-llm", "--json")
    assert code == 0 and len(out.splitlines()) == 1
    assert "error: the question is 2,399 characters long: at most 2,000 are taken" in err


def test_a_line_with_bytes_that_are_not_utf8_is_asked_with_them_replaced(capsys, monkeypatch, vault):
    """A pipe decodes them as lone surrogates, which ended the whole session (an embedder's tokenizer
    rejects them); the question is asked with them replaced, and the next one too."""
    code, out, _ = chat(capsys, monkeypatch, [os.fsdecode(b"tokenizer \xff"), QUESTIONS[0]], "--no-llm", "--json")
    first, second = (json.loads(line) for line in out.splitlines())
    assert code == 0 and first["query"] == "tokenizer \ufffd" and second["query"] == QUESTIONS[0]


@pytest.mark.parametrize(
    "flags",
    [
        ["--match", "all", "--top-k", "1"],
        ["--strategy", "fusion", "--after", "2000-01-01"],
        ["--as-of", "2999-01-01T00:00"],
        ["--modality", "text", "--no-track"],
    ],
)
def test_chat_takes_the_retrieval_options_of_mem_ask(capsys, monkeypatch, vault, flags):
    code, out, _ = chat(capsys, monkeypatch, QUESTIONS[:1], "--no-llm", "--json", *flags)
    assert code == 0
    assert main(["ask", QUESTIONS[0], "--no-llm", "--json", *flags]) == 0
    from_ask = json.loads(capsys.readouterr().out)
    assert without_timing(json.loads(out)) == without_timing(from_ask)


def test_chat_at_a_level_not_built_says_what_to_run(capsys, monkeypatch, vault):
    code, out, err = chat(capsys, monkeypatch, QUESTIONS[:1], "--no-llm", "--level", "event")
    assert code == 1 and out == ""
    assert err.startswith("error: no event nodes yet") and "mem build-memory" in err


def test_the_model_is_loaded_once_for_the_whole_session(capsys, monkeypatch, vault):
    llm = ScriptedLLM(CITED)
    loads = []
    monkeypatch.setattr(llm_package, "load_llm", lambda settings: loads.append(1) or llm)
    monkeypatch.setattr(synthesize, "load_llm", lambda settings: pytest.fail("chat must reuse its model"))
    code, out, _ = chat(capsys, monkeypatch, QUESTIONS, "--json")
    answers = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and loads == [1] and len(llm.calls) == 2
    assert [a["short_answer"] for a in answers] == ["they backtracked", "they backtracked"]


def test_sources_explain_help_and_quit(capsys, monkeypatch, vault):
    monkeypatch.setattr(llm_package, "load_llm", lambda settings: ScriptedLLM(CITED))
    lines = ["/sources", QUESTIONS[0], "/sources", "/explain", "/nonsense", "/help", "/quit", QUESTIONS[1]]
    code, out, err = chat(capsys, monkeypatch, lines)
    assert code == 0
    assert out.startswith("no answer yet")
    assert CITED in out and "Sources:" in out
    assert out.count("Found 1 piece of evidence") == 1  # /sources; /explain shows what `mem ask --explain` does:
    assert out.count("Sources:") == 2 and "  verifier +" in out and "score = " in out  # margins beside the evidence
    assert "why: before answering, the model judged whether E1 answers the question: margin" in out
    assert "unknown command /nonsense" in out and "/sources" in out
    assert "render cache" not in out.split("/quit")[-1] and out.count(CITED) == 1  # nothing after /quit
    assert "llm: scripted" in err


def test_with_json_commands_answer_on_stderr_and_stdout_stays_json_lines(capsys, monkeypatch, vault):
    code, out, err = chat(capsys, monkeypatch, ["/bogus", QUESTIONS[0], "/help", "/sources"], "--no-llm", "--json")
    assert code == 0 and [json.loads(line)["query"] for line in out.splitlines()] == [QUESTIONS[0]]
    assert "unknown command /bogus" in err and "/quit" in err and "Found" in err  # not "no answer yet"


def test_a_lost_database_connection_is_one_error_and_the_next_question_is_answered(capsys, monkeypatch, vault):
    from crossmodalrag.cli import chat as chat_module
    from crossmodalrag.errors import StoreError
    from crossmodalrag.store.connection import Store

    answer, failed, recovered = chat_module.ask_without_llm, [], []

    def once_lost(retriever, question):
        if not failed:
            failed.append(question)
            raise StoreError("lost the PostgreSQL connection: terminating connection", "check the server")
        return answer(retriever, question)

    monkeypatch.setattr(chat_module, "ask_without_llm", once_lost)
    monkeypatch.setattr(Store, "recover", lambda store: recovered.append(store) or True)
    code, out, err = chat(capsys, monkeypatch, QUESTIONS, "--no-llm", "--json")
    assert code == 0 and len(out.splitlines()) == 1 and recovered
    assert "error: lost the PostgreSQL connection" in err and "reconnected" in err


def test_a_model_that_cannot_load_leaves_evidence_answers(capsys, monkeypatch, vault):
    def unavailable(settings):
        raise llm_package.LLMUnavailable("no language model (none is configured)", "run mem models install --llm")

    monkeypatch.setattr(llm_package, "load_llm", unavailable)
    code, out, err = chat(capsys, monkeypatch, QUESTIONS[:1])
    assert code == 0 and "Found " in out and "answering with the evidence only" in err


@pytest.mark.integration
def test_a_real_model_answers_two_questions_in_one_process(vault, tmp_path):
    require_llama_cpp()
    env = {**os.environ, "CMRAG_LLM_MODEL_PATH": str(smollm_gguf()), "CMRAG_LLM_MAX_TOKENS": str(SMOLLM_TOKENS)}
    done = subprocess.run(
        [sys.executable, "-m", "crossmodalrag", "chat", "--json"],
        input="\n".join(QUESTIONS) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["query"] for a in answers] == QUESTIONS
    assert all(a["mode"] == "llm" and a["verification"]["gate_margin"] is not None for a in answers)


class InterruptedOnce(ScriptedLLM):
    """Its first answer is cut by Ctrl-C (the KeyboardInterrupt a model's stream raises mid-answer)."""

    def stream(self, messages, generation):
        for number, piece in enumerate(super().stream(messages, generation)):
            if len(self.calls) == 1 and number == 2:
                raise KeyboardInterrupt
            yield piece


def test_ctrl_c_during_an_answer_abandons_it_and_the_session_goes_on(capsys, monkeypatch, vault):
    llm = InterruptedOnce(CITED)
    loads = []
    monkeypatch.setattr(llm_package, "load_llm", lambda settings: loads.append(1) or llm)
    code, out, err = chat(capsys, monkeypatch, QUESTIONS, "--json")
    assert code == 0 and loads == [1] and len(llm.calls) == 2
    assert [json.loads(line)["query"] for line in out.splitlines()] == [QUESTIONS[1]]
    assert "note: answer abandoned (Ctrl-C)" in err and "error:" not in err


def test_forget_names_the_chat_history_that_may_quote_what_it_forgot(vault, db_path, capsys):
    """`mem chat` on a terminal keeps typed questions beside the database; forget leaves that file."""
    history = db_path.parent / "chat_history"
    assert main(["forget", "--path", str(vault / "cache.md"), "--yes"]) == 0
    assert "chat_history" not in capsys.readouterr().err  # no history kept: nothing to say
    history.write_text("why was the parser rewritten?\n")
    assert main(["forget", "--path", str(vault / "parser.md"), "--yes"]) == 0
    assert f"questions typed in `mem chat` are kept in {history}" in capsys.readouterr().err
    assert history.read_text() == "why was the parser rewritten?\n"
