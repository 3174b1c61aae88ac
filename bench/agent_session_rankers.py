"""Session-level rankings tried against episodic's session order (bench/agent_recall_ablation.py, issue 13).

Each is a context manager that patches agent/recall.py for one run. The episodic pipeline is unchanged up
to its fused, speaker- and neighbour-weighted turn list; what changes is how the first five sessions are
chosen (the head shows each chosen session's best turn, the rest follow in fused order):
  session_bm25     the fused session order RRF-fused with half weight with BM25 over each candidate
                   session's turns as one document (idf over the candidate sessions)
  session_vector   ... with the cosine of the question to the mean of the session's turn vectors
  content_mmr      MMR over the turns' meaning: a head pick loses 0.1 x its best cosine to those chosen
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from unittest import mock

import snowballstemmer

from crossmodalrag.agent import recall
from crossmodalrag.retrieval.stopwords import ENGLISH

STEM = snowballstemmer.stemmer("english")
WORDS = re.compile(r"\w+")
SESSION_WEIGHT = 0.5  # of the session ranking against the fused order (1)
MMR_PENALTY = 0.1
HEAD = 5


def terms(text: str) -> list[str]:
    return STEM.stemWords([w for w in WORDS.findall(text.lower()) if w not in ENGLISH])


def session_bm25(retriever, question: str, sessions: list[int], k1: float = 1.2, b: float = 0.75) -> dict:
    marks = ",".join("?" * len(sessions))
    counts: dict[int, Counter] = {s: Counter() for s in sessions}
    for source, text in retriever.store.conn.execute(
        f"SELECT source_id, text FROM chunks WHERE source_id IN ({marks})", sessions
    ):
        counts[source].update(terms(text.split("\n", 1)[-1]))  # the turn, not its breadcrumb
    lengths = {s: sum(c.values()) for s, c in counts.items()}
    average = sum(lengths.values()) / max(1, len(lengths))
    frequency = Counter(t for c in counts.values() for t in c)
    wanted = set(terms(question))
    scores = {}
    for s, c in counts.items():
        scores[s] = sum(
            math.log(1 + (len(counts) - frequency[t] + 0.5) / (frequency[t] + 0.5))
            * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * lengths[s] / max(1.0, average)))
            for t in wanted if c[t]
        )  # fmt: skip
    return scores


def session_vector(retriever, question: str, sessions: list[int]) -> dict:
    import numpy as np

    semantic = retriever.semantic
    marks = ",".join("?" * len(sessions))
    chunks: dict[int, list[int]] = {}
    for chunk, source in retriever.store.conn.execute(
        f"SELECT id, source_id FROM chunks WHERE source_id IN ({marks})", sessions
    ):
        chunks.setdefault(source, []).append(chunk)
    query = semantic.query_vector(question)
    scores = {}
    for source, ids in chunks.items():
        vectors = list(semantic.representative_vectors(ids).values())
        if vectors:
            mean = np.mean(vectors, axis=0)
            scores[source] = float(mean @ query / (np.linalg.norm(mean) or 1.0))
    return scores


@contextlib.contextmanager
def patching(state: dict, diversify):
    """recall.diversify_by_session replaced, with the question's retriever and text in `state`."""
    original = recall.episodic_variants

    def variants(retriever, question, pool):
        state.update(retriever=retriever, question=question)
        return original(retriever, question, pool)

    with (
        mock.patch.object(recall, "episodic_variants", variants),
        mock.patch.object(recall, "diversify_by_session", diversify),
    ):
        yield


def with_session_ranking(score_sessions):
    """The head's sessions by RRF of the fused session order and SESSION_WEIGHT x `score_sessions`."""
    state: dict = {}

    def diversify(hits, limit, head=None, sessions=None, cosine_floor=None):
        order = list(dict.fromkeys(h.source_id for h in hits))
        scores = score_sessions(state["retriever"], state["question"], order) if order else {}
        other = sorted((s for s in order if scores.get(s, 0.0) > 0), key=lambda s: -scores[s])
        fused = {s: 1.0 / (60 + rank) for rank, s in enumerate(order, 1)}
        for rank, s in enumerate(other, 1):
            fused[s] += SESSION_WEIGHT / (60 + rank)
        best = {}
        for hit in hits:
            best.setdefault(hit.source_id, hit)
        chosen = [best[s] for s in sorted(order, key=lambda s: -fused[s])[: min(limit, HEAD)]]
        return chosen + [h for h in hits if h not in chosen][: max(0, limit - len(chosen))]

    return lambda: patching(state, diversify)


def with_content_mmr():
    """The session MMR's head, less MMR_PENALTY x a pick's best cosine to the turns already chosen."""
    state: dict = {}

    def diversify(hits, limit, head=None, sessions=None, cosine_floor=None):
        vectors = state["retriever"].semantic.representative_vectors([h.chunk_id for h in hits])
        top = hits[0].score if hits else 1.0
        remaining, chosen, counts = list(hits), [], Counter()

        def value(hit):
            vector = vectors.get(hit.chunk_id)
            near = max((float(vector @ vectors[c.chunk_id]) for c in chosen if c.chunk_id in vectors), default=0.0)
            penalty = MMR_PENALTY * near if vector is not None else 0.0
            return hit.score / top * recall.SESSION_DECAY ** counts[hit.source_id] - penalty

        while remaining and len(chosen) < min(limit, HEAD):
            pick = max(remaining, key=value)
            remaining.remove(pick)
            chosen.append(pick)
            counts[pick.source_id] += 1
        return chosen + remaining[: max(0, limit - len(chosen))]

    return lambda: patching(state, diversify)


RANKERS = {
    "session_bm25": with_session_ranking(session_bm25),
    "session_vector": with_session_ranking(session_vector),
    "content_mmr": with_content_mmr(),
}
