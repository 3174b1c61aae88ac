"""`mem ask`, and the evidence finding and answer printing `mem chat` shares with it."""

from __future__ import annotations

import argparse
import sys

from crossmodalrag.answer.evidence import ask_without_llm, open_retriever, require_question, with_retriever_notices
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.render import (
    print_json,
    render_answer,
    render_debug,
    render_footer,
    render_matched_nodes,
    status_line,
)
from crossmodalrag.config import Settings
from crossmodalrag.memory.retrieve import after_answer, at_level
from crossmodalrag.store import Store
from crossmodalrag.wording import terminal_safe


def ask(args: argparse.Namespace) -> int:
    from crossmodalrag.agent.browse import note_changes
    from crossmodalrag.answer.synthesize import ask_with_llm

    require_question(args.query)
    settings = _settings(args)
    with _open(settings, create=False) as store:
        retriever = question_retriever(store, settings, args)
        # said before the answer (it may stream), so printed now and not again with the answer
        standing = list(retriever.notices)
        for message in standing:
            notice(f"note: {message}")
        stream = None
        if args.no_llm:
            answer = ask_without_llm(retriever, args.query, debug=args.debug)
        else:
            stream = TextStream() if sys.stdout.isatty() and not (args.no_stream or args.json) else None
            answer = ask_with_llm(retriever, args.query, settings, stream.write if stream else None, debug=args.debug)
        with_retriever_notices(answer, retriever, standing, len(standing))
        after_answer(store, answer, retriever, args, settings)
        note_changes(store, answer)
    show_answer(answer, retriever, stream, args.json, args.explain, args.debug, printed=standing)
    return 0


def question_retriever(store: Store, settings: Settings, args: argparse.Namespace):
    """What `mem ask` and `mem chat` find evidence with: ranking options, then the recall strategy
    and dates, `--as-of` and `--level` layered on top."""
    from crossmodalrag.agent.judge import session_judge
    from crossmodalrag.agent.recall import with_recall

    retriever = open_retriever(store, settings, args.top_k, args.profile, modalities=tuple(args.modality or ()))
    strategy = args.strategy or retriever.strategy
    uses_model = strategy != "direct" and not getattr(args, "no_llm", False)
    judge = session_judge(settings, retriever.notices) if uses_model else None
    retriever = with_recall(retriever, strategy, args.after, args.before, judge)
    if args.as_of:
        from crossmodalrag.versioning.asof import as_of

        retriever = as_of(retriever, args.as_of)
    return at_level(retriever, getattr(args, "level", "evidence"), settings)


def show_answer(
    answer, retriever, stream: "TextStream | None", as_json: bool, explain: bool, debug: bool, printed=()
) -> None:
    """Print an answer as `mem ask` and `mem chat` do: JSON, or the text (or, when it streamed,
    only what follows it) on stdout and notices and the status line on stderr. Notices in `printed`
    are on stderr already."""
    for message in answer.notices:
        if message not in printed:
            notice(f"note: {message}")
    if as_json:
        print_json(answer.to_dict())
        return
    if debug and answer.debug:
        notice(render_debug(answer.debug))
    weights = retriever.options.weights(retriever.semantic is not None)
    if answer.matched_nodes:
        print(render_matched_nodes(answer))
    if stream and stream.written and answer.mode == "llm" and not answer.abstained:
        dropped = sum(w["kind"] in ("unsupported_claim", "prompt_echo") for w in answer.citation_warnings)
        if dropped:  # what streamed cannot be unprinted: the checked answer follows it, said once
            print(f"\n{CHECKED.format(dropped, 's' if dropped > 1 else '')}\n{terminal_safe(answer.text)}")
        elif not stream.shows(answer.text):  # hedges left out, citations added or moved, a date moved
            print(f"\n{RECHECKED}\n{terminal_safe(answer.text)}")
        print("\n" + terminal_safe(render_footer(answer, explain, weights)))  # the text itself is already on screen
    else:
        if stream and stream.written:
            print()  # the model failed or was withheld mid-answer: end its partial line first
            if answer.abstained or answer.verdict_withheld:  # what streamed cannot be unprinted: say it does not count
                print(WITHDRAWN)
        print(terminal_safe(render_answer(answer, explain, weights)))  # excerpts of notes may hold escapes
    notice(status_line(answer))


WITHDRAWN = "(withdrawn: the text above did not hold up against the evidence)"
CHECKED = "(checked: {} sentence{} above did not hold up against the evidence; the answer without:)"
# What --json, the API and MCP answer when the check changed more than layout: the terminal says the same.
RECHECKED = "(checked against the evidence, the answer reads:)"


class TextStream:
    """Writes streamed answer text straight to the terminal and remembers whether it wrote any."""

    def __init__(self) -> None:
        self.written = False
        self.pieces: list[str] = []

    def write(self, text: str) -> None:
        self.written = self.written or bool(text)
        self.pieces.append(text)
        sys.stdout.write(terminal_safe(text))  # a model may repeat an escape sequence from a note
        sys.stdout.flush()

    def shows(self, text: str) -> bool:
        """Whether what streamed reads as `text`, line breaks and spacing aside."""
        return "".join(self.pieces).split() == text.split()
