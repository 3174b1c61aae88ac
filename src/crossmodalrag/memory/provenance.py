"""Provenance of L1 events, checked rather than trusted: each event is linked to the chunks it cites
plus its nearest chunks of the source, scored sentence by sentence, and flagged unsupported when no
link reaches the threshold, or when it states a name, figure or script its source lacks
(grounding.py); restatements of an earlier event of the same source are dropped.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from crossmodalrag.memory.grounding import not_in_evidence
from crossmodalrag.memory.nodes import Link, Node
from crossmodalrag.memory.sources import ChunkRow, chunk_digest

if TYPE_CHECKING:
    from crossmodalrag.retrieval.semantic import SemanticIndex

MAX_LINKS = 3
WAITING = "waiting"  # an event's metadata key: its source changed and only a model can tell if it still says it
NOT_IN_SOURCE = "not_in_source"  # an event's metadata key: the names, figures, words its source lacks
NEAREST_LINKS = 2  # chunks nearest to an event added to the ones it cites (then the MAX_LINKS best kept)
CANDIDATES = 8  # chunks per event scored sentence by sentence: the nearest by whole-chunk vector, plus cited
REPEAT_COSINE = 0.9  # two events of one source this close (MiniLM) say the same thing
MAX_PIECES = 64  # lines and sentences of one chunk embedded for sentence-level support (bounds the cost)
WORD = re.compile(r"[^\W_]{4,}")
TOKEN = re.compile(r"\d+(?:[.,:]\d+)*|[^\W\d_]+")  # a number whole ("0.8", "2026"), else a word
NEGATIONS = frozenset({"no", "not", "never", "nor", "didnt", "doesnt", "dont", "isnt", "wasnt", "arent", "wont"})
SPEAKER = re.compile(r"([^:\n]{1,40}):\s")  # "Caroline: " starting a turn (the name is group 1)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
LIST_MARK = re.compile(r"^(?:[-*#>\s]|\d+[.)](?=\s))+")  # "- ", "## ", "> ", "2. " (not "2023 was")
HEADING = re.compile(r"#+\s")
BLOCK_START = re.compile(r"\s*(?:[-*+>]|#+|\d+[.)])\s")  # a list item, quote or heading: never a wrapped line's rest


def check_provenance(
    nodes: list[Node], chunks: list[ChunkRow], semantic: "SemanticIndex | None", min_cosine: float
) -> list[Node]:
    """Link each event to its nearest chunks of the source too, score every link, and flag events no
    link supports. By embedding when vectors exist; else by the share of the statement's words found.
    Returns the events without repeats (a later event saying the same as an earlier one, by embedding)."""
    by_id = {c.id: c for c in chunks}
    if semantic is not None and nodes:
        vectors = semantic.embedder.embed([n.statement for n in nodes])
        pieces: dict[int, object] = {}  # chunk id -> its pieces' vectors, embedded once per source
        scores = [
            _sentence_scores(semantic, node, vector, by_id, pieces) for node, vector in zip(nodes, vectors, strict=True)
        ]
        kept = _without_repeats(nodes, vectors, scores, semantic.embedder, by_id)
        for i in kept:
            _link_nearest(nodes[i], scores[i], by_id)
            nodes[i].vector = vectors[i].astype("float32").tobytes()
        nodes = [nodes[i] for i in kept]
    else:
        for node in nodes:
            _link_nearest(node, {c.id: _word_support(node.statement, c.body) for c in chunks}, by_id)
    source = [chunk.text for chunk in chunks]  # the title too: a note's breadcrumb line
    for node in nodes:
        best = max((link.score or 0.0 for link in node.links), default=0.0)
        node.confidence = round(best, 4)
        # A name, figure or script the source never has is a fact added to it, however close in meaning
        # (grounding.py). The whole source, not the linked chunks: a turn cited for one speaker's event
        # seldom names the other (11% of LoCoMo's gold observations named someone their cited turns do
        # not; 0.2% something their session does not).
        missing = _added_facts(node, source)
        node.supported = best >= min_cosine and not missing
    return nodes


def _added_facts(node: Node, source: list[str]) -> list[str]:
    """What the event states that its source's texts lack (grounding.py), kept in its metadata."""
    missing = not_in_evidence(node.statement, source)
    node.metadata.pop(NOT_IN_SOURCE, None)
    if missing:
        node.metadata[NOT_IN_SOURCE] = missing
    return missing


