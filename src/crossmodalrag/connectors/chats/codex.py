"""Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`).

The visible text appears twice, as a `response_item` message and as an `event_msg`: the user's
words are taken from `event_msg` `user_message` (Codex writes it only for what the user typed, so
injected context such as AGENTS.md and `<environment_context>`, which come as `response_item` user
messages, stays out) and the assistant's from `response_item` assistant messages. Tool calls pair
with their outputs by `call_id` and are summarised. Turn ids are `<turn id>/L<line>`: a message
has no id of its own, and the line number is stable while the rollout grows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.connectors.chats import Session, Turn, title_from
from crossmodalrag.connectors.chats.claude_code import tool_call, tool_result
from crossmodalrag.connectors.chats.jsonio import json_lines, parse_time


def read_sessions(path: Path, problems: list[str]) -> Iterator[Session]:
    """The one session of a rollout file."""
    meta: dict[str, Any] = {}
    turns: list[Turn] = []
    turn_id = ""
    for number, record in json_lines(path, problems):
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else {}
        kind, item = record.get("type"), payload.get("type")
        if kind == "session_meta":
            meta = payload
        elif kind in ("turn_context", "event_msg") and payload.get("turn_id"):
            turn_id = str(payload["turn_id"])
        found = _turn(kind, item, payload)
        if found is None:
            continue
        speaker, text = found
        when = parse_time(record.get("timestamp"))
        if turns and turns[-1].speaker == speaker:
            turns[-1].text += "\n" + text
        else:
            turns.append(Turn(speaker, text, f"{turn_id or 'turn'}/L{number}", when))
    if not turns:
        return
    first_user = next((t.text for t in turns if t.speaker == "user"), "")
    title = title_from(first_user) or path.stem
    extra = {k: meta[k] for k in ("cwd", "originator", "cli_version") if isinstance(meta.get(k), str)}
    git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
    if git.get("branch"):
        extra["git_branch"] = git["branch"]
    key = str(meta.get("id") or path.stem)
    yield Session(key, title, "codex", turns, parse_time(meta.get("timestamp")) or turns[0].timestamp, extra)


def _turn(kind: str | None, item: str | None, payload: dict[str, Any]) -> tuple[str, str] | None:
    """(speaker, text) of a record that carries conversation, None for the rest."""
    if kind == "event_msg" and item == "user_message" and str(payload.get("message", "")).strip():
        return "user", str(payload["message"]).strip()
    if kind != "response_item":
        return None
    if item == "message" and payload.get("role") == "assistant":
        text = "\n".join(
            block.get("text", "") for block in payload.get("content") or [] if isinstance(block, dict)
        ).strip()
        return ("assistant", text) if text else None
    if item in ("function_call", "custom_tool_call"):
        arguments = payload.get("arguments", payload.get("input"))
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass
        return "assistant", tool_call(str(payload.get("name", "tool")), arguments)
    if item in ("function_call_output", "custom_tool_call_output"):
        return "tool", tool_result(payload.get("output"), False)
    return None
