"""Parsers of every chat format: the real samples, trees and branches, damage, secrets."""

from __future__ import annotations

import json
import random

import pytest

from crossmodalrag.connectors.chats import detect_format, open_chat
from crossmodalrag.connectors.chats.jsonio import parse_time
from crossmodalrag.connectors.chats.secrets import MASK, mask_secrets
from crossmodalrag.errors import ConnectorError
from tests.agent.chats import LOCOMO, SAMPLES, claude_record, needs_samples, write_jsonl


def sessions(path):
    chat = open_chat(path)
    return chat, list(chat.sessions())


@needs_samples
@pytest.mark.parametrize(
    "relative, expected",
    [
        ("claude-code/short.jsonl", "claude-code"),
        ("codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl", "codex"),
        ("chatgpt/conversations.json", "chatgpt"),
        ("claude-ai/conversations.json", "claude-ai"),
        ("README.md", None),
    ],
)
def test_formats_are_detected(relative, expected):
    assert detect_format(SAMPLES / relative) == expected


@needs_samples
def test_locomo_sessions_carry_dates_and_dia_ids():
    assert detect_format(LOCOMO) == "locomo"
    chat, found = sessions(LOCOMO)
    first = found[0]
    assert first.key.endswith("/session_1") and "session 1" in first.title
    assert first.turns[0].turn_id == "D1:1" and first.turns[0].speaker == "Caroline"
    assert first.timestamp is not None and len(found) > 100 and not chat.problems


@needs_samples
def test_claude_code_tool_calls_are_summarised_and_subagents_kept_apart():
    chat, found = sessions(SAMPLES / "claude-code/subagent.jsonl")
    main, agent = found
    assert main.title == "create the beads"  # the first typed prompt, not a slash command or an interruption
    assert "sub-agent" in agent.title and agent.metadata["sidechain"] and len(agent.turns) > 5
    assert agent.turns[0].speaker == "agent" and "user" not in {t.speaker for t in agent.turns}
    texts = "\n".join(t.text for t in main.turns)
    assert "[tool WebSearch] query=" in texts and "[result]" in texts
    assert all(len(line) < 400 for line in texts.splitlines() if line.startswith(("[tool", "[result")))
    assert "Let me research" not in texts  # thinking is left out
    assert {t.speaker for t in main.turns} == {"user", "assistant", "tool"}
    assert all(len(t.turn_id) == 36 for t in main.turns)  # Claude Code uuids


def test_a_sub_agents_task_prompt_is_the_agents_not_the_users(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "find the callers of cache_get"),
            claude_record("s1", None, "user", "Search the repo for cache_get", isSidechain=True, agentId="x"),
            claude_record(
                "s2", "s1", "assistant", [{"type": "text", "text": "Three callers."}], isSidechain=True, agentId="x"
            ),
        ],
    )
    _, (main, agent) = sessions(path)
    assert [t.speaker for t in main.turns] == ["user"]
    assert [(t.speaker, t.text) for t in agent.turns] == [
        ("agent", "Search the repo for cache_get"),
        ("assistant", "Three callers."),
    ]


def test_claude_code_follows_the_tree_and_drops_an_edited_away_branch(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "What port does the cache use?"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Port 6379."}]),
            claude_record("u2", "a1", "user", "Use port 7000 instead"),  # rewound and replaced below
            claude_record("a2", "u2", "assistant", [{"type": "text", "text": "Switched to 7000."}]),
            claude_record("u2b", "a1", "user", "Keep the default port"),
            claude_record(
                "t1", "u2b", "assistant", [{"type": "tool_use", "id": "x", "name": "Bash", "input": {"command": "ls"}}]
            ),
            claude_record(
                "t2", "t1", "assistant", [{"type": "tool_use", "id": "y", "name": "Read", "input": {"file_path": "a"}}]
            ),
            claude_record("r1", "t1", "user", [{"type": "tool_result", "tool_use_id": "x", "content": "a b"}]),
            claude_record(
                "r2", "t2", "user", [{"type": "tool_result", "tool_use_id": "y", "content": "boom", "is_error": True}]
            ),
            claude_record("a3", "r2", "assistant", [{"type": "text", "text": "Kept the default."}]),
        ],
    )
    _, (session,) = sessions(path)
    text = "\n".join(f"{t.speaker}: {t.text}" for t in session.turns)
    assert "7000" not in text  # the edited-away branch
    assert "[tool Bash] command=ls" in text and "[result] a b" in text and "[error] boom" in text  # parallel calls
    assert session.turns[0].turn_id == "u1" and session.title == "What port does the cache use?"