def _sentence_scores(
    semantic: "SemanticIndex", node: Node, vector, by_id: dict[int, ChunkRow], pieces: dict
) -> dict[int, float]:
    """Each candidate chunk's score: its best cosine to the event as a whole, or by line or sentence.
    An event rests on one sentence, and a chunk says more (a turn of several sentences, a note's
    bullets, the breadcrumb line): of 1,075 LoCoMo gold observations, 78% rank their own turn first
    this way and 68% by whole chunk (bench/memory_support.py). Candidates: the cited chunks and the
    CANDIDATES nearest by whole-chunk vector (the sentences of every chunk would cost too much)."""
    whole = semantic.scores_for(vector, list(by_id))
    candidates = sorted(whole, key=lambda c: (-whole[c], c))[:CANDIDATES]
    candidates += [link.chunk_id for link in node.links if link.chunk_id not in candidates]
    return {c: max(whole.get(c, 0.0), _best_piece(semantic, by_id[c], vector, pieces)) for c in candidates}


def _best_piece(semantic: "SemanticIndex", chunk: ChunkRow, vector, pieces: dict) -> float:
    if chunk.id not in pieces:
        texts = text_pieces(chunk.body)
        pieces[chunk.id] = semantic.embedder.embed(texts) if texts != [chunk.text] else None
    matrix = pieces[chunk.id]
    return float((matrix @ vector).max()) if matrix is not None else 0.0


def text_pieces(body: str) -> list[str]:
    """What an event may rest on in a chunk: its body (no breadcrumb), each line of several words and,
    in a line of several sentences, each sentence, a turn's speaker kept on each ("Ann: I moved.").
    A chunk listing things (a whiteboard's next steps) is far from each one as a whole: "benchmark
    nested emphasis" scored 0.22 against its whole whiteboard chunk and well above the threshold
    against its line."""
    found = [body.strip()]
    for raw in body.splitlines():
        line = LIST_MARK.sub("", raw).strip()
        if len(line.split()) < 2:
            continue
        found.append(line)
        speaker = SPEAKER.match(line)
        prefix = speaker.group(0) if speaker else ""
        sentences = [s for s in SENTENCE_END.split(line[len(prefix) :]) if len(s.split()) >= 2]
        if len(sentences) > 1:
            found += [prefix + sentence for sentence in sentences]
    return list(dict.fromkeys(found))[:MAX_PIECES]


def _without_repeats(
    nodes: list[Node], vectors, scores: list[dict[int, float]], embedder, by_id: dict[int, ChunkRow]
) -> list[int]:
    """The events to keep, in order: an event that is a near paraphrase of an earlier one of the
    source is dropped (small models restate: "Jon started promoting his business" then "Jon is
    promoting his business"), with the people's names masked: listed by speaker, the model also gives
    one speaker's event to the other ("Maria set up a 5K charity run" beside "John set up ..."). The one
    kept is the one whose person said the turn that supports it best, else a turn it cites: the model
    cites both sides of the exchange, and kept by citation the first speaker's copy won (John's "I set up
    a 5K charity run in our neighborhood" went to Maria, three such pairs in one LoCoMo session)."""
    if any(n.people for n in nodes):
        vectors = embedder.embed([_masked(n) for n in nodes])
        order = sorted(range(len(nodes)), key=lambda i: _telling(nodes[i], scores[i], by_id))
    else:
        order = range(len(nodes))
    kept: list[int] = []
    for i in order:
        if not kept or float((vectors[kept] @ vectors[i]).max()) < REPEAT_COSINE:
            kept.append(i)
    return sorted(kept)


def _masked(node: Node) -> str:
    text = node.statement
    for name in node.people:
        text = re.sub(rf"\b{re.escape(name)}\b", "someone", text)
    return text


def _telling(node: Node, scores: dict[int, float], by_id: dict[int, ChunkRow]) -> tuple[bool, bool]:
    """Sort key, the event's own teller first: did its person say the turn that supports it best
    ("Ann: ..."), and a turn it cites?"""

    def said(chunk_id: int) -> bool:
        return bool(node.people) and chunk_id in by_id and by_id[chunk_id].body.startswith(f"{node.people[0]}:")

    best = max(scores, key=lambda c: (scores[c], -c))
    return not said(best), not any(said(link.chunk_id) for link in node.links)


def _link_nearest(node: Node, scores: dict[int, float], by_id: dict[int, ChunkRow]) -> None:
    """Score the cited links, add the NEAREST_LINKS nearest chunks, keep the MAX_LINKS best (few links
    keep memory-level recall honest: linking everything would find everything). The model's citation
    alone missed the turn a gold observation rests on in about 3 of 10 matched events (LoCoMo dev);
    the two nearest by sentence put it among the links far more often (see docs/benchmarks.md)."""
    for link in node.links:
        link.score = scores.get(link.chunk_id, 0.0)
    cited = {link.chunk_id for link in node.links}
    for nearest in sorted(scores, key=lambda c: (-scores[c], c))[:NEAREST_LINKS]:
        if nearest not in cited:
            node.links.append(Link(nearest, "nearest", scores[nearest]))
    node.links = sorted(node.links, key=lambda link: (-(link.score or 0.0), link.chunk_id))[:MAX_LINKS]
    node.metadata["anchors"] = {str(link.chunk_id): _span(by_id[link.chunk_id]) for link in node.links}
    remember_texts(node, by_id)


