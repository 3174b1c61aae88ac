"""Agent memory commands: `mem ingest-chat`, `mem remember`, `mem mcp` (issue 13)."""

from __future__ import annotations

import argparse
import sys

from crossmodalrag.cli.arguments import at_most, given_path, importance, iso_date, memory_kind
from crossmodalrag.cli.commands import _open, _settings, notice
from crossmodalrag.cli.ingest import _finish_ingest, _paths
from crossmodalrag.cli.progress import ProgressLine
from crossmodalrag.cli.render import print_json


def register(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, as_json: argparse.ArgumentParser
) -> None:
    """Add this module's commands to `mem`'s parser."""
    p = sub.add_parser(
        "ingest-chat", parents=[common, as_json], help="ingest chat transcripts (Claude Code, Codex, ChatGPT, ...)"
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=given_path,
        help="session files, exports or folders of them (default: [connectors] chats)",
    )
    p.set_defaults(run=ingest_chat)
    register_memory_commands(sub, common, as_json)

    p = sub.add_parser(
        "mcp", parents=[common], help="MCP server on stdio for AI agents (claude mcp add mem -- mem mcp)"
    )
    p.set_defaults(run=mcp)


def add_recall_arguments(p: argparse.ArgumentParser) -> None:
    """`mem ask --strategy direct|episodic|fusion --after DATE --before DATE` (agent/recall.py)."""
    p.add_argument(
        "--strategy",
        choices=("direct", "episodic", "fusion"),
        help="recall strategy (default: CMRAG_STRATEGY, else direct); episodic reads 'last week', 'in May', …",
    )
    p.add_argument(
        "--after", type=iso_date, metavar="DATE", help="only evidence from sources dated on or after DATE (ISO)"
    )
    p.add_argument("--before", type=iso_date, metavar="DATE", help="only evidence from sources dated before DATE (ISO)")


def ingest_chat(args: argparse.Namespace) -> int:
    from crossmodalrag.conversations import ingest_conversations

    settings = _settings(args)
    paths = _paths(args.paths, settings.chat_paths, "chat files or folders", "CHAT_PATH")
    progress = ProgressLine("ingest-chat")
    with _open(settings) as store:
        report = ingest_conversations(store, paths, progress)
        return _finish_ingest(args, report, progress, store)


def register_memory_commands(sub, common, as_json) -> None:
    p = sub.add_parser("remember", parents=[common, as_json], help="store a memory (what an agent or you learned)")
    p.add_argument(
        "content", help="the memory, or - to read it from stdin; <private>…</private> spans are never stored"
    )
    p.add_argument("--tags", default="", help="comma-separated tags, e.g. ops,deploy")
    p.add_argument("--importance", type=importance, default=0.5, help="0 to 1 (default 0.5)")
    p.add_argument(
        "--kind", type=memory_kind, default="note", help="fact, decision, preference, task, note, … (default note)"
    )
    p.add_argument("--session", default="", help="the session it came from")
    p.add_argument("--agent", default="", help="the agent that wrote it")
    p.add_argument(
        "--when", type=iso_date, metavar="DATE", help="when it was said or learned (ISO date or date-time; default now)"
    )
    p.add_argument("--context", default="", help="what it replies to (e.g. the previous turn): found by its words too")
    p.set_defaults(run=remember)

    p = sub.add_parser("memories", parents=[common, as_json], help="list stored memories, newest first")
    p.add_argument("--kind", type=memory_kind, help="only this kind")
    p.add_argument("--tag", action="append", help="only memories with this tag (repeatable)")
    p.add_argument("--history", action="store_true", help="also memories a newer one superseded")
    p.add_argument("--limit", type=at_most(500), default=50, help="how many (default 50, at most 500)")
    p.set_defaults(run=memories)


def remember(args: argparse.Namespace) -> int:
    from crossmodalrag.agent.memories import load_memory_embedder
    from crossmodalrag.agent.memories import remember as store_memory
    from crossmodalrag.agent.tools import parse_when

    settings = _settings(args)
    when = parse_when(args.when, "--when")
    content = sys.stdin.read() if args.content == "-" else args.content  # `… | mem remember -`
    embedder, why = load_memory_embedder(settings)
    if why:
        notice(f"note: {why}")
    with _open(settings) as store:
        result = store_memory(
            store,
            content,
            args.tags,
            args.importance,
            args.kind,
            args.session,
            args.agent,
            embedder,
            when=when,
            context=args.context,
        )
    if args.json:
        print_json(result.to_dict())
        return 0
    print(render_stored(result))
    return 0


def render_stored(result) -> str:
    if result.status == "duplicate":
        return f"already remembered as memory {result.id}"
    if result.status == "merged":
        return f"merged into memory {result.id} (similarity {result.similarity:.2f}): tags and times kept"
    lines = [f"remembered as memory {result.id}"]
    if result.supersedes:
        lines.append("supersedes memory " + ", ".join(map(str, result.supersedes)) + " (see `mem memories --history`)")
    if result.links:
        lines.append("linked to " + ", ".join(f"{link['id']} ({link['similarity']:.2f})" for link in result.links))
    return "\n".join(lines)


def memories(args: argparse.Namespace) -> int:
    from crossmodalrag.agent.browse import count_memories, list_memories

    settings = _settings(args)
    with _open(settings, create=False) as store:
        found = list_memories(store, args.kind, args.tag, history=args.history, limit=args.limit)
        total = count_memories(store, args.kind, args.tag, history=args.history)
    if args.json:
        print_json({"memories": found, "total": total})
        return 0
    for item in found:
        mark = f" [superseded by {item['superseded_by']}]" if item.get("superseded_by") else ""
        tags = f" #{' #'.join(item['tags'])}" if item.get("tags") else ""
        # the memory's own date (its `when`), by which the list is ordered, not when it was stored
        text = item["text"].replace("\n", "\n        ")  # a memory of several lines stays under its header
        print(f"{item['id']:>6}  {(item['date'] or '')[:10]}  {item['kind']}{tags}{mark}\n        {text}")
    if len(found) < total:  # the list was cut at --limit: say so, rather than end as if that were all
        notice(f"showing {len(found)} of {total} memories (raise --limit, up to 500, or narrow with --kind/--tag)")
    if not found:
        narrowed = args.kind or args.tag
        notice("no memories match --kind/--tag" if narrowed else "no memories yet: `mem remember TEXT` stores one")
    return 0


def mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdin/stdout until the client closes them (stdout carries only protocol)."""
    from crossmodalrag.mcp_server import require_mcp

    require_mcp()
    from crossmodalrag.mcp_server.server import build_server

    settings = _settings(args)
    _open(settings).close()  # create or migrate the database now: a failure is an error line, not a hung client
    server = build_server(settings)
    try:
        server.run("stdio")
    finally:
        server.service.close()
    return 0
