"""Export files holding many conversations: ChatGPT and Claude.ai `conversations.json`, LoCoMo JSON.

ChatGPT keeps every edit and regeneration in a tree (`mapping`); the conversation as it was last
shown is the path from `current_node` up to the root, and that path is what is ingested: branches
edited away are left out (they were replaced by the user, and would answer questions with words
nobody stood by). Hidden system messages and empty parts are skipped; a voice turn keeps its
transcription; browsing results and tool invocations are summarised, but a canvas the assistant wrote
(like a Claude.ai artifact) is kept whole, to DELIVERED_CHARS: it is what the assistant delivered.
Claude.ai messages keep their text blocks (thinking left out), their artifacts and the text
extracted from their attachments; its edits and regenerations are siblings under one parent
(`parent_message_uuid`), and only the branch ending at the current leaf is ingested, as for ChatGPT.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.connectors.chats import Session, Turn, title_from
from crossmodalrag.connectors.chats.claude_code import tool_call, tool_result
from crossmodalrag.connectors.chats.jsonio import json_array, parse_time


def read_chatgpt(path: Path, problems: list[str]) -> Iterator[Session]:
    for index, conversation in enumerate(json_array(path, problems)):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"), dict):
            problems.append(f"{path}: conversation {index} has no message tree, skipped")
            continue
        turns = [turn for node in current_path(conversation) if (turn := _chatgpt_turn(node))]
        key = str(conversation.get("conversation_id") or conversation.get("id") or index)
        title = str(conversation.get("title") or "") or _first_words(turns) or key
        yield Session(key, title, "chatgpt", turns, parse_time(conversation.get("create_time")))


def current_path(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root down to `current_node` (the last leaf in the file if it is unset)."""
    mapping = conversation["mapping"]
    node_id = conversation.get("current_node")
    if node_id not in mapping:
        leaves = [key for key, node in mapping.items() if isinstance(node, dict) and not node.get("children")]
        node_id = leaves[-1] if leaves else None
    path, seen = [], set()
    while node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        path.append(node)
        node_id = node.get("parent") if isinstance(node, dict) else None
    return [node for node in reversed(path) if isinstance(node, dict)]


def _chatgpt_turn(node: dict[str, Any]) -> Turn | None:
    message = node.get("message")
    if not isinstance(message, dict):
        return None
    metadata = message.get("metadata") or {}
    role = (message.get("author") or {}).get("role", "")
    if message.get("weight") == 0 or metadata.get("is_visually_hidden_from_conversation") or role == "system":
        return None
    text = _chatgpt_text(message.get("content") or {}, message.get("recipient", "all"))
    if not text:
        return None
    speaker = role if role in ("user", "assistant") else "tool"
    return Turn(speaker, text, str(message.get("id") or node.get("id")), parse_time(message.get("create_time")))


def _chatgpt_text(content: dict[str, Any], recipient: str) -> str:
    kind = content.get("content_type")
    if kind in ("text", "multimodal_text"):
        parts = [shown for part in content.get("parts") or [] if part and (shown := _chatgpt_part(part))]
        return "\n".join(parts).strip()
    if kind == "code" and recipient.startswith("canmore."):
        return _canvas(recipient, content.get("text", ""))
    if kind == "code":
        return tool_call(recipient if recipient != "all" else "code", content.get("text", ""))
    if kind in ("tether_quote", "tether_browsing_display", "execution_output", "system_error"):
        shown = content.get("title") or content.get("text") or content.get("result") or content.get("summary")
        return tool_result(shown or "", kind == "system_error")
    return ""  # thoughts, reasoning recaps, user context: not the conversation's words


def _chatgpt_part(part: Any) -> str:
    """A part of a message as its turn shows it: text as written, a voice turn's transcription (what
    was said; its audio pointer shows nothing), an image as `[image]`."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    kind = str(part.get("content_type") or "")
    if kind == "audio_transcription" or (isinstance(part.get("text"), str) and "image" not in kind):
        return str(part.get("text") or "").strip()
    return "[image]" if "image" in kind else ""


def _canvas(recipient: str, raw: str) -> str:
    """A ChatGPT canvas written or rewritten (`canmore.create_textdoc`, `canmore.update_textdoc`):
    its text is what the assistant delivered, kept whole (to DELIVERED_CHARS) unlike a tool's
    arguments; a call whose arguments are no canvas text (a comment) is summarised as a tool call."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        document = None
    if not isinstance(document, dict):
        return tool_call(recipient, raw)
    name = str(document.get("name") or document.get("title") or "canvas")
    updates = document.get("updates") if isinstance(document.get("updates"), list) else []
    texts = [document.get("content")] + [u.get("replacement") for u in updates if isinstance(u, dict)]
    body = "\n".join(t.strip() for t in texts if isinstance(t, str) and t.strip())
    return delivered(f"[canvas: {name}]", body) if body else tool_call(recipient, raw)


def delivered(label: str, body: str) -> str:
    """A document the assistant wrote (an artifact, a canvas) under its label, clipped only past
    DELIVERED_CHARS, as an attachment's text is."""
    if len(body) > DELIVERED_CHARS:
        body = body[: DELIVERED_CHARS - 1] + "…"
    return f"{label}\n{body}"


def read_claude_ai(path: Path, problems: list[str]) -> Iterator[Session]:
    for index, conversation in enumerate(json_array(path, problems)):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("chat_messages"), list):
            problems.append(f"{path}: conversation {index} has no chat_messages, skipped")
            continue
        turns = [turn for message in current_branch(conversation) if (turn := _claude_turn(message))]
        key = str(conversation.get("uuid") or index)
        title = str(conversation.get("name") or "") or _first_words(turns) or key
        yield Session(key, title, "claude-ai", turns, parse_time(conversation.get("created_at")))


