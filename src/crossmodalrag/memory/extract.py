"""L1 event extraction from one window of a source: the prompt, the output schema, validation.

Small models loop and ramble unless decoding is bounded, so the schema makes every field required
and caps every string and list: a grammar built from it (llama.cpp, Ollama, OpenAI-compatible
servers) cannot run to the token limit. Grammars fix syntax, not content, so the output is still
parsed (with a syntactic repair for backends without grammars) and validated here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from crossmodalrag.answer.llm import LLM, Generation

PROMPT_VERSION = "events-v4"
EVENT_TYPES = ("decision", "learning", "fix", "task", "change", "fact", "plan")
MAX_EVENTS = 8
MAX_STATEMENT = 160
MAX_CITED = 3
MAX_TOKENS = 560  # 8 events of ~50 tokens each (compact JSON), plus the JSON around them

SYSTEM = (
    "You list the events in a person's notes, code history and conversations: what they would want "
    "to remember later. An event is something a person did, started, finished, attended, bought, made, "
    "decided, learned, fixed or changed, plans to do, or that happened to them. Greetings, thanks, "
    "feelings, opinions, compliments and questions are not events. "
    f"List each distinct event once, usually 3 to {MAX_EVENTS}, for every person who speaks or writes; "
    "never the same event twice in other words. Each event is ONE short sentence that names the "
    "person it happened to (never 'I', 'we' or 'the speaker') and says concretely what happened: what, "
    "where, with whom. Summarize in your own words; do not copy a line. "
    f"type is one of: {', '.join(EVENT_TYPES)}. evidence lists the numbers of the [E#] excerpts "
    "that say it, best first. when is a date the text gives, else an empty string. project is the "
    "topic in one to three words. people are the people the event is about. Answer with compact JSON only."
    # Inline, and marked as another text: as an earlier chat turn it cost recall on trial sessions,
    # and unmarked a small model sometimes copied its events ("X signed up for the Berlin marathon").
    "\n\nExample, from another text (never list its events): [E1] Ada: Guess what, I finally moved my "
    "blog off WordPress! [E2] Ben: Nice! What did you pick? [E3] Ada: Hugo. Builds take 2 seconds now. "
    "I'll write about it for the team wiki next week. [E4] Ben: Cool. I signed up for the Berlin "
    "marathon yesterday. [E5] Ada: Wow, good luck!\nEvents: "
    '{"events":[{"type":"change","statement":"Ada moved her blog from WordPress to Hugo.","when":"",'
    '"project":"blog","people":["Ada"],"evidence":[1,3]},{"type":"plan","statement":"Ada plans to '
    'write about the blog move for the team wiki.","when":"","project":"blog","people":["Ada"],'
    '"evidence":[3]},{"type":"decision","statement":"Ben signed up for the Berlin marathon.","when":"",'
    '"project":"running","people":["Ben"],"evidence":[4]}]}'
)


def min_events(excerpts: int) -> int:
    """A floor the grammar enforces: small models stop after one event otherwise. One per four
    excerpts, at most 3: a short note is never pushed into inventing events."""
    return max(1, min(3, excerpts // 4))


def event_schema(excerpts: int) -> dict[str, Any]:
    """The output schema for a window of `excerpts` numbered excerpts: all fields required, capped."""
    event = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": list(EVENT_TYPES)},
            "statement": {"type": "string", "minLength": 8, "maxLength": MAX_STATEMENT},
            "when": {"type": "string", "maxLength": 32},
            "project": {"type": "string", "maxLength": 60},
            "people": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 40}},
            "evidence": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CITED,
                # An enum, not minimum/maximum: llama.cpp's grammar builder ignores integer bounds.
                "items": {"type": "integer", "enum": list(range(1, max(1, excerpts) + 1))},
            },
        },
        "required": ["type", "statement", "when", "project", "people", "evidence"],
    }
    return {
        "type": "object",
        "properties": {
            "events": {"type": "array", "minItems": min_events(excerpts), "maxItems": MAX_EVENTS, "items": event}
        },
        "required": ["events"],
    }


@dataclass
class Extracted:
    type: str
    statement: str
    when: str
    project: str
    people: list[str]
    cited: list[int]  # 0-based positions of the window's excerpts


@dataclass
class CallResult:
    events: list[Extracted] = field(default_factory=list)
    error: str = ""  # why the output was rejected (after the retry)
    calls: int = 0
    completion_tokens: int = 0
    prompt_chars: int = 0


def build_messages(title: str, when: str, excerpts: list[str]) -> list[dict[str, str]]:
    lines = [f"Source: {title}" + (f" ({when})" if when else ""), ""]
    lines += [f"[E{i}] {text}" for i, text in enumerate(excerpts, 1)]
    lines += ["", "Extract the events as JSON."]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def extract_window(llm: LLM, title: str, when: str, excerpts: list[str], constrained: bool = True) -> CallResult:
    """Events of one window: one call, and one retry if the output does not validate.
    `constrained=False` leaves decoding free (repair and validation only): the benchmark's baseline."""
    messages = build_messages(title, when, excerpts)
    schema = event_schema(len(excerpts)) if constrained else None
    generation = Generation(MAX_TOKENS, 0.0, json_schema=schema)
    result = CallResult(prompt_chars=sum(len(m["content"]) for m in messages))
    for _ in range(2):
        raw = "".join(llm.stream(messages, generation))
        result.calls += 1
        result.completion_tokens += int(getattr(llm, "usage", {}).get("completion_tokens", 0))
        try:
            result.events, result.error = parse_events(raw, len(excerpts)), ""
            return result
        except ValueError as error:
            result.error = str(error)
    return result


