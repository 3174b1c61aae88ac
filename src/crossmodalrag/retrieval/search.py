"""Ranking evidence: lexical (FTS5 BM25) and, when vectors exist, semantic candidates, fused.

Components of a hit, each in [0, 1] across the candidate pool:
  lexical = BM25 / best BM25 in the pool (0 = no lexical match),
  vector  = cosine similarity min-max spread over the pool (see fusion.min_max for why),
  recency = 0.5 ** (age / half-life), age from the newest source in memory (so results do not
            drift with the wall clock and an old archive is not all zeros),
  title   = idf-weighted share of the query's terms found in the source title,
  usage   = rehearsal strength from the opt-in usage log (memory/usage.py), counted only by the
            `usage` profile and only for candidates that match the query's words or meaning.
Score = weights · components; the weights come from the profile (profiles.py) or, without
vectors, from the lexical defaults. `fusion="rrf"` ranks by reciprocal rank fusion instead.
`coverage` (idf-weighted share of query terms the best of the first COVERAGE_DEPTH ranked hits contains)
and `similarity` (their best raw cosine), the same whatever `top_k` shows, say how well the evidence
answers at all: the abstention gate (gate.py) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING

from crossmodalrag.index import fts
from crossmodalrag.index.scripts import has_vietnamese
from crossmodalrag.retrieval.candidates import dated_chunks, lexical_candidates, vector_candidates
from crossmodalrag.retrieval.coverage import (
    best_coverage,
    coverage_weights,
    exact_forms,
    matches,
    prefix_tokens,
    stem_alternatives,
    term_weights,
)
from crossmodalrag.retrieval.dates import asked_window, named_spans, read_times
from crossmodalrag.retrieval.filters import timeline_now
from crossmodalrag.retrieval.gate import FULL_COVERAGE, is_weak
from crossmodalrag.retrieval.languages import different_languages, different_scripts, model_reads
from crossmodalrag.retrieval.names import unknown_names
from crossmodalrag.retrieval.profiles import hybrid_weights, lexical_weights
from crossmodalrag.retrieval.query import split_comparison
from crossmodalrag.retrieval.ranking import CONVERSATION, rank_pool
from crossmodalrag.retrieval.reasons import asks_why
from crossmodalrag.retrieval.scoring import PoolRows
from crossmodalrag.retrieval.symbols import symbol_coverage, symbol_query
from crossmodalrag.store import Store
from crossmodalrag.types import Hit

if TYPE_CHECKING:
    import numpy as np

    from crossmodalrag.retrieval.semantic import SemanticIndex

COVERAGE_DEPTH = 10
# Sources whose chunks are single statements (chat turns, agent memories): too short to show a topic.
STATEMENTS = (CONVERSATION, "memory")
SHIFT_GAP = 0.2  # see `_meaning_disagrees`


@dataclass(frozen=True)
class SearchOptions:
    top_k: int = 5
    profile: str = "balanced"
    fusion: str = "weighted"  # or "rrf"
    title_boost_weight: float = 0.05
    recency_weight: float = 0.10  # lexical-only ranking; profiles carry their own
    recency_half_life_days: float = 180.0
    usage_half_life_days: float = 14.0
    usage_saturation: float = 5.0
    # At most this many chunks of one source (`capped_as`); below the cap a source's further chunks rank
    # at `repeat_source_factor` of their score for each of its chunks above them (`spread_sources`; 1 =
    # not at all). The discount spreads the evidence over sources; the cap is its backstop (0: neither).
    max_chunks_per_source: int = 3
    repeat_source_factor: float = 0.8
    dedupe_threshold: float = 0.95
    # The title is already in every chunk's breadcrumb line, so BM25 ignores the title column by
    # default: the title boost alone (0 disables it) decides how much a title match counts extra.
    title_column_weight: float = 0.0
    min_candidates: int = 50
    modalities: tuple[str, ...] = ()  # only these kinds of evidence ("text", "code", "pdf"); () = all
    source_types: tuple[str, ...] = ()  # only these kinds of source ("note", "conversation", "memory"); () = all
    source_ids: tuple[int, ...] | None = None  # only these sources (agent memories of a kind or tag); None = all
    after: float | None = None  # only sources dated at or after this (unix seconds)
    before: float | None = None  # ... and before this
    # "any" term (BM25 ranks), "all" terms, or the exact "phrase"; all and phrase also filter vector
    # candidates, so a hybrid answer never shows evidence that lacks a required term.
    match: str = "any"
    # Rocchio feedback (`_shifted_query`): the query vector is moved toward the mean of its best
    # `rocchio_hits` first-pass hits, `rocchio_weight` times their mean, and the pool ranked again. 0 disables.
    rocchio_hits: int = 3
    rocchio_weight: float = 1.0
    # The abstention gate (gate.py): evidence is weak when it covers less than this of the query's
    # idf weight and is not close in meaning either; with vectors, also when its best cosine is below
    # the model's floor. Cosine thresholds: None = the active embedding model's fitted values.
    min_coverage: float = 0.075
    min_similarity: float | None = None
    min_similarity_floor: float | None = None

    def weights(self, hybrid: bool) -> dict[str, float]:
        """The per-component weights in force (they sum to 1)."""
        if hybrid:
            return hybrid_weights(self.profile, self.title_boost_weight)
        return lexical_weights(self.recency_weight, self.title_boost_weight)


@dataclass
class SearchResult:
    hits: list[Hit]
    terms: list[str]
    coverage: float = 0.0
    similarity: float | None = None  # best raw cosine among the hits; None without vectors
    hybrid: bool = False
    comparison: dict | None = None  # {"sides": [x, y], "missing": [sides with no evidence]}
    term_weights: dict[str, float] = field(default_factory=dict)
    matched_terms: int = 0  # distinct query terms in the best-covering hit
    embed_model: str | None = None  # the embedding model behind `similarity` (its gate thresholds)
    unknown_names: list[str] = field(default_factory=list)  # the question's names nothing in memory holds
    # (after, before) when the question asks only what happened then (dates.asked_window): its hits are
    # what is dated inside, and the gate does not ask them to share the question's words
    window: tuple[float | None, float | None] | None = None
    # the question and its closest evidence (by cosine) are in different languages (languages.py):
    # their shared words say nothing, only the cosine judges them (gate.py CROSS_LANGUAGE)
    cross_language: bool = False


def search(store: Store, query: str, options: SearchOptions, semantic: "SemanticIndex | None" = None) -> SearchResult:
    """Rank evidence for a query. Never raises on odd query text: it cannot reach FTS syntax."""
    query = fts.composed_query(query)  # its words, names and dates are read as the notes' are
    if semantic is not None and not model_reads(semantic.embedder.identity.name, query):
        semantic = None  # an English model's vectors of a Chinese question are noise (languages.py)
    sides = split_comparison(query)
    if sides is None:
        return _search_one(store, query, options, semantic)
    return _search_comparison(store, query, sides, options, semantic)


def _search_one(store: Store, query: str, options: SearchOptions, semantic: "SemanticIndex | None") -> SearchResult:
    symbols = symbol_query(query)
    times = read_times(query)
    # Its symbols are what a symbols-only question asks about: not everything dated in --after/--before.
    conn = store.conn
    # 'now' on the memory's timeline is read only for a question that asks only about a time
    window = None if symbols else asked_window(query, options.after, options.before, times, partial(timeline_now, conn))
    if window is not None:
        options = replace(options, after=window[0], before=window[1])
    # A symbols-only question is matched by its symbols alone: "™" would otherwise be the word "tm".
    terms = [] if symbols else fts.search_terms(conn, query)
    analyzed = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])] if terms else []
    weights = term_weights(conn, analyzed)
    limit = max(options.min_candidates, options.top_k * 3)
    lexical, every_match, top = lexical_candidates(conn, query, terms, analyzed, options, limit, symbols)
    asked: dict[int, float] = {}  # the question's own cosines: what the gate and `cosine` report
    vector = None
    if semantic is not None:
        vector = semantic.query_vector(query)
        asked = vector_candidates(conn, semantic, vector, lexical, every_match, top, options, limit)
    pool = set(lexical) | set(asked)
    if window is not None:  # without words to match (or vectors), what is dated then is found by its date
        pool |= dated_chunks(conn, options, limit)
    unknown = unknown_names(conn, query)
    searched = symbols or [t.word for t in terms]
    if not pool:
        return SearchResult([], searched, 0.0, None, semantic is not None, None, weights, 0, None, unknown, window)
    model = semantic.embedder.identity.name if semantic is not None else None
    dated = named_spans(query, times)
    known = PoolRows(conn, pool, weights, semantic, options)
    known.exact_match = _best_match_holding_every_term(conn, terms, analyzed, weights, known, lexical)
    why = asks_why(query)
    # Ranked COVERAGE_DEPTH deep whatever is shown: the gate (as calibrated, at top-k 10) and the shift
    # read the best hits, and a question refused at --top-k 1 was answered at --top-k 2. Cutting the
    # deeper ranking shows what ranking top_k deep would (both are greedy down the same order).
    shown, options = options.top_k, replace(options, top_k=max(options.top_k, COVERAGE_DEPTH))
    # The shift learns from the plain ranking: a why-question's lift (reasons.py) orders what is shown,
    # and as feedback it moved the README's "Why did I change the parser?" off its note's summary.
    hits = rank_pool(known, lexical, asked, asked, options, model, dated, why and semantic is None)
    if semantic is not None and (shifted := _shifted_query(known, vector, hits, options)) is not None:
        # The same candidates, ranked by the question moved toward its best hits.
        moved = semantic.scores_for(shifted, sorted(pool))
        hits = rank_pool(known, lexical, moved, asked, options, model, dated, why)
    elif why and semantic is not None:  # no shift: the plain ranking is what is shown
        hits = rank_pool(known, lexical, asked, asked, options, model, dated, why)
    if symbols:
        coverage, matched = symbol_coverage([h.text for h in hits[:COVERAGE_DEPTH]], symbols)
    else:
        coverage, matched = _coverage(conn, terms, analyzed, weights, hits)
    closest = max((h for h in hits if h.chunk_id in asked), key=lambda h: asked[h.chunk_id], default=None)
    if hits and different_scripts(query, hits[0].text):
        # A name is spelled in the question's script, and the evidence may hold it only transliterated
        # ("Sochi" of Сочи): the names gate (names.py) can tell nothing here. Within one script, names
        # are written alike across languages (Berlin, Zürich) and are still checked.
        unknown = []
    similarity = asked[closest.chunk_id] if closest is not None else None
    hits = hits[:shown]
    return SearchResult(
        hits,
        searched,
        coverage,
        similarity,
        semantic is not None,
        None,
        weights,
        matched,
        model,
        unknown,
        window,
        closest is not None and different_languages(query, closest.text),
    )


def _shifted_query(
    known: "PoolRows", vector: "np.ndarray", hits: list[Hit], options: SearchOptions
) -> "np.ndarray | None":
    """The query vector moved toward the mean vector of the best first-pass hits (Rocchio pseudo-relevance
    feedback), or None: when disabled, when a best hit is a single statement, or none has a vector.
    A short question and the passage that answers it share a topic more than wording, and the best
    hits, found by words and meaning together, show what that topic looks like in this memory:
    SciFact train through `mem ask`, nDCG@10 0.7205 -> 0.7347; MiniLM on the zh/ja/de dev sets
    +4.5/+3.5/+3.0. The shifted query re-ranks the same candidates: searching its own nearest chunks
    too added nothing (0.7380 vs 0.7373 in process) and took the search at 100k chunks to 1.25x its
    time before the shift, against 1.04x now. A chat turn or an agent memory is one statement
    ("Wow, that's great!"), no picture of a topic: shifted toward turns, LoCoMo dev's turn
    recall@10 fell 0.764 -> 0.756 (docs/benchmarks.md, session 20)."""
    best = hits[: options.rocchio_hits]
    if options.rocchio_hits <= 0 or options.rocchio_weight <= 0 or any(h.source_type in STATEMENTS for h in best):
        return None
    if _meaning_disagrees(hits, best):
        return None
    import numpy as np

    vectors = list(known.vectors([h.chunk_id for h in best]).values())
    if not vectors:
        return None
    shifted = vector + options.rocchio_weight * np.mean(vectors, axis=0)
    norm = float(np.linalg.norm(shifted))
    return (shifted / norm).astype(vector.dtype) if norm > 0 else None


def _coverage(conn, terms, analyzed, weights, hits: list[Hit]) -> tuple[float, int]:
    """(the best idf-weighted share of the query's terms a hit holds, its matched terms). The gate
    needs the best-covering hit near the top; scanning past ten adds cost, not signal."""
    return _coverage_of_texts(conn, terms, analyzed, weights, [h.text for h in hits[:COVERAGE_DEPTH]])


def _coverage_of_texts(conn, terms, analyzed, weights, texts: list[str]) -> tuple[float, int]:
    needed = coverage_weights(terms, analyzed, weights)
    alternatives = stem_alternatives(conn, terms, analyzed)
    exact = exact_forms(terms, analyzed)
    vietnamese = bool(exact) and has_vietnamese(" ".join(term.word for term in terms))
    found = matches(conn, texts, needed, prefix_tokens(terms, analyzed), alternatives, exact, vietnamese)
    return best_coverage(found, needed)


def _best_match_holding_every_term(conn, terms, analyzed, weights, known: "PoolRows", lexical) -> int | None:
    """The candidate with the best BM25 when it holds every term of the query (as the gate counts
    them: `_coverage`), else None. Only the best one is read: a query matched in full is
    matched best there, and one passage read keeps the check cheap on every question."""
    best = max((c for c in lexical if c in known.rows and lexical[c] > 0), key=lambda c: (lexical[c], -c), default=None)
    if best is None:
        return None
    coverage, _ = _coverage_of_texts(conn, terms, analyzed, weights, [known.rows[best]["text"]])
    return best if coverage >= FULL_COVERAGE else None


def coverage_of(store: Store, query: str, hits: list[Hit]) -> tuple[float, int]:
    """`_coverage` of a query over hits chosen elsewhere (`mem ask --as-of` keeps some of a search's)."""
    if symbols := symbol_query(query):
        return symbol_coverage([h.text for h in hits[:COVERAGE_DEPTH]], symbols)
    terms = fts.search_terms(store.conn, query)
    analyzed = [sorted(s) for s in fts.analyze(store.conn, [t.word for t in terms])] if terms else []
    return _coverage(store.conn, terms, analyzed, term_weights(store.conn, analyzed), hits)


def _meaning_disagrees(hits: list[Hit], best: list[Hit]) -> bool:
    """Whether another first-pass hit is much closer to the question in meaning than every best hit
    (SHIFT_GAP in cosine): the best hits were found by a common word alone, and feedback from them
    would pull the query away from the topic. Seven short commits "change N ..." (cosine 0.2) led
    "why did I change the parser?", the parser's note (0.48) sank below them and the gate refused.
    On the gate's calibration sets (MiniLM; SciFact and zh/ja/de/es/vi, 300 questions each) it
    changes no ranking at 0.15, 0.2 or 0.25; a cosine floor on the best hits instead cost de 0.04."""
    closest = max((h.components.get("cosine", 0.0) for h in hits), default=0.0)
    return closest - max((h.components.get("cosine", 0.0) for h in best), default=closest) >= SHIFT_GAP


def _search_comparison(
    store: Store, query: str, sides: tuple[str, str], options: SearchOptions, semantic: "SemanticIndex | None"
) -> SearchResult:
    """Three passes (whole question, X, Y) merged with reserved slots so neither side crowds out
    the other; a side with no evidence is reported instead of silently missing."""
    whole = _search_one(store, query, options, semantic)
    reserved = max(1, options.top_k // 3)
    passes = [(side, _search_one(store, side, replace(options, top_k=reserved), semantic)) for side in sides]
    chosen: dict[int, Hit] = {}
    missing = []
    for side, result in passes:
        # A side's pass always returns something once vectors exist; count it only if it is not weak.
        found = [] if is_weak(result, options) else result.hits
        if not found:
            missing.append(side)
        for hit in found:
            chosen.setdefault(hit.chunk_id, replace(hit, sub_query=side))
    for hit in whole.hits:
        if len(chosen) >= options.top_k:
            break
        chosen.setdefault(hit.chunk_id, replace(hit, sub_query=query))
    hits = sorted(chosen.values(), key=lambda h: (-h.score, h.chunk_id))[: options.top_k]
    similarities = [r.similarity for _, r in passes if r.similarity is not None] + (
        [whole.similarity] if whole.similarity is not None else []
    )
    best = max([whole] + [r for _, r in passes], key=lambda r: (r.coverage, r.matched_terms))
    return SearchResult(
        hits,
        whole.terms,
        best.coverage,
        max(similarities) if similarities else None,
        whole.hybrid,
        {"sides": list(sides), "missing": missing},
        whole.term_weights,
        best.matched_terms,
        whole.embed_model,
        [],  # a comparison is never refused for a name: a side without evidence is reported instead
    )