EARLIER, LATER = "2026-02-10T20:55:00Z", "2026-02-10T22:00:00Z"  # the prompt typed 7 minutes after


def test_a_prompt_after_an_interruption_is_cited_by_its_own_record_and_command_output_is_a_result(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "start the server"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Starting."}]),
            claude_record(
                "x1", "a1", "user", [{"type": "text", "text": "[Request interrupted by user]"}], timestamp=EARLIER
            ),
            claude_record("c1", "x1", "user", "<command-name>/mcp</command-name><command-args></command-args>"),
            claude_record(
                "o1", "c1", "user", "<local-command-stdout>\u001b[1mReconnected\u001b[22m</local-command-stdout>"
            ),
            claude_record("o2", "o1", "user", "<local-command-stdout></local-command-stdout>"),
            claude_record("b1", "o2", "user", "<bash-input>git status</bash-input>"),
            claude_record("b2", "b1", "user", "<bash-stdout>clean</bash-stdout><bash-stderr></bash-stderr>"),
            claude_record("p1", "b2", "user", "why does scrolling not work?", timestamp=LATER),
        ],
    )
    _, (session,) = sessions(path)
    assert [(t.speaker, t.turn_id, t.text) for t in session.turns[2:]] == [
        ("user", "c1", "[Request interrupted by user]\n/mcp"),
        ("tool", "o1", "[result] Reconnected"),
        ("user", "b1", "! git status"),
        ("tool", "b2", "[result] clean"),
        ("user", "p1", "why does scrolling not work?"),
    ]
    assert session.turns[2].timestamp == parse_time(claude_record("c1", None, "user", "")["timestamp"])
    assert session.turns[-1].timestamp == parse_time(LATER)


def test_a_session_resumed_weeks_later_starts_a_turn_of_its_own(tmp_path):
    # The new prompt was glued onto the last old record ("[Request interrupted ...]", February),
    # which then took the new turn's id and March date: its chunk was gone, --before missed its text.
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "start the server"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Starting."}]),
            claude_record("x1", "a1", "user", [{"type": "text", "text": "[Request interrupted by user]"}]),
            claude_record("r1", "x1", "user", "Let's resume: listen on port 4471", timestamp="2026-03-20T10:00:00Z"),
        ],
    )
    _, (session,) = sessions(path)
    assert [(t.turn_id, t.text) for t in session.turns[2:]] == [
        ("x1", "[Request interrupted by user]"),
        ("r1", "Let's resume: listen on port 4471"),
    ]
    assert session.turns[2].timestamp == parse_time(claude_record("x1", None, "user", "")["timestamp"])


def test_a_record_written_twice_is_read_once(tmp_path):
    records = [claude_record("u1", None, "user", "first question"), claude_record("a1", "u1", "assistant", "an answer")]
    path = write_jsonl(tmp_path / "s.jsonl", [record for record in records for _ in range(2)])
    _, (session,) = sessions(path)
    assert [t.text for t in session.turns] == ["first question", "an answer"]


def test_a_malformed_line_is_reported_with_its_number_and_the_rest_reads(tmp_path):
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [
            claude_record("u1", None, "user", "first question"),
            '{"type": "assistant", "uuid": "a1", "parentUu',
            claude_record("u2", "u1", "user", "second question"),
        ],
    )
    chat, (session,) = sessions(path)
    assert [t.text for t in session.turns] == ["first question\nsecond question"]
    assert chat.problems == [f"{path}:2: not valid JSON, skipped (a truncated or damaged line)"]


