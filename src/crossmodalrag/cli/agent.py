"""Agent memory commands: `mem ingest-chat`, `mem remember`, `mem mcp` (issue 13)."""

from __future__ import annotations

import argparse
from pathlib import Path

from crossmodalrag.cli.commands import _finish_ingest, _open, _paths, _settings
from crossmodalrag.cli.progress import ProgressLine


def register(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser
) -> None:
    """Add this module's commands to `mem`'s parser."""
    p = sub.add_parser(
        "ingest-chat", parents=[common, as_json], help="ingest chat transcripts (Claude Code, Codex, ChatGPT, ...)"
    )
    p.add_argument(
        "paths", nargs="*", type=Path, help="session files, exports or folders of them (default: [connectors] chats)"
    )
    p.set_defaults(run=ingest_chat)


def ingest_chat(args: argparse.Namespace) -> int:
    from crossmodalrag.conversations import ingest_conversations

    settings = _settings(args)
    paths = _paths(args.paths, settings.chat_paths, "chat files or folders", "CHAT_PATH")
    progress = ProgressLine("ingest-chat")
    with _open(settings) as store:
        report = ingest_conversations(store, paths, progress)
        return _finish_ingest(args, report, progress, store)
