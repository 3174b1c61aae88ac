"""Recall cards: a question and a one-sentence answer drawn strictly from a node's L0 evidence, cited.

Cards are made for the nodes most at risk of being forgotten, cached per node fingerprint (a card
is made again only when its node changed, or with --regenerate; a regenerate without a model keeps
a model's card of an unchanged node: a template card would only be worse). The model writes them when one
answers and cites a real excerpt that holds words of its answer (`draws_on`); otherwise a template card
asks about the node and answers with a sentence of its best evidence (an event's: the one that says it, else
the first): real text, never a paraphrase.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from crossmodalrag.config import Settings
from crossmodalrag.memory.episodes import episode_label
from crossmodalrag.memory.forgetting import forgetting
from crossmodalrag.memory.sources import project_name
from crossmodalrag.store import Store

if TYPE_CHECKING:
    from crossmodalrag.answer.llm import LLM

EXCERPTS = 3
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
LIST_NUMBER = re.compile(r"(?:^|\s)\d{1,3}\.$")  # "1." opening a list item, not the end of a sentence
PARAGRAPH = re.compile(r"\n\s*\n")
# What no answer opens with; a dot or hyphen only when no word follows it ("-18 °C", ".NET 8" are answers).
ANSWER_LEAD = re.compile(r"^(?:[\s,;:!?)\]}\u2013\u2014]|[.\-](?!\w))+")
SHARED_WORDS = 0.6  # a template question naming this share of its answer's words gives the answer away
CARD_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8, "maxLength": 160},
        "answer": {"type": "string", "minLength": 3, "maxLength": 220},
        "evidence": {"type": "integer", "minimum": 1, "maximum": EXCERPTS},
    },
    "required": ["question", "answer", "evidence"],
}


def first_sentence(text: str, limit: int = 220) -> str:
    """The first sentence of a text's first paragraph (a blank line ends a sentence too: a commit's
    subject line has no full stop), not cut at a list item's number."""
    paragraphs = [p for p in PARAGRAPH.split(text.strip()) if p.strip() and not p.lstrip().startswith("#")]
    flat = " ".join(_first_item(paragraphs[0] if paragraphs else text).split())
    ends = (m.end() for m in SENTENCE_END.finditer(flat) if not LIST_NUMBER.search(flat[: m.end()]))
    return capped(flat[: next(ends, len(flat))], limit)


def _first_item(paragraph: str) -> str:
    """A list's first item without its mark ("- Priya will own the alerting service"), else the
    paragraph: an answer opened with the note's bullet, and ran on into the next item."""
    from crossmodalrag.memory.provenance import BLOCK_START, LIST_MARK

    lines = paragraph.strip().splitlines()
    if not BLOCK_START.match(lines[0]):
        return paragraph
    rest = next((i for i, line in enumerate(lines[1:], 1) if BLOCK_START.match(line)), len(lines))
    return " ".join([LIST_MARK.sub("", lines[0]), *lines[1:rest]])


def capped(sentence: str, limit: int = 220) -> str:
    return sentence if len(sentence) <= limit else sentence[: limit - 2].rsplit(" ", 1)[0] + " …"


def template_card(node: dict[str, Any], body: str | None = None) -> dict[str, Any]:
    """A question about the node and, as the answer, a sentence of its best evidence (`body`: that
    chunk's text with its line breaks, else the flat excerpt): an event's, the sentence that says it
    (a daily note is one chunk of many events); else the first."""
    from crossmodalrag.memory.provenance import supporting_sentence
    from crossmodalrag.memory.retrieve import words

    best = node["evidence"][0]
    text = body if body is not None else best["excerpt"]
    said = supporting_sentence(node.get("statement") or "", text) if node["level"] == "event" else ""
    answer = capped(_first_item(said)) if said else first_sentence(text)  # a list item's sentence: its mark off
    when = (node["first_time"] or "")[:10]
    if node["level"] == "event":
        named = best["title"]
        said = words(answer)
        if said and len(said & words(named)) >= SHARED_WORDS * len(said):  # a commit titled by its subject
            named = project_name(node["project"] or "") or "this source"
        question = f"What {node['type'] or 'thing'} is recorded in {named}" + (f" ({when})?" if when else "?")
    elif node["level"] == "episode":
        question = f"What happened in {episode_label(node['title'])}" + (f" around {when}?" if when else "?")
    else:
        question = f"What do you know about {node['title']}?"
    return {"question": question, "answer": answer, "cited": [best], "generator": "template"}