def test_a_session_file_opening_with_a_byte_order_mark_keeps_its_first_record(tmp_path):
    records = [claude_record("u1", None, "user", "first question"), claude_record("a1", "u1", "assistant", "an answer")]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # as some Windows editors save it
    chat, (session,) = sessions(path)
    assert [t.text for t in session.turns] == ["first question", "an answer"] and chat.problems == []


def test_a_line_that_is_not_utf8_is_read_with_its_bytes_replaced_and_said_so(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [claude_record("u1", None, "user", "a café near the office")])
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"caf\\u00e9", b"caf\xe9").replace("café".encode(), b"caf\xe9"))  # Latin-1
    chat, (session,) = sessions(path)
    assert session.turns[0].text == "a caf\ufffd near the office"
    assert chat.problems == [f"{path}:1: not UTF-8, read with its undecodable bytes replaced"]


def test_a_session_whose_first_record_is_longer_than_the_sniffed_head_is_still_claude_code(tmp_path):
    # A pasted log in the first prompt: the first 64 KB end inside the first line, which must still parse.
    log = 'ERROR timeout connecting to db-7 "chat_messages" ' * 3000
    path = write_jsonl(
        tmp_path / "big.jsonl",
        [
            claude_record("u1", None, "user", f"here is the log: {log} the root cause is the expired cert"),
            claude_record("a1", "u1", "assistant", [{"type": "text", "text": "Renew the certificate."}]),
        ],
    )
    assert path.stat().st_size > 64 * 1024 and detect_format(path) == "claude-code"
    _, (session,) = sessions(path)
    assert [t.speaker for t in session.turns] == ["user", "assistant"]


def test_a_chatgpt_export_cut_before_its_first_current_node_is_still_chatgpt(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text('[{"title": "Cache", "create_time": 1700000000.0, "mapping": {"m1": {"id": "m1", "mess')
    assert detect_format(path) == "chatgpt"
    chat, found = sessions(path)
    assert found == [] and chat.problems  # nothing complete to keep, and said so


@needs_samples
def test_codex_keeps_one_copy_of_each_message_and_no_injected_context():
    path = next((SAMPLES / "codex").glob("rollout-2026-02-23T20-34-25*.jsonl"))
    _, (session,) = sessions(path)
    users = [t for t in session.turns if t.speaker == "user"]
    assert len(users) == 1 and users[0].text.startswith("[REDACTED_MESSAGE len=98")  # the typed message only
    texts = "\n".join(t.text for t in session.turns)
    assert "len=4508" not in texts  # developer instructions
    assert "len=5296" not in texts  # the injected AGENTS.md-style user item
    assert texts.count("sha=2a40230f") == 1  # the assistant message, not also its event_msg copy
    assert "[tool mcp__cloud-associates__search_workflows]" in texts
    assert users[0].turn_id == "019c8bfe-ed40-7a21-b57f-6447436c5881/L10"  # the Codex turn id and the line


@needs_samples
def test_chatgpt_reads_the_current_branch_only():
    _, found = sessions(SAMPLES / "chatgpt/conversations.json")
    logo = next(s for s in found if s.title.startswith("Logo design"))
    conversation = next(
        c for c in json.loads((SAMPLES / "chatgpt/conversations.json").read_text()) if c["title"] == logo.title
    )
    on_path, node = set(), conversation["current_node"]
    while node:
        on_path.add(node)
        node = conversation["mapping"][node]["parent"]
    assert {t.turn_id for t in logo.turns} <= on_path
    off_path = {n for n in conversation["mapping"] if n not in on_path}
    assert off_path and not {t.turn_id for t in logo.turns} & off_path
    assert logo.turns[0].speaker == "user" and logo.timestamp is not None


@needs_samples
def test_claude_ai_keeps_text_without_thinking():
    _, (session,) = sessions(SAMPLES / "claude-ai/conversations.json")
    assert [t.speaker for t in session.turns] == ["user", "assistant"]
    assert "saliva" in session.turns[0].text and "The user is asking" not in session.turns[1].text


ROOT = "00000000-0000-4000-8000-000000000000"  # Claude.ai's parent of a conversation's first message


def claude_ai_message(uuid, parent, sender, text, when):
    return {
        "uuid": uuid,
        "parent_message_uuid": parent,
        "sender": sender,
        "text": text,
        "content": [{"type": "text", "text": text}],
        "created_at": when,
    }


def test_claude_ai_reads_the_branch_ending_at_the_latest_message(tmp_path):
    # The first request was edited: both branches are listed, only the second was kept by the user.
    messages = [
        claude_ai_message("h1", ROOT, "human", "Book the flight to Lisbon", "2026-04-01T10:00:00Z"),
        claude_ai_message("a1", "h1", "assistant", "Booked Lisbon", "2026-04-01T10:00:05Z"),
        claude_ai_message("h1b", ROOT, "human", "Book the flight to Porto instead", "2026-04-01T10:05:00Z"),
        claude_ai_message("a1b", "h1b", "assistant", "Booked Porto", "2026-04-01T10:05:05Z"),
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"uuid": "c1", "name": "Flight", "chat_messages": messages}]))
    _, (session,) = sessions(path)
    assert [t.turn_id for t in session.turns] == ["h1b", "a1b"]
    # The export names its current leaf: that branch wins over a later-written one.
    path.write_text(
        json.dumps([{"uuid": "c1", "name": "Flight", "current_leaf_message_uuid": "a1", "chat_messages": messages}])
    )
    _, (session,) = sessions(path)
    assert [t.turn_id for t in session.turns] == ["h1", "a1"]
    # Older exports have no parent links: every message, in the file's order.
    for message in messages:
        del message["parent_message_uuid"]
    path.write_text(json.dumps([{"uuid": "c1", "name": "Flight", "chat_messages": messages}]))
    _, (session,) = sessions(path)
    assert [t.turn_id for t in session.turns] == ["h1", "a1", "h1b", "a1b"]