def current_branch(conversation: dict[str, Any]) -> list[Any]:
    """Claude.ai's messages as the conversation now reads: newer exports link each message to the one
    it answers (`parent_message_uuid`), and an edited or regenerated message starts a sibling branch,
    all of it listed in `chat_messages`. Kept: the chain from the current leaf (`current_leaf_message_uuid`,
    else the latest message) up to the root, in file order. Without parent links, every message."""
    messages = [m for m in conversation["chat_messages"] if isinstance(m, dict)]
    parents = {m["uuid"]: m.get("parent_message_uuid") for m in messages if isinstance(m.get("uuid"), str)}
    if not any(isinstance(parent, str) for parent in parents.values()):
        return messages
    leaf = conversation.get("current_leaf_message_uuid")
    if leaf not in parents:
        leaf = _latest(messages)
    branch: set[str] = set()
    while leaf in parents and leaf not in branch:
        branch.add(leaf)
        leaf = parents[leaf]
    return [m for m in messages if m.get("uuid") in branch]


def _latest(messages: list[dict[str, Any]]) -> str | None:
    """The uuid of the message written last (by its time; among equals, the later in the file)."""
    timed = [(parse_time(m.get("created_at")) or 0.0, i, m.get("uuid")) for i, m in enumerate(messages)]
    return max(timed)[2] if timed else None


def _claude_turn(message: Any) -> Turn | None:
    if not isinstance(message, dict):
        return None
    pieces = []
    for block in message.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and str(block.get("text", "")).strip():
            pieces.append(block["text"].strip())
        elif kind == "tool_use":
            pieces.append(_claude_tool_use(str(block.get("name", "tool")), block.get("input")))
        elif kind == "tool_result":
            pieces.append(tool_result(block.get("content"), bool(block.get("is_error"))))
    if not message.get("content"):  # older exports: only the flattened text
        pieces.append(str(message.get("text") or "").strip())
    pieces.extend(_attachments(message.get("attachments")))
    text = "\n".join(p for p in pieces if p)
    if not text:
        return None
    speaker = "user" if message.get("sender") == "human" else "assistant"
    return Turn(speaker, text, str(message.get("uuid", "")), parse_time(message.get("created_at")))


def _claude_tool_use(name: str, arguments: Any) -> str:
    """A tool call summarised, but an artifact's text (what the assistant delivered: a letter, a
    document, code) kept whole, to DELIVERED_CHARS: `content` when written, `new_str` when edited."""
    if name == "artifacts" and isinstance(arguments, dict):
        body = arguments.get("content") if isinstance(arguments.get("content"), str) else arguments.get("new_str")
        if isinstance(body, str) and body.strip():
            title = arguments.get("title") or arguments.get("id") or "artifact"
            return delivered(f"[artifact: {title}]", body.strip())
    return tool_call(name, arguments)


def read_empty(path: Path, problems: list[str]) -> Iterator[Session]:
    """An export with no conversations (`[]`) holds no session: those stored from it leave."""
    return iter(())


ATTACHMENT_CHARS = 20_000  # of an attachment's text kept in its turn (a long turn is chunked at sentences)
DELIVERED_CHARS = ATTACHMENT_CHARS  # of an artifact's or a canvas's text


def _attachments(attachments: Any) -> list[str]:
    """Attached files as the turn shows them: `[attached: name]` followed by the text Claude.ai
    extracted from the file (what the user gave it to read: a document, a long paste), clipped."""
    pieces, bare = [], []
    for attached in attachments if isinstance(attachments, list) else []:
        if not isinstance(attached, dict):
            continue
        name = str(attached.get("file_name") or "attachment")
        content = str(attached.get("extracted_content") or "").strip()
        if not content:
            bare.append(name)
            continue
        if len(content) > ATTACHMENT_CHARS:
            content = content[: ATTACHMENT_CHARS - 1] + "…"
        pieces.append(f"[attached: {name}]\n{content}")
    if bare:
        pieces.append("[attached: " + ", ".join(bare) + "]")
    return pieces


def read_locomo(path: Path, problems: list[str]) -> Iterator[Session]:
    """LoCoMo samples: each `session_<n>` a session dated by `session_<n>_date_time`, turns by `dia_id`."""
    for index, sample in enumerate(json_array(path, problems)):
        conversation = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conversation, dict):
            problems.append(f"{path}: sample {index} has no conversation, skipped")
            continue
        sample_id = str(sample.get("sample_id") or index)
        people = " & ".join(str(conversation.get(k)) for k in ("speaker_a", "speaker_b") if conversation.get(k))
        numbers = sorted(
            int(key.split("_")[1])
            for key in conversation
            if key.startswith("session_") and key.split("_")[1].isdigit() and isinstance(conversation[key], list)
        )
        for number in numbers:
            when = conversation.get(f"session_{number}_date_time")
            turns = [turn for raw in conversation[f"session_{number}"] if (turn := locomo_turn(raw))]
            title = f"{people} · session {number}" + (f" ({when})" if when else "")
            yield Session(f"{sample_id}/session_{number}", title, "locomo", turns, parse_time(when))


def locomo_turn(raw: Any) -> Turn | None:
    """One LoCoMo turn as `mem ingest-chat` stores it (a shared photo's caption appended), or None
    for a turn without text. Public: bench/memory_events.py reads turns the same way."""
    if not isinstance(raw, dict) or not raw.get("text"):
        return None
    text = str(raw["text"])
    if raw.get("blip_caption"):
        text += f" [shares a photo: {raw['blip_caption']}]"
    return Turn(str(raw.get("speaker", "")), text, str(raw.get("dia_id", "")))


def _first_words(turns: list[Turn]) -> str:
    return title_from(next((t.text for t in turns if t.speaker == "user"), ""))
