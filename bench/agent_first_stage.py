"""First-stage recall changes tried against episodic (bench/agent_recall_ablation.py, issue 13, session 9).

Last session's count: most lost gold sessions are not among the first ten turns at all, so these add
candidates rather than reorder them. Each is a context manager that patches agent/recall.py for one run;
each adds one or two ranked lists to the RRF of episodic's variants (the first pass is the fused list
of the variants as they are; nothing else changes):
  prf_rm3        pseudo-relevance feedback (RM3): the 10 best terms of the first pass's 10 best turns
                 (P(t|R) = sum over turns of P(turn|q) x tf/|turn|, times idf; Anserini's defaults of 10
                 documents and 10 terms), with the question's content words, searched lexically
  prf_rm3_hybrid the same expansion searched hybrid (BM25 + MiniLM)
  uncovered      the question's content words that none of the first pass's 5 best turns contains,
                 searched on their own (hybrid), when some but not all are missing
  window_vector  every turn as a window with its neighbours (the normalised sum of the three turn
                 vectors, one session): the nearest windows to the question, as a ranked list of turns
  window_bm25    the same windows as BM25 documents (the three turns' words)
  window_both    both window lists
Changes to the variants or the search instead of one more list:
  names_everywhere   every variant's text without the memory's speaker names (the speaker boost stays)
  rrf_inside         each variant's search fuses BM25 and vectors by RRF, not the weighted blend
  nameless_question  one more list: the question without speaker names (hybrid)
  pool_100           100 candidates per variant (30)
  sentence_pieces    each sentence of a multi-sentence turn is one more vector piece of it ("Speaker:
                     sentence" under the turn's breadcrumb), so a turn's cosine is its best sentence's
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from dataclasses import replace
from unittest import mock

import snowballstemmer

from crossmodalrag.agent import recall
from crossmodalrag.retrieval.search import search
from crossmodalrag.retrieval.stopwords import ENGLISH

STEM = snowballstemmer.stemmer("english")
WORDS = re.compile(r"[^\W\d_]{3,}")
FEEDBACK_DOCS = 10  # Anserini's RM3 defaults (fbDocs, fbTerms)
FEEDBACK_TERMS = 10
HEAD = 5
STATE: dict = {}
CACHE: dict = {}


def body(text: str) -> str:
    return text.split("\n", 1)[-1]  # without the breadcrumb (session title, date)


def words(text: str) -> list[str]:
    return [w for w in WORDS.findall(text.lower()) if w not in ENGLISH]


def stems(text: str) -> list[str]:
    return STEM.stemWords(words(text))


def memory_of(store) -> dict:
    """Per memory (cached): each turn's stems, document frequencies, windows, the surface form of each stem."""
    key = str(store.path)
    if key in CACHE:
        return CACHE[key]
    rows = store.conn.execute("SELECT id, source_id, chunk_index, text FROM chunks ORDER BY source_id, chunk_index")
    turns, surface = {}, Counter()
    place = {}
    for chunk, source, index, text in rows:
        found = words(body(text))
        turns[chunk] = STEM.stemWords(found)
        surface.update(zip(turns[chunk], found, strict=True))
        place[(source, index)] = chunk
    frequency = Counter(s for found in turns.values() for s in set(found))
    spelled = {}
    for (stem, word), _ in surface.most_common():
        spelled.setdefault(stem, word)
    windows = {}
    for (source, index), chunk in place.items():
        windows[chunk] = [c for c in (place.get((source, index - 1)), chunk, place.get((source, index + 1))) if c]
    CACHE[key] = {"turns": turns, "df": frequency, "n": len(turns), "spelled": spelled, "windows": windows}
    return CACHE[key]


def idf(memory: dict, stem: str) -> float:
    df = memory["df"].get(stem, 0)
    return math.log(1 + (memory["n"] - df + 0.5) / (df + 0.5))


def rm3_query(retriever, question: str, first) -> str | None:
    memory = memory_of(retriever.store)
    asked = set(stems(question))
    top = [h for h in first[:FEEDBACK_DOCS] if h.chunk_id in memory["turns"]]
    total = sum(h.score for h in top) or 1.0
    weight: Counter = Counter()
    for hit in top:
        found = memory["turns"][hit.chunk_id]
        for stem, count in Counter(found).items():
            if stem not in asked:
                weight[stem] += hit.score / total * count / max(1, len(found))
    ranked = sorted(weight, key=lambda s: (-weight[s] * idf(memory, s), s))[:FEEDBACK_TERMS]
    if not ranked:
        return None
    return " ".join([recall.content_words(question) or question, *(memory["spelled"][s] for s in ranked)])


def prf(hybrid: bool):
    def extra(retriever, question, pool, first):
        text = rm3_query(retriever, question, first)
        if text is None:
            return []
        return [search(retriever.store, text, pool, retriever.semantic if hybrid else None).hits]

    return extra