def test_claude_ai_keeps_the_text_extracted_from_an_attachment_clipped(tmp_path):
    message = claude_ai_message("h1", ROOT, "human", "Is the deposit refundable?", "2025-06-01T10:00:00Z")
    message["attachments"] = [
        {"file_name": "lease.pdf", "extracted_content": "The deposit of 2400 EUR is non-refundable after 30 days."},
        {"file_name": "paste.txt", "extracted_content": "x" * 50_000},
        {"file_name": "photo.png"},
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"uuid": "c1", "name": "Lease", "chat_messages": [message]}]))
    _, (session,) = sessions(path)
    text = session.turns[0].text
    assert "[attached: lease.pdf]\nThe deposit of 2400 EUR is non-refundable" in text
    assert "[attached: photo.png]" in text and 20_000 < len(text) < 21_000 and "x…" in text


def chatgpt_export(path, messages):
    """A ChatGPT export of one conversation whose messages (id, role, content, recipient) follow each other."""
    mapping, parent = {}, None
    for index, (node, role, content, recipient) in enumerate(messages):
        message = {"id": node, "author": {"role": role}, "create_time": 1740000000 + index, "content": content}
        mapping[node] = {"id": node, "parent": parent, "children": [], "message": {**message, "recipient": recipient}}
        if parent:
            mapping[parent]["children"] = [node]
        parent = node
    path.write_text(json.dumps([{"id": "c1", "title": "T", "create_time": 1740000000, "mapping": mapping}]))
    return path