def parse_events(raw: str, excerpts: int) -> list[Extracted]:
    """Validated events from a model's output. Raises ValueError saying what is wrong."""
    data = _load_json(raw)
    if not isinstance(data, dict) or not isinstance(data.get("events"), list):
        raise ValueError("the output has no events list")
    if len(data["events"]) > MAX_EVENTS:
        raise ValueError(f"{len(data['events'])} events, more than {MAX_EVENTS}")
    return [_event(item, excerpts) for item in data["events"]]


def _event(item: Any, excerpts: int) -> Extracted:
    if not isinstance(item, dict):
        raise ValueError("an event is not an object")
    missing = [k for k in ("type", "statement", "when", "project", "people", "evidence") if k not in item]
    if missing:
        raise ValueError(f"an event lacks {', '.join(missing)}")
    kind = str(item["type"]).strip().lower()
    statement = " ".join(str(item["statement"]).split())
    if kind not in EVENT_TYPES:
        raise ValueError(f"unknown event type {kind!r}")
    if not 8 <= len(statement) <= MAX_STATEMENT:
        raise ValueError(f"a statement of {len(statement)} characters")
    cited = item["evidence"]
    if not isinstance(cited, list) or not isinstance(item["people"], list):
        raise ValueError("evidence and people must be lists")
    numbers = [_excerpt_number(value) for value in cited]
    if any(n is None or not 1 <= n <= excerpts for n in numbers):
        raise ValueError(f"evidence {cited} names excerpts outside E1..E{excerpts}")
    return Extracted(
        kind,
        statement,
        str(item["when"])[:32],
        str(item["project"])[:60],
        [str(p)[:40] for p in item["people"][:4]],
        sorted({n - 1 for n in numbers})[:MAX_CITED],
    )


def _excerpt_number(value: Any) -> int | None:
    """1 from 1, "1", "E1" or "[E1]" (backends without a grammar write any of them)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"\[?E?(\d+)\]?", str(value).strip(), re.I)
    return int(match.group(1)) if match else None


def _load_json(raw: str) -> Any:
    """JSON from a model's text: as is, else the outermost object without code fences and trailing commas."""
    try:
        return json.loads(raw)
    except ValueError:
        pass
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the output is not JSON")
    text = re.sub(r",\s*([}\]])", r"\1", raw[start : end + 1])
    try:
        return json.loads(text)
    except ValueError as error:
        raise ValueError(f"the output is not valid JSON ({error.msg})") from None