def remember_texts(node: Node, by_id: dict[int, ChunkRow]) -> None:
    """Keep a digest of each linked chunk's text with its role and score: an edit of the source made
    while no model can read it again keeps the events resting on a chunk it left as it was."""
    node.metadata["anchor_texts"] = {
        chunk_digest(by_id[link.chunk_id]): [link.role, link.score] for link in node.links if link.chunk_id in by_id
    }


def _span(chunk: ChunkRow) -> list[int]:
    return [chunk.char_start, chunk.char_end]


def _word_support(statement: str, body: str) -> float:
    words = {w.lower() for w in WORD.findall(statement)}
    found = {w.lower() for w in WORD.findall(body)}
    return len(words & found) / len(words) if words else 0.0


def says_verbatim(statement: str, body: str) -> bool:
    """Whether one line or sentence of the text holds every content word (by stem) and number of the
    statement, and denies nothing the statement does not ("did not drop" is no "dropped"): no model
    and no embedding needed to tell that the text still says it. Closeness by embedding cannot tell:
    "we dropped the render cache" scored 0.64 (MiniLM) against "we reverted the removal and kept the
    render cache" (the same topic, the opposite decision)."""
    wanted = _content_stems(statement)
    pieces = text_pieces(body)
    return bool(wanted) and any(_holds(wanted, _content_stems(piece)) for piece in pieces[1:] or pieces)


def supporting_sentence(statement: str, body: str) -> str:
    """The sentence (or list item) of `body` that holds the most of the statement's content words (by
    stem, as says_verbatim reads them), whitespace collapsed; "" when none holds any. A daily note is one
    chunk of many events: its first sentence ("Long day.") says none of them."""
    wanted, best, best_key = _content_stems(statement), "", (0, 0.0)
    for sentence in sentences(body):
        found = _content_stems(sentence)
        shared = len(wanted & found)
        key = (shared, shared / len(found) if found else 0.0)  # then the one saying least besides
        if shared and key > best_key:
            best, best_key = sentence, key
    return best


def sentences(body: str) -> list[str]:
    """A text's sentences, whitespace collapsed, headings left out: a hard-wrapped paragraph's lines read
    as one, a blank line, a heading or a list item starting anew (text_pieces reads line by line: a
    sentence wrapped over two lines would be cut in two)."""
    blocks: list[list[str]] = [[]]
    for line in body.splitlines():
        text = line.strip()
        if not text or BLOCK_START.match(line):
            blocks.append([])
        if HEADING.match(text):  # no sentence ("## 2026-10-06" would match an event's date), nor continued
            continue
        if text:
            blocks[-1].append(text)
    found: list[str] = []
    for block in blocks:
        found += [s for s in SENTENCE_END.split(" ".join(" ".join(block).split())) if s]
    return found


def _holds(wanted: set[str], found: set[str]) -> bool:
    return wanted <= found and found & NEGATIONS <= wanted


def _content_stems(text: str) -> set[str]:
    from crossmodalrag.index.stems import snowball
    from crossmodalrag.retrieval.stopwords import STOPWORDS

    english = snowball("english")
    words = TOKEN.findall(text.lower().replace("n't", "nt"))
    return {w if w in NEGATIONS else english.stemWord(w) for w in words if w not in STOPWORDS or w in NEGATIONS}


def relink_edited(node: Node, chunks: list[ChunkRow], min_cosine: float) -> None:
    """Link an event of an edited source to the new chunks that still say it, or mark it waiting."""
    was = node.metadata.get("anchor_texts", {})
    node.links = [Link(c.id, *was[chunk_digest(c)]) for c in chunks if chunk_digest(c) in was]
    resting = max((link.score or 0.0 for link in node.links), default=0.0)
    if resting < min_cosine:  # what it rested on changed: does the new text still hold its words?
        node.links = [Link(c.id, "nearest", 1.0) for c in chunks if says_verbatim(node.statement, c.body)][:MAX_LINKS]
    node.metadata.pop(WAITING, None)
    missing = _added_facts(node, [c.text for c in chunks])
    if node.links:
        node.confidence = max(link.score or 0.0 for link in node.links)
        node.supported = node.confidence >= min_cosine and not missing
    else:
        node.supported, node.confidence = False, 0.0
        node.metadata[WAITING] = "its source was edited: waiting for a model to read it again"
    linked = {link.chunk_id for link in node.links}
    node.metadata["anchors"] = {str(c.id): _span(c) for c in chunks if c.id in linked}
