"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

Records form a tree through `parentUuid`. The session as it stands is the chain from the last
message up to the root, plus the branches hanging off it that hold no typed user prompt (parallel
tool calls answer into side branches); a branch that starts with a user prompt off that chain was
edited away or rewound, and is dropped. Sub-agent work is kept apart: sidechain records and the
sub-agent messages streamed as `agent_progress` become sessions of their own (`<id>/agent-<agentId>`),
in which the prompts come from the parent agent (speaker `agent`), not the user.
Tool calls and results are summarised to their name, arguments and outcome; thinking is left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from crossmodalrag.connectors.chats import Session, Turn, title_from
from crossmodalrag.connectors.chats.jsonio import clip, json_lines, parse_time

TOOL_ARGS_CHARS = 240
TOOL_RESULT_CHARS = 240
JOIN_GAP_SECONDS = 30 * 60  # records of one speaker further apart than this are turns of their own


@dataclass
class Record:
    uuid: str
    parent: str | None
    speaker: str  # "user" (typed), "assistant", "tool"; "" for records that only link the tree
    text: str
    timestamp: float | None


def read_sessions(path: Path, problems: list[str]) -> Iterator[Session]:
    """The main session of a file, then one session per sub-agent."""
    parents: dict[str, str | None] = {}
    main: list[Record] = []
    agents: dict[str, list[Record]] = {}
    meta: dict[str, Any] = {}
    for _, record in json_lines(path, problems):
        uuid = record.get("uuid")
        if isinstance(uuid, str) and uuid in parents:
            continue  # a record written twice (a resumed session, a copied line) is one record
        if isinstance(uuid, str):
            parents[uuid] = record.get("parentUuid")
        _remember_meta(meta, record)
        if record.get("type") == "progress" and (record.get("data") or {}).get("type") == "agent_progress":
            data = record["data"]
            agent = str(data.get("agentId") or record.get("parentToolUseID") or "agent")
            inner = data.get("message") or {}
            parsed = _record(inner, f"{uuid}", record.get("timestamp"))
            if parsed:
                agents.setdefault(agent, []).append(parsed)
            continue
        parsed = _record(record, uuid, record.get("timestamp")) if isinstance(uuid, str) else None
        if parsed is None:
            continue
        if record.get("isSidechain"):
            agents.setdefault(str(record.get("agentId") or "sidechain"), []).append(parsed)
        else:
            main.append(parsed)
    key = str(meta.get("session_id") or path.stem)
    kept = live_records(main, parents)
    title = meta.get("summary") or _title(kept) or path.stem
    extra = {k: meta[k] for k in ("cwd", "git_branch", "version") if k in meta}
    if kept:
        yield _session(key, title, kept, extra)
    for agent, records in agents.items():
        records = [_from_parent_agent(r) for r in records]
        yield _session(f"{key}/agent-{agent}", f"{title} · sub-agent {agent}", records, {**extra, "sidechain": True})


def _from_parent_agent(record: Record) -> Record:
    """A sub-agent's "user" is the agent that started it (its task prompt), not the person: labelled
    `agent`, so "what did I ask" is not answered with an agent's instructions."""
    if record.speaker == "user":
        record.speaker = "agent"
    return record


def _remember_meta(meta: dict[str, Any], record: dict[str, Any]) -> None:
    if record.get("type") == "summary" and isinstance(record.get("summary"), str):
        meta.setdefault("summary", title_from(record["summary"]))
    for source, target in (
        ("sessionId", "session_id"),
        ("cwd", "cwd"),
        ("gitBranch", "git_branch"),
        ("version", "version"),
    ):
        if isinstance(record.get(source), str) and record[source]:
            meta.setdefault(target, record[source])


def _session(key: str, title: str, records: list[Record], metadata: dict[str, Any]) -> Session:
    turns: list[Turn] = []
    previous: Record | None = None
    for record in records:
        if turns and previous is not None and _one_turn(previous, record):
            turns[-1].text += "\n" + record.text  # one API response is split over several records
            if record.speaker == "user" and _typed(record.text):
                # "[Request interrupted by user]" then the prompt typed after it: the prompt is what is cited.
                turns[-1].turn_id, turns[-1].timestamp = record.uuid, record.timestamp
        else:
            turns.append(Turn(record.speaker, record.text, record.uuid, record.timestamp))
        previous = record
    start = next((r.timestamp for r in records if r.timestamp is not None), None)
    return Session(key, title, "claude-code", turns, start, metadata)


def _one_turn(previous: Record, record: Record) -> bool:
    """Do two consecutive records make one turn? The same speaker, written within JOIN_GAP_SECONDS:
    the records of one API response are milliseconds apart, an interruption and the prompt typed
    after it seconds or minutes. A session resumed weeks later starts a turn of its own, under its
    own id and date, rather than re-dating the last turn before it (and losing that turn's chunk)."""
    if previous.speaker != record.speaker:
        return False
    if previous.timestamp is None or record.timestamp is None:
        return True  # no times to tell them apart: as one response
    return abs(record.timestamp - previous.timestamp) <= JOIN_GAP_SECONDS