def uncovered(retriever, question, pool, first):
    from crossmodalrag.agent.temporal import time_ranges

    _, rest = time_ranges(question, recall.memory_anchor(retriever))
    asked = recall.content_words(rest).split()
    memory = memory_of(retriever.store)
    covered = {s for h in first[:HEAD] for s in memory["turns"].get(h.chunk_id, ())}
    missing = [w for w in asked if STEM.stemWord(w.lower()) not in covered]
    if not missing or len(missing) == len(asked):
        return []
    return [search(retriever.store, " ".join(missing), pool, retriever.semantic).hits]


def window_vector_list(retriever, question, pool, limit):
    import numpy as np

    memory, semantic = memory_of(retriever.store), retriever.semantic
    if semantic is None:
        return []
    key = ("vectors", str(retriever.store.path))
    if key not in CACHE:
        ids = list(memory["windows"])
        vectors = semantic.representative_vectors(ids)
        rows, matrix = [], []
        for chunk in ids:
            parts = [vectors[c] for c in memory["windows"][chunk] if c in vectors]
            if parts:
                total = np.sum(parts, axis=0)
                rows.append(chunk)
                matrix.append(total / (np.linalg.norm(total) or 1.0))
        CACHE[key] = (rows, np.asarray(matrix))
    rows, matrix = CACHE[key]
    cosines = matrix @ semantic.query_vector(question)
    order = np.argsort(-cosines, kind="stable")[:limit]
    return [rows[i] for i in order]


def window_bm25_list(retriever, question, pool, limit, k1=1.2, b=0.75):
    memory = memory_of(retriever.store)
    key = ("bm25", str(retriever.store.path))
    if key not in CACHE:
        bags = {c: Counter(s for part in w for s in memory["turns"][part]) for c, w in memory["windows"].items()}
        df = Counter(s for bag in bags.values() for s in bag)
        average = sum(sum(bag.values()) for bag in bags.values()) / max(1, len(bags))
        CACHE[key] = (bags, df, average)
    bags, df, average = CACHE[key]
    wanted = set(stems(question))
    n = len(bags)
    scores = {}
    for chunk, bag in bags.items():
        length = sum(bag.values())
        value = 0.0
        for s in wanted:
            if bag[s]:
                weight = math.log(1 + (n - df[s] + 0.5) / (df[s] + 0.5))
                value += weight * bag[s] * (k1 + 1) / (bag[s] + k1 * (1 - b + b * length / max(1.0, average)))
        if value:
            scores[chunk] = value
    return sorted(scores, key=lambda c: (-scores[c], c))[:limit]


def windows(kinds: tuple[str, ...]):
    def extra(retriever, question, pool, first):
        by_id = {h.chunk_id: h for h in first}
        lists = []
        for kind in kinds:
            ranked = (window_vector_list if kind == "vector" else window_bm25_list)(
                retriever, question, pool, pool.top_k
            )
            by_id.update(_hits(retriever, [c for c in ranked if c not in by_id], first))
            lists.append([by_id[c] for c in ranked if c in by_id])
        return lists

    return extra


def _hits(retriever, ids, first):
    """Hits for chunks no search returned (a window list's turns): a copy of a first-pass hit with the
    chunk's own id, text and source (the fusion reads only ids, text, source and timestamp)."""
    if not ids or not first:
        return {}
    marks = ",".join("?" * len(ids))
    rows = retriever.store.conn.execute(
        f"SELECT c.id, c.source_id, c.text, c.locator, s.uri, s.timestamp, s.title FROM chunks c"
        f" JOIN sources s ON s.id = c.source_id WHERE c.id IN ({marks})",
        ids,
    )
    template = first[0]
    blank = dict(score=0.0, components={}, char_start=None, char_end=None, byte_start=None, byte_end=None)
    return {
        chunk: replace(
            template,
            chunk_id=chunk,
            source_id=source,
            text=text,
            locator=locator,
            source_uri=uri,
            timestamp=when,
            title=title,
            **blank,
        )
        for chunk, source, text, locator, uri, when, title in rows
    }


def second_pass(extra_lists):
    """recall.fuse patched: the variants' lists fused, then `extra_lists(...)` added and all fused again."""

    @contextlib.contextmanager
    def patch():
        original_variants, original_fuse = recall.episodic_variants, recall.fuse

        def variants(retriever, question, pool):
            STATE.update(retriever=retriever, question=question, pool=pool)
            return original_variants(retriever, question, pool)

        def fuse(lists):
            first = original_fuse(lists)
            extra = extra_lists(STATE["retriever"], STATE["question"], STATE["pool"], first)
            extra = [hits for hits in extra if hits]
            return original_fuse(lists + extra) if extra else first

        with mock.patch.object(recall, "episodic_variants", variants), mock.patch.object(recall, "fuse", fuse):
            yield

    return patch