def llm_card(llm: "LLM", node: dict[str, Any], min_margin: float = Settings.verify_min_margin) -> dict[str, Any] | None:
    """A card written by the model from the node's excerpts, or None unless it validates and the
    excerpt it cites supports its answer (the answer's claim check: a card is studied as fact)."""
    from crossmodalrag.answer.llm import Generation, LLMError
    from crossmodalrag.answer.numbers import numbers_not_in
    from crossmodalrag.answer.prompt import support_messages
    from crossmodalrag.answer.verify import judge

    excerpts = node["evidence"][:EXCERPTS]
    prompt = (
        "Write one study question about what these excerpts record and its one-sentence answer, using only "
        "facts stated in them. evidence is the number of the excerpt the answer comes from. Answer JSON.\n\n"
        + "\n".join(f"[E{i}] {e['excerpt']}" for i, e in enumerate(excerpts, 1))
    )
    try:
        raw = "".join(llm.stream([{"role": "user", "content": prompt}], Generation(160, 0.0, json_schema=CARD_SCHEMA)))
        data = json.loads(raw[raw.find("{") : raw.rfind("}") + 1])
        cited = excerpts[int(data["evidence"]) - 1]
        question, answer = " ".join(str(data["question"]).split()), " ".join(str(data["answer"]).split())
    except (LLMError, ValueError, KeyError, IndexError, TypeError):
        return None
    answer = ANSWER_LEAD.sub("", answer)  # ", went hiking near the lake; ..." began mid-sentence
    if not (8 <= len(question) <= 160 and 3 <= len(answer) <= 220) or int(data["evidence"]) < 1:
        return None
    if not draws_on(cited["excerpt"], answer, question) or numbers_not_in(answer, [cited["excerpt"], question]):
        return None  # a figure the excerpt does not hold: the judge passed "1450 EUR" citing the landlord's line
    try:
        claim = support_messages(f"[E1] {cited['excerpt']}", f'The answer to "{question}" is: {answer}')
        if judge(llm, [claim])[0] < min_margin:
            return None
    except LLMError:
        return None
    return {"question": question, "answer": answer, "cited": [cited], "generator": f"{llm.provider}/{llm.model}"}


def draws_on(excerpt: str, answer: str, question: str) -> bool:
    """Whether the answer says something beyond its question that the excerpt says: some of its own
    words (by stem, as the index matches them) are the excerpt's. The model's cards answered "What
    does the README file say?" with "It is a README file ...", and with words of no excerpt ("The
    error occurred while ..." to a turn saying "[Request interrupted by user for tool use]")."""
    from crossmodalrag.answer.attribution import content_words
    from crossmodalrag.answer.hedges import named_in

    said = content_words(answer)
    own = said - named_in(said, content_words(question))
    return bool(named_in(own, content_words(excerpt)))


def recall_cards(
    store: Store,
    level: str = "all",
    top: int = 10,
    min_support: int = 1,
    half_life_days: float = 14.0,
    llm: "LLM | None" = None,
    regenerate: bool = False,
    write: bool = True,
    min_margin: float = Settings.verify_min_margin,
) -> list[dict[str, Any]]:
    """Cards for the riskiest nodes: cached ones reused, others made (and cached when `write`). A card
    with the answer and excerpt of a riskier one (an event and the episode it alone makes) is left out
    and the next node's card shown instead."""
    # Twice as many candidates as cards, for those left out as repeats (made only when reached).
    nodes = [n for n in forgetting(store, level, top * 2, min_support, half_life_days) if n["evidence"]]
    cached = _cached(store, [n["id"] for n in nodes])
    fingerprints = dict(
        store.conn.execute(
            f"SELECT id, fingerprint FROM memory_nodes WHERE id IN ({','.join('?' * len(nodes))})",
            [n["id"] for n in nodes],
        ).fetchall()
    ) if nodes else {}  # fmt: skip
    cards: list[dict[str, Any]] = []
    shown: set[tuple] = set()
    for node in nodes:
        if len(cards) == top:
            break
        card = cached.get(node["id"])
        current = card is not None and card["node_fingerprint"] == fingerprints[node["id"]]
        keep_model_card = llm is None and current and card["generator"] != "template"
        if (regenerate or not current) and not keep_model_card:
            made = llm_card(llm, node, min_margin) if llm is not None else None
            card = made or template_card(node, _body(store, node["evidence"][0]["chunk_id"]))
        elif card["generator"] == "template":  # cheap and deterministic: made again, so template fixes show
            remade = template_card(node, _body(store, node["evidence"][0]["chunk_id"]))
            if any(remade[k] != card[k] for k in ("question", "answer", "cited")):
                card = {**card, **remade}
        if write and card is not cached.get(node["id"]):
            card["node_fingerprint"] = fingerprints[node["id"]]
            _save(store, node["id"], card)
        said = (" ".join(card["answer"].lower().split()), card["cited"][0].get("chunk_id"))
        if said in shown:
            continue
        shown.add(said)
        cards.append({"node_id": node["id"], "level": node["level"], "title": node["title"], "risk": node["risk"],
                      **{k: card[k] for k in ("question", "answer", "cited", "generator")}})  # fmt: skip
    return cards


def _body(store: Store, chunk_id: int) -> str | None:
    """A chunk's text without its breadcrumb line, line breaks kept (where a commit's subject ends)."""
    row = store.conn.execute("SELECT text FROM chunks WHERE id = ?", (chunk_id,)).fetchone()
    return None if row is None else (row[0].split("\n", 1)[1] if "\n" in row[0] else row[0])


def _cached(store: Store, ids: list[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    found = store.conn.execute(
        "SELECT node_id, node_fingerprint, question, answer, citations, generator FROM memory_cards"
        f" WHERE node_id IN ({','.join('?' * len(ids))})",
        ids,
    ).fetchall()
    return {
        r[0]: {"node_fingerprint": r[1], "question": r[2], "answer": r[3], "cited": json.loads(r[4]), "generator": r[5]}
        for r in found
    }


def _save(store: Store, node_id: str, card: dict[str, Any]) -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO memory_cards (node_id, node_fingerprint, question, answer, citations, generator,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (node_id, card["node_fingerprint"], card["question"], card["answer"], json.dumps(card["cited"]),
             card["generator"], time.time()),
        )  # fmt: skip