def _typed(text: str) -> bool:
    """Words the user wrote, not a marker Claude Code records for them ("[Request interrupted by user]")."""
    return not text.startswith("[")


def live_records(records: list[Record], parents: dict[str, str | None]) -> list[Record]:
    """The records of the conversation as it stands (see the module docstring), in file order."""
    if not records:
        return []
    chain: set[str] = set()
    node: str | None = records[-1].uuid
    while node is not None and node not in chain:
        chain.add(node)
        node = parents.get(node)
    typed = {r.uuid for r in records if r.speaker == "user"}
    verdict: dict[str, bool] = {}  # uuid -> is it on a live path

    def live(uuid: str) -> bool:
        path, node = [], uuid
        while node is not None and node not in chain and node not in verdict:
            path.append(node)
            node = parents.get(node)
        if node is not None and node in verdict:
            alive = verdict[node]
        else:  # reached the chain (or an unknown parent): dead if it left the chain with a typed prompt
            alive = not (node in chain and path and path[-1] in typed)
        for step in path:
            verdict[step] = alive
        return alive

    return [r for r in records if r.uuid in chain or live(r.uuid)]


def _record(record: dict[str, Any], uuid: str | None, timestamp: Any) -> Record | None:
    """A user or assistant record as one speaker's text; None for anything else."""
    kind = record.get("type")
    message = record.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict) or record.get("isMeta"):
        return None
    speaker, text = _content(kind, message.get("content"))
    if not text:
        return None
    return Record(str(uuid or message.get("id") or ""), record.get("parentUuid"), speaker, text, parse_time(timestamp))


def _content(kind: str, content: Any) -> tuple[str, str]:
    if isinstance(content, str) and kind == "user" and (output := _command_output(content)) is not None:
        return "tool", output  # what a local command printed: not the user's words
    if isinstance(content, str):
        return kind, _command(content) if kind == "user" else content
    speaker, pieces = kind, []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        block_type = block.get("type")
        if block_type == "text" and block.get("text", "").strip():
            pieces.append(block["text"].strip())
        elif block_type == "tool_use":
            pieces.append(tool_call(block.get("name", "tool"), block.get("input")))
        elif block_type == "tool_result":
            speaker = "tool"
            pieces.append(tool_result(block.get("content"), bool(block.get("is_error"))))
        elif block_type == "image":
            pieces.append("[image]")
    return speaker, "\n".join(pieces)


def _command(text: str) -> str:
    """A slash command's tags (`<command-name>/x</command-name>`), or a `!` shell command's
    (`<bash-input>ls</bash-input>`), as the command line the user typed."""
    if "<bash-input>" in text and "<command-name>" not in text:
        return "! " + text.split("<bash-input>", 1)[1].split("</bash-input>", 1)[0].strip()
    if "<command-name>" not in text:
        return text
    name = text.split("<command-name>", 1)[1].split("</command-name>", 1)[0]
    args = text.split("<command-args>", 1)[1].split("</command-args>", 1)[0] if "<command-args>" in text else ""
    return f"{name} {args}".strip()


OUTPUT_TAGS = re.compile(r"<(local-command-stdout|local-command-stderr|bash-stdout|bash-stderr)>(.*?)</\1>", re.DOTALL)
TERMINAL_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _command_output(text: str) -> str | None:
    """A slash command's or `!` shell command's output record (`<local-command-stdout>…`) as a tool
    result, `[result] …` or `[error] …`, terminal colour codes removed; None for any other text."""
    found = OUTPUT_TAGS.findall(text)
    if not found:
        return None
    pieces = [
        tool_result(TERMINAL_CODES.sub("", body).strip(), tag.endswith("stderr")) for tag, body in found if body.strip()
    ]
    return "\n".join(pieces)


def tool_call(name: str, arguments: Any) -> str:
    """`[tool Name] key=value …`: what was called and with what, one line."""
    if isinstance(arguments, dict):
        shown = " ".join(f"{key}={clip(_flat(value), 120)}" for key, value in arguments.items())
    else:
        shown = _flat(arguments)
    return f"[tool {name}] {clip(shown, TOOL_ARGS_CHARS)}".rstrip()


def tool_result(content: Any, is_error: bool) -> str:
    """`[result] first line …` or `[error] …`: the outcome, not the whole output."""
    if isinstance(content, list):
        content = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return f"[{'error' if is_error else 'result'}] {clip(_flat(content), TOOL_RESULT_CHARS)}".rstrip()


def _flat(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _title(records: list[Record]) -> str:
    first = next((r.text for r in records if r.speaker == "user" and not r.text.startswith(("/", "["))), "")
    return title_from(first)