FIRST_STAGE = {
    "prf_rm3": second_pass(prf(False)),
    "prf_rm3_hybrid": second_pass(prf(True)),
    "uncovered": second_pass(uncovered),
    "window_vector": second_pass(windows(("vector",))),
    "window_bm25": second_pass(windows(("bm25",))),
    "window_both": second_pass(windows(("vector", "bm25"))),
}


def speaker_names(store) -> set[str]:
    rows = store.conn.execute("SELECT DISTINCT json_extract(metadata, '$.speaker') FROM chunks")
    return {s.lower() for (s,) in rows if s}


def without_names(text: str, names: set[str]) -> str:
    kept = [w for w in text.split() if re.sub(r"('s)?\W*$", "", w.lower()) not in names]
    return " ".join(kept) or text


@contextlib.contextmanager
def names_everywhere():
    """Every variant's text without the memory's speaker names (the speaker boost still weighs who)."""
    original = recall.episodic_variants

    def variants(retriever, question, pool):
        names = speaker_names(retriever.store)
        return [(without_names(text, names), options) for text, options in original(retriever, question, pool)]

    with mock.patch.object(recall, "episodic_variants", variants):
        yield


@contextlib.contextmanager
def rrf_inside():
    """Each variant's search fuses its BM25 and vector rankings by RRF instead of the weighted blend."""
    original = recall.episodic_variants

    def variants(retriever, question, pool):
        return [(text, replace(options, fusion="rrf")) for text, options in original(retriever, question, pool)]

    with mock.patch.object(recall, "episodic_variants", variants):
        yield


def nameless_semantic(retriever, question, pool, first):
    """One more list: the question without speaker names, by meaning only (profile `relevant`)."""
    names = speaker_names(retriever.store)
    text = without_names(question, names)
    if text == question or retriever.semantic is None:
        return []
    return [search(retriever.store, text, pool, retriever.semantic).hits]


FIRST_STAGE.update(
    names_everywhere=names_everywhere,
    rrf_inside=rrf_inside,
    nameless_question=second_pass(nameless_semantic),
)

FIRST_STAGE["pool_100"] = lambda: mock.patch.object(recall, "POOL", 100)  # candidates per variant (30)

SENTENCE = re.compile(r"(?<=[.!?])\s+|\s*(?=\[shares a photo)")


def sentence_pieces_of(store, embedder):
    """(chunk id per row, matrix): each sentence of a multi-sentence turn as one more piece of its chunk,
    embedded as the turn is (its breadcrumb line, then "Speaker: sentence")."""
    import numpy as np

    from crossmodalrag.index.embeddings import embed_by_length

    key = ("sentences", str(store.path))
    if key not in CACHE:
        chunks, texts = [], []
        for chunk, text in store.conn.execute("SELECT id, text FROM chunks ORDER BY id"):
            crumb, _, turn = text.partition("\n")
            speaker, colon, said = turn.partition(": ")
            said = said if colon else turn
            parts = [p.strip() for p in SENTENCE.split(said) if len(p.split()) >= 3]
            if len(parts) < 2:
                continue
            for part in parts:
                chunks.append(chunk)
                texts.append(f"{crumb}\n{speaker}: {part}" if colon else f"{crumb}\n{part}")
        matrix = embed_by_length(embedder, texts, 64) if texts else np.zeros((0, embedder.identity.dim))
        CACHE[key] = (np.asarray(chunks, dtype=np.int64), matrix)
    return CACHE[key]


@contextlib.contextmanager
def sentence_pieces():
    """A turn's cosine is that of its best piece: the whole turn or one of its sentences."""
    import numpy as np

    from crossmodalrag.index.vectors import ExactIndex
    from crossmodalrag.retrieval.semantic import SemanticIndex

    original = SemanticIndex.refresh
    touched = []

    def refresh(self):
        before = self.stamp
        original(self)
        if self.stamp == before and getattr(self, "_with_sentences", False):
            return
        chunks, matrix = sentence_pieces_of(self.store, self.embedder)
        self._matrix = np.vstack([self._matrix, matrix.astype(self._matrix.dtype)])
        self._chunks = np.concatenate([self._chunks, chunks])
        self._by_chunk = np.argsort(self._chunks, kind="stable")
        self._index = ExactIndex(np.arange(len(self._chunks), dtype=np.int64), self._matrix)
        self._with_sentences = True
        touched.append(self)

    with mock.patch.object(SemanticIndex, "refresh", refresh):
        yield
    for index in touched:  # rebuilt without the sentences on its next use
        index.stamp, index._with_sentences = "", False


FIRST_STAGE["sentence_pieces"] = sentence_pieces