def test_an_artifact_and_a_canvas_are_kept_whole_and_tool_arguments_clipped(tmp_path):
    letter = (
        "Dear committee,\n" + "I built data pipelines for logistics. " * 40 + "My salary expectation is 78,000 EUR."
    )
    message = claude_ai_message("a1", ROOT, "assistant", "Here is a draft.", "2025-03-01T10:00:00Z")
    message["content"] += [
        {"type": "tool_use", "name": "artifacts", "input": {"id": "cl", "title": "Cover letter", "content": letter}},
        {"type": "tool_use", "name": "web_search", "input": {"query": "q" * 500}},
    ]
    claude = tmp_path / "conversations.json"
    claude.write_text(json.dumps([{"uuid": "c1", "name": "Letter", "chat_messages": [message]}]))
    _, (session,) = sessions(claude)
    text = session.turns[0].text
    assert f"[artifact: Cover letter]\n{letter.strip()}" in text
    assert "[tool web_search] query=" + "q" * 100 in text and "q" * 200 not in text
    plan = "# Lisbon\n" + "Trams and pastries. " * 40 + "Final day: ferry to Cacilhas."
    canvas = {"content_type": "code", "language": "json", "text": json.dumps({"name": "trip", "content": plan})}
    chatgpt = chatgpt_export(
        tmp_path / "chatgpt.json",
        [("u", "user", {"content_type": "text", "parts": ["Plan my trip"]}, "all"),
         ("c", "assistant", canvas, "canmore.create_textdoc")],
    )  # fmt: skip
    _, (session,) = sessions(chatgpt)
    assert session.turns[1].text == f"[canvas: trip]\n{plan}"


