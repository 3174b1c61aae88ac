"""`mem chat`: ask one question after another with the embedder and the language model kept loaded.

Each question goes through exactly what `mem ask` runs (`question_retriever` with the same options,
`ask_with_llm`, the usage log and `show_answer`); only loading happens once. The model keeps the
KV state of its last calls (answer/llm/llamacpp.py): a follow-up whose gate or answer prompt opens
with the same excerpts reads only what differs (on the sample ~38% fewer tokens before the first
token); an unrelated question reads its new excerpts like the first one did.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from functools import partial
from pathlib import Path

from crossmodalrag.answer.evidence import (
    ask_without_llm,
    render_evidence_answer,
    require_question,
    with_retriever_notices,
)
from crossmodalrag.cli.ask import TextStream, question_retriever, show_answer
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.followup import follow_up_notice, with_previous_topic
from crossmodalrag.cli.render import explanation
from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError
from crossmodalrag.types import readable

HELP = """Type a question, or:
  /sources   the evidence behind the last answer
  /explain   the last answer's ranking and the model's checks
  /help      this text
  /quit      leave (also Ctrl-D)"""
HISTORY_LINES = 1000


def chat(args: argparse.Namespace) -> int:
    from crossmodalrag.agent.browse import note_changes
    from crossmodalrag.answer.llm import load_llm
    from crossmodalrag.memory.retrieve import after_answer

    settings = _settings(args)
    history = _start_history(history_path(settings))
    with _open(settings, create=False) as store:
        retriever = question_retriever(store, settings, args)
        standing = list(retriever.notices)  # printed once here; in every answer's JSON `notices`
        for message in standing:
            notice(f"note: {message}")
        llm = None
        if not args.no_llm:
            try:
                llm = load_llm(settings)
                llm.check()  # load the weights now, not at the first question
            except CMRAGError as error:
                notice(f"note: answering with the evidence only: {error.message}")
        if sys.stdin.isatty():
            notice(HELP.splitlines()[0] + " /help lists commands.")
        last = None
        topic = None  # the last question as asked, with the topic it carried over (followup.py)
        prompt = "mem> " if sys.stdin.isatty() else ""  # piped input: keep stdout to the answers
        while (line := _read(prompt)) is not None:
            question = readable(line).strip()
            if not question:
                continue
            if question.startswith("/"):
                if question in ("/quit", "/exit", "/q"):
                    break
                # --json keeps stdout to the answers' JSON lines: a command's text goes to stderr
                _command(question, last, retriever, sys.stderr if args.json else sys.stdout)
                continue
            stream = TextStream() if sys.stdout.isatty() and not args.json else None
            shown = len(retriever.notices)
            asked, carried = with_previous_topic(question, topic)
            topic = asked
            try:
                require_question(question)  # the limit `mem ask`, the API and MCP keep
                try:
                    last = _answer(retriever, asked, settings, llm, stream)
                except KeyboardInterrupt:  # Ctrl-C abandons this answer, not the session and its loaded model
                    if stream and stream.written:
                        print()  # end the half-written answer's line
                    notice("note: answer abandoned (Ctrl-C); ask another question, or Ctrl-D to leave")
                    continue
                with_retriever_notices(last, retriever, standing, shown)
                if carried:
                    last.notices.append(follow_up_notice(carried))
                after_answer(store, last, retriever, args, settings)
                note_changes(store, last)
            except CMRAGError as error:  # one bad question must not end the session
                notice(f"error: {error.message}" + (f" (hint: {error.hint})" if error.hint else ""))
                try:
                    if store.recover():  # PostgreSQL dropped the connection: the next question gets a new one
                        notice("note: reconnected to the database")
                except CMRAGError as lost:
                    notice(f"error: {lost.message}" + (f" (hint: {lost.hint})" if lost.hint else ""))
                continue
            if args.json:  # one line per answer (JSON Lines): the `mem ask --json` payload
                for message in last.notices:
                    if message not in standing:
                        notice(f"note: {message}")
                print(json.dumps(_payload(last, question, asked), ensure_ascii=False), flush=True)
            else:
                show_answer(last, retriever, stream, as_json=False, explain=False, debug=False, printed=standing)
    _save_history(history)
    return 0


def _payload(answer, question: str, asked: str) -> dict:
    """The `mem ask --json` payload, whose `query` is the line as typed: a client matches answers to the
    lines it sent. A follow-up searched with the previous topic's words says so in `searched_as`."""
    payload = answer.to_dict()
    if asked != question:
        payload.update(query=question, searched_as=asked)
    return payload


def _answer(retriever, question: str, settings, llm, stream):
    from crossmodalrag.answer.synthesize import ask_with_llm

    if llm is None:
        return ask_without_llm(retriever, question)
    # llama.cpp in process: Ctrl-C stops it within a moment instead of after its current batch
    interruptible = getattr(llm, "interruptible", nullcontext)
    with interruptible():
        return ask_with_llm(retriever, question, settings, stream.write if stream else None, llm=llm)


def _command(command: str, last, retriever, out) -> None:
    say = partial(print, file=out)
    if command == "/help":
        say(HELP)
    elif command not in ("/sources", "/explain"):
        say(f"unknown command {command}; /help lists them")
    elif last is None:
        say("no answer yet: ask a question first")
    elif command == "/sources":
        say(render_evidence_answer(last.evidence, last.comparison) if last.evidence else "no evidence")
    else:
        say(explanation(last, retriever.options.weights(retriever.semantic is not None)) or "no evidence")


def _read(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        if prompt:
            print()  # end the prompt's line on a terminal
        return None
    except KeyboardInterrupt:
        print()
        return ""


def history_path(settings: Settings) -> Path:
    """Where the questions typed on a terminal are kept (readline's history): beside the database."""
    return settings.db_path.parent / "chat_history"


def _start_history(path: Path) -> Path | None:
    """Readline editing and a history kept beside the database, where readline exists."""
    try:
        import readline
    except ImportError:
        return None
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(HISTORY_LINES)
    return path


def _save_history(path: Path | None) -> None:
    if path is None:
        return
    import readline

    try:
        readline.write_history_file(path)
    except OSError:
        pass
