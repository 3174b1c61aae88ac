"""L1 event extraction from one window of a source: the prompt, the output schema, validation.

Small models loop and ramble unless decoding is bounded, so the schema makes every field required
and caps every string and list: a grammar built from it (llama.cpp, Ollama, OpenAI-compatible
servers) cannot run to the token limit. Grammars fix syntax, not content, so the output is still
parsed (with a syntactic repair for backends without grammars) and validated here.

The model writes only what needs reading: the sentence, its type and the excerpts it cites. When,
project and people are known without it (the source's date and project, the person an event is
listed under), and each token written cost about as much CPU as 5 read (docs/benchmarks.md).
In a conversation the events are listed under each speaker's name: asked for one flat list, the
model gave most events to whoever spoke first.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Collection

from crossmodalrag.answer.llm import LLM, Generation, LLMError, LLMUnavailable
from crossmodalrag.answer.llm.base import LLMOutOfTime
from crossmodalrag.memory.provenance import SPEAKER

PROMPT_VERSION = "events-v8"
EVENT_TYPES = ("decision", "learning", "fix", "task", "change", "fact", "plan")
MAX_EVENTS = 8
MAX_STATEMENT = 200  # characters; the grammar counts a mark inside a word ("0.5") with its neighbour
MAX_CITED = 3
MAX_SPEAKERS = 4  # listed by name; a window with more speakers gets one flat list
MAX_TOKENS = 560  # 8 events of at most ~60 tokens each, plus the JSON around them
# A speaker the grammar can use as a key: letters, with inner spaces, apostrophes or hyphens
# ("Mary-Ann O'Neil"); anything else would need escaping in the grammar.
NAME = re.compile(r"[^\W\d_]+(?:[ '-][^\W\d_]+){0,3}")
TURN = re.compile("^" + SPEAKER.pattern, re.M)  # a turn's speaker, as the provenance check reads it
# The chat connectors' speaker for what a command printed or a tool returned: no person. Listed as one,
# the schema made the model write events for it ("tool uses the command mix phx.server", people ['tool']).
NOT_PEOPLE = frozenset({"tool"})
COPIED = ("WordPress", "Hugo", "team wiki", "Berlin")  # the example's own words (see SYSTEM)
PLACEHOLDERS = ("<one sentence", "<type>", "<E numbers>")  # answer_shape's
# "Ann asked Ben if/how/what ...": a question reported, which the prompt says is no event; the grammar's
# floor of events per speaker has the model fill up with them (events-v5: 8 of 141 benchmark events, 7 of 45
# on 14 other LoCoMo sessions, none matching a gold event). Reported in the present too ("user asks if
# mix phx.server doesn't seem to start", from a Claude Code session). Not the bare "ask": "Ann will ask
# the landlord about the lease" is a plan; nor "asked Bob to review the PR", a task (no question word).
ASKED = re.compile(
    r"\b(?:ask(?:s|ed|ing)|inquir(?:es|ed|ing)|wonder(?:s|ed|ing))\b(?: \w+){0,3}"
    r" (?:if|whether|about|how|what|why|when|where|who|which)\b",
    re.I,
)
AGREEMENT = {"were": "was", "are": "is", "have": "has"}  # "Ann and Ben were ..." -> "Ann was ..."
# "Ann shared a photo of her dog": `mem ingest-chat` appends a shared photo's caption to its turn
# ("[shares a photo: ...]"); the model made the sharing an event (three of eight on one LoCoMo session).
# Said in the prompt ("sharing a photo is no event"), it made the model write more of them ("Melanie
# asked Caroline to show her a photo of Oliver": six of eight events on one session), so it is not.
SHARED = re.compile(r"\b(?:shar|show|post|sen[dt])\w* (?:\w+ ){0,3}(?:photo|picture|pic|image|snap)", re.I)
# The caption itself, as connectors/chats/exports.py appends it: kept in the chunk (retrieval reads it),
# left out of the prompt. Shown captions, the model described the photos instead of the events: on four
# LoCoMo sessions 10 of 23 events were "X shares a photo of ..." (6 of 7 on one of them).
CAPTION = re.compile(r" ?\[shares a photo: [^\]]*\]")
# What may end a statement: ASCII marks, and the full stops and marks of scripts that do not use them
# (CJK 。！？ and their half/full-width forms, Devanagari ।, Arabic ؟ and Urdu ۔, Ethiopic ።, Myanmar ။).
# With only . ! ? a Chinese or Japanese sentence ending in 。 could not close its string: the model
# padded it with its note's #tags and [E#] numbers up to the length cap ("…作成します。#移行#移行#移行…").
SENTENCE_ENDS = ".!?。！？｡．।؟۔።။"
# What the statement grammar (_event) counts as one of its MAX_STATEMENT - 1 units before the end mark.
GRAMMAR_UNIT = re.compile(rf'[.!?] [a-z0-9]|[.!?][^"\\\n {SENTENCE_ENDS}]|.', re.S)
# #tags, [E#] citations or E# numbers after the sentence has ended: what that padding left behind, and
# what a backend without a grammar appends. A "#12" inside the sentence ("fixed bug #12.") stays.
TRAILER = re.compile(rf"(?<=[{SENTENCE_ENDS}])(?:\s*(?:#[^\s#]+|\[E\d+\]|E\d+\b))+\W*$")
# A stretch of 2-20 characters written four times in a row ("#移行#移行#移行#移行", "the the the the"):
# a model looping inside the grammar, not a sentence.
REPEATED = re.compile(r"(.{2,20}?)\1{3,}")

SYSTEM = (
    "You keep a person's memory. From their notes, code history and conversations, list the events "
    "worth remembering later. An event is one concrete thing a person did, started, finished, attended, "
    "bought, made, won, lost, decided, learned, fixed or changed, plans to do, or that happened to them, "
    "with its object: what, where, with whom. Greetings, thanks, feelings, opinions, compliments, advice "
    "and questions are not events. Each event is ONE short sentence in the third person, in your own "
    "words, that names the person (never 'I', 'we' or 'the speaker'). List each distinct event once: "
    "never the same event twice in other words. In a conversation, list under each speaker's name only "
    "what that speaker said about their own life; an event they tell about someone else names that person. "
    f"type is one of: {', '.join(EVENT_TYPES)}. cite lists the numbers of the [E#] excerpts that say it, "
    "best first. Answer with compact JSON only."
    # Inline, and marked as another text: as an earlier chat turn it cost recall on trial sessions.
    # Without it the model copied whole turns; with it, it sometimes copies the example's events when
    # a speaker has none of their own, so those are dropped unless the source says them (COPIED).
    "\n\nExample, from another text (never list its events): [E1] Ada: Guess what, I finally moved my "
    "blog off WordPress! [E2] Ben: Nice! What did you pick? [E3] Ada: Hugo. Builds take 2 seconds now. "
    "I'll write about it for the team wiki next week. [E4] Ben: Cool. I signed up for the Berlin "
    "marathon yesterday. [E5] Ada: Wow, good luck!\nEvents: "
    '{"Ada":[{"event":"Ada moved her blog from WordPress to Hugo.","type":"change","cite":[1,3]},'
    '{"event":"Ada plans to write about the blog move for the team wiki.","type":"plan","cite":[3]}],'
    '"Ben":[{"event":"Ben signed up for the Berlin marathon.","type":"decision","cite":[4]}]}'
)


def speakers(excerpts: list[str]) -> dict[str, int]:
    """The speakers of a conversation window ("Ann: ..." lines) and their turns, most turns first
    (at most MAX_SPEAKERS), or none when one has a name the grammar cannot carry. A name counts when
    it starts an excerpt (a turn) or at least two lines: a line inside a turn such as "Note: bring
    snacks" names no speaker. Tool output ("tool: ...") is no speaker either."""
    counts: dict[str, int] = {}
    for text in excerpts:
        for name in TURN.findall(text):
            counts[name.strip()] = counts.get(name.strip(), 0) + 1
    openers = {match.group(1).strip() for match in map(SPEAKER.match, excerpts) if match}
    counts = {name: n for name, n in counts.items() if (n > 1 or name in openers) and name not in NOT_PEOPLE}
    if not counts or len(counts) > MAX_SPEAKERS or not all(NAME.fullmatch(n) for n in counts):
        return {}
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def min_events(excerpts: int, most: int = 3, per: int = 4) -> int:
    """A floor the grammar enforces: small models stop after one event otherwise. One per `per`
    excerpts (a speaker's: their turns), at most `most`: a short note is never pushed into inventing events."""
    return max(1, min(most, excerpts // per))


def _event(excerpts: int) -> dict[str, Any]:
    # One sentence: it ends with . ! or ?, and only there may its string close. Left free, the model
    # copied whole turns ("Nate is going to hike this weekend. We're checking out..."), and wrote a
    # title's opening quote unescaped ('watched "Inception"'), which ended the sentence early. A mark
    # inside a word ("0.5", "Node.js", "e.g") or before a lowercase word ("e.g. the") does not end it:
    # forbidden outright, notes' events were cut there ("MRR = 1/1 = 1.", "a search system, e.").
    # The other scripts' marks (SENTENCE_ENDS) only end it: CJK puts no space after them.
    ends = SENTENCE_ENDS
    body = f'([^"\\\\\\n{ends}]|[.!?][^"\\\\\\n {ends}]|[.!?] [a-z0-9]){{7,{MAX_STATEMENT - 1}}}'
    return {
        "type": "object",
        "properties": {
            "event": {"type": "string", "pattern": f"^{body}[{ends}]$"},
            "type": {"type": "string", "enum": list(EVENT_TYPES)},
            "cite": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CITED,
                # An enum, not minimum/maximum: llama.cpp's grammar builder ignores integer bounds.
                "items": {"type": "integer", "enum": list(range(1, max(1, excerpts) + 1))},
            },
        },
        "required": ["event", "type", "cite"],
    }


def event_schema(excerpts: int, people: dict[str, int] | None = None) -> dict[str, Any]:
    """The output schema for a window of `excerpts` numbered excerpts: all fields required, capped.
    With `people` (a conversation's speakers and their turns), one list per person, MAX_EVENTS in all."""
    if not people:
        events = {"type": "array", "minItems": min_events(excerpts), "maxItems": MAX_EVENTS, "items": _event(excerpts)}
        return {"type": "object", "properties": {"events": events}, "required": ["events"]}
    each = MAX_EVENTS // len(people)
    # One event per three of a speaker's turns (at most 3): with a floor of 2 the model wrote the
    # floor and stopped, ~4.7 events a LoCoMo session where gold has up to 6. One per two turns (at
    # most 4) wrote 40% more tokens and kept no more events: the extra ones were restatements.
    lists = {
        p: {"type": "array", "minItems": min(each, min_events(turns, 3, 3)) if turns > 1 else 0, "maxItems": each,
            "items": _event(excerpts)}
        for p, turns in people.items()
    }  # fmt: skip
    return {"type": "object", "properties": lists, "required": list(people)}


def answer_shape(people: dict[str, int] | None) -> str:
    """The JSON asked for, spelled out (a backend without a grammar has only this to go by)."""
    item = '{"event":"<one sentence%s>","type":"<type>","cite":[<E numbers>]}'
    if not people:
        return '{"events":[%s]}' % (item % "")
    return "{" + ",".join(f'"{p}":[{item % (" on " + p)}]' for p in people) + "}"


@dataclass
class Extracted:
    type: str
    statement: str
    people: list[str]
    cited: list[int]  # 0-based positions of the window's excerpts
    written: str = ""  # the model's own sentence, when the subject was corrected (see attributed)


@dataclass
class CallResult:
    events: list[Extracted] = field(default_factory=list)
    error: str = ""  # why the output was rejected (after the retry)
    calls: int = 0
    completion_tokens: int = 0
    prompt_chars: int = 0
    failure: str = ""  # why the model call failed (a timeout, a refused prompt): counted as a call all the same
    out_of_time: bool = False  # the call was stopped at the deadline: nothing drawn, the source left for later


def build_messages(title: str, when: str, excerpts: list[str], people: dict[str, int] | None = None) -> list[dict]:
    lines = [f"Source: {title}" + (f" ({when})" if when else ""), ""]
    lines += [f"[E{i}] {text}" for i, text in enumerate(excerpts, 1)]
    ask = "List the events"
    if people:  # said last, where a small model heeds it most: who did what, and not what is no event
        each = " each" if len(people) > 1 else ""
        ask = f"List what {' and '.join(people)}{each} did, got or plan (not questions, greetings or feelings)"
    lines += ["", f"{ask} as JSON: {answer_shape(people)}"]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def extract_window(
    llm: LLM,
    title: str,
    when: str,
    excerpts: list[str],
    constrained: bool = True,
    conversation: bool = False,
    deadline: float | None = None,
) -> CallResult:
    """Events of one window: one call, and one retry if the output does not validate.
    `conversation`: list the events by speaker. `constrained=False` leaves decoding free (repair and
    validation only): the benchmark's baseline. A call past `deadline` (time.monotonic()) is stopped
    (`out_of_time`); one that fails is reported in `failure`, counted. Raises LLMUnavailable when the
    model cannot be reached."""
    people = speakers(excerpts) if conversation else {}
    messages = build_messages(title, when, excerpts, people)
    schema = event_schema(len(excerpts), people) if constrained else None
    generation = Generation(MAX_TOKENS, 0.0, json_schema=schema, deadline=deadline)
    result = CallResult(prompt_chars=sum(len(m["content"]) for m in messages))
    for _ in range(2):
        result.calls += 1
        try:
            raw = read_answer(llm, messages, generation)
        except LLMUnavailable:
            raise
        except LLMOutOfTime:
            result.out_of_time = True
            return result
        except LLMError as failure:
            result.failure = failure.message
            return result
        finally:
            result.completion_tokens += int(getattr(llm, "usage", {}).get("completion_tokens", 0))
        try:
            events = [attributed(e, people) for e in parse_events(raw, len(excerpts), people)]
            kept = [e for e in events if not (copied(e.statement, excerpts) or no_event(e.statement))]
            result.events = [e for e in kept if not degenerate(e.statement)]
            result.error = ""
            return result
        except ValueError as error:
            result.error = str(error)
    return result


def read_answer(llm: LLM, messages: list[dict], generation: Generation) -> str:
    """The streamed answer, stopped between two pieces once the generation's deadline passes: a
    backend that cannot stop mid-computation itself is stopped as soon as it sends something."""
    stream = llm.stream(messages, generation)
    pieces = []
    try:
        for piece in stream:
            pieces.append(piece)
            if generation.deadline is not None and time.monotonic() > generation.deadline:
                raise LLMOutOfTime("the model call was stopped at the time budget", "raise --max-minutes")
    finally:
        getattr(stream, "close", lambda: None)()  # a generator left early: its backend's cleanup runs now
    return "".join(pieces)


def attributed(event: Extracted, people: Collection[str]) -> Extracted:
    """The event with one person as its subject: the model joins both speakers ("Ann and Ben had a
    road trip": it was Ann's, 10 of 141 LoCoMo events), so a subject "A and B" becomes the person the
    event is listed under, the model's sentence kept in `written`. Anything else is left as written:
    giving an event to the one speaker of the turns it cites was tried and dropped (the model cites
    the other speaker's reply too: "Maria plans to continue volunteering at the shelter" cited John's)."""
    names = "|".join(re.escape(p) for p in sorted(people, key=len, reverse=True))
    pair = re.match(rf"({names}) and ({names})\b", event.statement) if names else None
    if not (pair and event.people and event.people[0] in pair.groups()):
        return event
    person, rest = event.people[0], event.statement[pair.end() :]
    rest = re.sub(r"^ (were|are|have)\b", lambda m: " " + AGREEMENT[m.group(1)], rest)
    return Extracted(event.type, person + rest, [person, *named(rest, people, [person])], event.cited, event.statement)


def spoken(excerpt: str) -> str:
    """An excerpt as the model reads it: without the captions of the photos shared in it."""
    return CAPTION.sub("", excerpt)


def no_event(statement: str) -> bool:
    """A reported question (the prompt says questions are no events) or a photo shared: written to
    fill a speaker's floor of events."""
    return bool(ASKED.search(statement) or SHARED.search(statement))


def degenerate(statement: str) -> bool:
    """A statement in which the model looped: the same few words or tags four times in a row, a letter
    among them (a number such as 100000000 is no loop)."""
    return any(re.search(r"[^\W\d_]", match.group(1)) for match in REPEATED.finditer(statement))


def without_trailer(statement: str) -> str:
    """The statement without the #tags and [E#] numbers written after its sentence ended."""
    return TRAILER.sub("", statement)


def copied(statement: str, excerpts: list[str]) -> bool:
    """An event taken from the prompt's example or shape: it has the example's words (or the shape's
    placeholders, "<one sentence>", "<type>") and the source does not."""
    return any(word in statement and not any(word in text for text in excerpts) for word in COPIED + PLACEHOLDERS)


def parse_events(raw: str, excerpts: int, people: Collection[str] = ()) -> list[Extracted]:
    """Validated events from a model's output (listed under "events", or under each of `people`).
    Raises ValueError saying what is wrong."""
    data = _load_json(raw)
    if not isinstance(data, dict):
        raise ValueError("the output is not a JSON object")
    groups = {p: data.get(p) for p in people} if people else {"": data.get("events")}
    if not all(isinstance(items, list) for items in groups.values()):
        raise ValueError(f"the output lacks a list of events for {' or '.join(groups) or 'events'}")
    found = [_event_of(item, excerpts, person, people) for person, items in groups.items() for item in items]
    if len(found) > MAX_EVENTS:
        raise ValueError(f"{len(found)} events, more than {MAX_EVENTS}")
    return found


def _event_of(item: Any, excerpts: int, person: str, people: Collection[str]) -> Extracted:
    if not isinstance(item, dict):
        raise ValueError("an event is not an object")
    missing = [k for k in ("event", "type", "cite") if k not in item]
    if missing:
        raise ValueError(f"an event lacks {', '.join(missing)}")
    kind = str(item["type"]).strip().lower()
    statement = without_trailer(" ".join(at_word(str(item["event"])).split()))
    if kind not in EVENT_TYPES:
        raise ValueError(f"unknown event type {kind!r}")
    if not 8 <= len(statement) <= 2 * MAX_STATEMENT:
        raise ValueError(f"a statement of {len(statement)} characters")
    cited = item["cite"]
    if not isinstance(cited, list):
        raise ValueError("cite must be a list")
    numbers = [_excerpt_number(value) for value in cited]
    if any(n is None or not 1 <= n <= excerpts for n in numbers):
        raise ValueError(f"cite {cited} names excerpts outside E1..E{excerpts}")
    return Extracted(
        kind,
        statement,
        ([person] if person else []) + named(statement, people, [person]),
        sorted({n - 1 for n in numbers})[:MAX_CITED],
    )


def at_word(statement: str) -> str:
    """A statement the grammar cut at MAX_STATEMENT characters, closed with the end mark it forces
    ("... which still only happens with Weasy."), cut at its last whole word instead and marked "…".
    Only the grammar writes exactly that many units ending mid-word (a free backend's may run longer);
    a unit is a character, or a mark with what follows it inside a sentence ("?f", "0.5": _event), so a
    cut statement holding one is longer than MAX_STATEMENT characters ("... /stations?from=&to=, /alert.")."""
    space = statement.rfind(" ")
    cut = len(GRAMMAR_UNIT.findall(statement[:-1])) == MAX_STATEMENT - 1
    if not cut or not statement[-2:-1].isalnum() or space < MAX_STATEMENT // 2:
        return statement  # ended on its own, or no words to cut at (a model looping: dropped as degenerate)
    return statement[:space].rstrip(",;:-–— ") + " …"


def named(statement: str, people: Collection[str], besides: Collection[str]) -> list[str]:
    """The people a statement names, other than `besides`."""
    return [p for p in people if p not in besides and re.search(rf"\b{re.escape(p)}\b", statement)]


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
        problem = f"the output is not valid JSON ({error.msg})"
    try:  # cut off at the token limit (a small model looping inside the grammar): keep the whole events
        return json.loads(_closed_at_last_item(raw[start:]))
    except ValueError:
        raise ValueError(problem) from None


def _closed_at_last_item(text: str) -> str:
    """`text` up to its last complete object inside a list, with the brackets still open closed."""
    stack: list[str] = []
    cut, closers, in_string, escaped = 0, "", False, False
    for i, char in enumerate(text):
        if in_string:
            in_string, escaped = in_string and (escaped or char != '"'), not escaped and char == "\\"
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append("]" if char == "[" else "}")
        elif char in "]}" and stack:
            stack.pop()
            if char == "}" and stack and stack[-1] == "]":
                cut, closers = i + 1, "".join(reversed(stack))
    if not cut:
        raise ValueError("no complete event")
    return text[:cut] + closers