def test_a_chatgpt_voice_turn_keeps_its_transcription_and_only_images_read_as_images(tmp_path):
    def spoken(text):
        return {
            "content_type": "multimodal_text",
            "parts": [
                {"content_type": "audio_transcription", "text": text, "direction": "in"},
                {"content_type": "audio_asset_pointer", "asset_pointer": "sediment://file_x", "format": "wav"},
            ],
        }

    photo = {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x", "width": 10}
    path = chatgpt_export(
        tmp_path / "conversations.json",
        [("u", "user", spoken("How often should I water the lavender?"), "all"),
         ("a", "assistant", spoken("About once a week in July."), "all"),
         ("p", "user", {"content_type": "multimodal_text", "parts": [photo, "What is this plant?"]}, "all")],
    )  # fmt: skip
    _, (session,) = sessions(path)
    assert [t.text for t in session.turns] == [
        "How often should I water the lavender?",
        "About once a week in July.",
        "[image]\nWhat is this plant?",
    ]


def test_an_export_is_read_in_utf8_or_utf16_and_refused_in_another_encoding(tmp_path):
    message = claude_ai_message("h1", ROOT, "human", "Bleep café \ufffd", "2025-06-01T10:00:00Z")
    path = tmp_path / "conversations.json"
    text = json.dumps([{"uuid": "c1", "name": "Cafe", "chat_messages": [message]}], ensure_ascii=False)
    path.write_bytes(text.encode())  # a replacement character the file really holds is no problem
    chat, (session,) = sessions(path)
    assert not chat.problems and session.turns[0].text == "Bleep café \ufffd"
    for encoding in ("utf-16", "utf-16-be", "utf-8-sig"):  # Notepad's "Unicode", its big-endian one, UTF-8 BOM
        bom = "\ufeff" if encoding != "utf-16" else ""  # Python's "utf-16" writes its own
        path.write_bytes((bom + text).encode(encoding))
        assert detect_format(path) == "claude-ai"
        chat, (session,) = sessions(path)
        assert not chat.problems and session.turns[0].text == "Bleep café \ufffd"
    path.write_bytes(text.replace("\ufffd", "").encode("cp1252"))  # re-saved by an editor: é is one byte
    with pytest.raises(ConnectorError, match=r"not valid UTF-8 \(byte \d+\)") as refused:
        open_chat(path)
    assert "re-save it as UTF-8" in refused.value.hint
    assert text.encode("cp1252", "replace")[int(refused.value.message.split("byte ")[1].split(")")[0])] == 0xE9


def test_a_zip_archive_is_refused_with_a_hint_to_unzip_it(tmp_path):
    import zipfile

    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("conversations.json", "[]")
    with pytest.raises(ConnectorError, match="a zip archive") as refused:
        open_chat(archive)
    assert "unzip it first" in refused.value.hint


def test_a_truncated_export_keeps_its_complete_conversations(tmp_path):
    conversation = {
        "uuid": "c1",
        "name": "One",
        "created_at": "2025-07-06T03:10:13Z",
        "chat_messages": [
            {
                "uuid": "m1",
                "sender": "human",
                "text": "hello there",
                "content": [{"type": "text", "text": "hello there"}],
            }
        ],
    }
    whole = json.dumps([conversation, {**conversation, "uuid": "c2"}])
    path = tmp_path / "conversations.json"
    path.write_text(whole[: len(whole) - 40])
    chat, found = sessions(path)
    assert [s.key for s in found] == ["c1"] and "truncated after 1 complete" in chat.problems[0]


def test_json_nested_past_the_recursion_limit_is_a_problem_not_a_crash(tmp_path):
    deep = '{"x":' * 100_000 + "1" + "}" * 100_000
    lines = write_jsonl(
        tmp_path / "s.jsonl",
        [claude_record("u1", None, "user", "first question"), deep, claude_record("u2", "u1", "user", "second")],
    )
    chat, (session,) = sessions(lines)
    assert [t.text for t in session.turns] == ["first question\nsecond"]
    assert chat.problems == [f"{lines}:2: JSON nested too deeply, skipped"]
    alone = tmp_path / "deep.json"
    alone.write_text(deep)
    with pytest.raises(ConnectorError, match="not a chat transcript"):
        open_chat(alone)
    conversation = {"uuid": "c1", "name": "One", "created_at": "2025-07-06T03:10:13Z", "chat_messages": []}
    export = tmp_path / "conversations.json"
    export.write_text(f"[{json.dumps(conversation)}, {'[' * 100_000}{']' * 100_000}]")
    chat, found = sessions(export)
    assert "conversation 2 is JSON nested too deeply" in chat.problems[-1]


def test_an_empty_session_and_an_unknown_file(tmp_path):
    empty = write_jsonl(tmp_path / "e.jsonl", [{"type": "file-history-snapshot", "messageId": "x", "sessionId": "s"}])
    assert sessions(empty)[1] == []
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    with pytest.raises(ConnectorError, match="not a chat transcript"):
        open_chat(other)


def test_secrets_are_masked_and_counted_and_private_spans_dropped(tmp_path):
    key = "sk-proj-" + "a1B2c3D4" * 5
    path = write_jsonl(
        tmp_path / "s.jsonl",
        [claude_record("u1", None, "user", f"use {key} and password: hunter2hunter <private>my pin 1234</private> ok")],
    )
    chat, (session,) = sessions(path)
    text = session.turns[0].text
    assert key not in text and "hunter2hunter" not in text and "1234" not in text
    assert text.count(MASK) == 2 and chat.secrets_masked == 2


@pytest.mark.parametrize("first", ["deploy with {key} <private>I am job hunting</private> now", "<private>all of it"])
def test_a_title_from_the_first_message_is_cleaned_as_the_turns_are(tmp_path, first):
    key = "ghp_" + "a1B2c3D4" * 5
    path = write_jsonl(tmp_path / "s.jsonl", [claude_record("u1", None, "user", first.format(key=key))])
    chat, sessions_read = sessions(path)
    for session in sessions_read:
        assert key not in session.title and "job hunting" not in session.title and "private" not in session.title
        assert session.title.strip()


@pytest.mark.parametrize(
    "text",
    [
        "ghp_" + "x" * 36,
        "AKIAIOSFODNN7EXAMPLE",
        "Authorization: Bearer abcdefghijklmnop1234",
        "export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv",
        "xoxb-1234567890-abcdefghij",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_common_secret_shapes_are_masked(text):
    masked, count = mask_secrets(text)
    assert count >= 1 and MASK in masked


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("export AWS_SECRET_ACCESS_KEY=wJalrXbOK7MDENGbPxRfiCY", "wJalrXbOK7"),
        ('SECRET_KEY = "django-insecure-abc123xyz"', "abc123xyz"),
        ("STRIPE_KEY=sk_live_abcdefghijklmnopqrstuvwx", "abcdefghijklmnop"),
        ("DATABASE_URL=postgres://admin:S3cretPw@db.example.com/x", "S3cretPw"),
        ("curl -u admin:S3cretPw3 https://example.com", "S3cretPw3"),
        ("psql --password S3cretPw2", "S3cretPw2"),
        ("mysql -u root -pMyS3cretPass123 shop", "MyS3cretPass123"),
        ("mysqldump -h db -P 3306 -u app -p'hunter22' --all-databases", "hunter22"),
        ('{"clientSecret": "0a1b2c3d4e"}', "0a1b2c3d4e"),
        ("my password is Tr0ub4dor&3horse, right?", "Tr0ub4dor&3horse"),
        ("AWS secret wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFI"),
    ],
)
def test_secrets_in_longer_names_options_and_urls_are_masked(text, secret):
    masked, count = mask_secrets(text)
    assert count == 1 and secret not in masked and MASK in masked


def test_secrets_beside_and_inside_long_dotted_and_dashed_runs_are_masked():
    # Pasted payloads (base64url, uuid lists, minified names) are runs of name characters joined by
    # '-' and '.'; the name and URL patterns once restarted at every segment of such a run and took
    # minutes on this ~200 KB text. Only the real secrets around the runs may change.
    rng = random.Random(7)
    run = "".join(f"{rng.getrandbits(16):04x}{rng.choice('-.')}" for _ in range(20_000))
    text = (
        f"payload {run}\nexport db.password=hunter2prod\n"
        f"{run}api_key: 'Zq9abcdef123'\n"
        f"fetch postgres://admin:Sup3rS3cret@db.internal/{run}"
    )
    expected = (
        f"payload {run}\nexport db.password={MASK}\n"
        f"{run}api_key: '{MASK}'\n"
        f"fetch postgres://admin:{MASK}@db.internal/{run}"
    )
    assert len(text) > 200_000
    assert mask_secrets(text) == (expected, 3)


def test_a_password_said_in_words_over_a_long_run_of_dots_is_masked_in_linear_time():
    # The value's shortest end was looked for at every dot, reading the rest of the run each time:
    # ~12 s for 20 KB of dots (a pasted progress bar), minutes for this text. Same matches as before.
    dots = "." * 60_000
    text = f"the password is {dots}done; the password was Tr0ub4dor&3. and passcode is abc12!!"
    expected = f"the password is {MASK}; the password was {MASK}. and passcode is {MASK}!"
    assert mask_secrets(text) == (expected, 3)


@pytest.mark.parametrize(
    "text",
    [
        "Why is the DynamoDB query slow? The sort key is LastModifiedTimestamp2024.",
        "Use the token type AuthenticationResultV2Handler and query by partition first.",
        "The secret sauce is ConnectionPoolManager2Factory here.",
    ],
)
def test_an_identifier_named_after_a_key_or_token_is_not_masked(text):
    assert mask_secrets(text) == (text, 0)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("my token is ghp_" + "a1B2c3D4" * 5, "a1B2c3D4"),
        ("my token is 8f3KdP0qLz9XwB2mN7vR, keep it safe", "8f3KdP0qLz9XwB2mN7vR"),
        ("the API key: 9sKd83LqPz0XwB2mN7vRt", "9sKd83LqPz0XwB2mN7vRt"),
        ("here is the key zQ4vN8bX2kL9pR7tW3yM6cF1 for prod", "zQ4vN8bX2kL9pR7tW3yM6cF1"),
        ("password: hunter2", "hunter2"),
        ("AWS key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AKIAIOSFODNN7"),
        ("AWS key AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFI"),
    ],
)
def test_keys_and_tokens_said_or_assigned_are_still_masked(text, secret):
    masked, count = mask_secrets(text)
    assert count >= 1 and secret not in masked and MASK in masked


def test_ordinary_prose_is_not_masked():
    text = (
        "The password policy says rotate monthly; the api key lives in the vault. sk-learn is a library. "
        "My secretary: Jennifer Lopez. See http://localhost:8080/docs and git@github.com:org/repo.git; max_tokens=512. "
        "The password is stored in the vault, the password is Secret to no one; secret commit "
        "0123456789abcdef0123456789abcdef01234567, the key is under the mat. "
        "mysql -u root -p shop asks for it; run mysql, then grep -pattern."
    )
    assert mask_secrets(text) == (text, 0)
