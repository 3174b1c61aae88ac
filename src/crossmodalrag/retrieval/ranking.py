"""Ranking a scored candidate pool: a source's further chunks discounted and capped (a conversation's
turns counted one by one), near-duplicates dropped. Apart from search.py, which gathers the pool and
runs these once on the question and once on the question shifted toward its best hits."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from crossmodalrag.retrieval.diversify import WordSets, cap_per_source, drop_duplicates, drop_near_duplicates
from crossmodalrag.retrieval.reasons import favour_reasons
from crossmodalrag.retrieval.scoring import score_pool
from crossmodalrag.retrieval.values import value_words
from crossmodalrag.types import Hit

if TYPE_CHECKING:
    from crossmodalrag.retrieval.scoring import PoolRows
    from crossmodalrag.retrieval.search import SearchOptions

CONVERSATION = "conversation"  # the source type of chat sessions, whose chunks are turns


def rank_pool(known: "PoolRows", lexical, cosines, asked, options, model, dated, why: bool = False) -> list[Hit]:
    """Score the pool (ranking by `cosines`, reporting `asked`), cap chunks per source, drop near-duplicates.
    `why`: the question asks why (reasons.py)."""
    hits = score_pool(known, lexical, cosines, asked, options, model, dated)
    about_dates = bool(dated) or options.after is not None or options.before is not None
    source_of = capped_by_date if about_dates else capped_as
    if options.max_chunks_per_source > 0:
        hits = spread_sources(hits, options.repeat_source_factor, source_of)
    if why:
        hits = favour_reasons(hits)
    hits = cap_per_source(hits, source_of, options.max_chunks_per_source)
    if known.semantic is None:
        return drop_near_duplicates(hits, _body, options.dedupe_threshold, options.top_k)
    return _dedupe_with_vectors(hits, known, options)


def capped_as(hit: Hit) -> str:
    """What `max_chunks_per_source` counts a hit against: its source, but a conversation turn on its own.
    The cap keeps one long note, PDF or diff from filling the evidence with its sections. A chat
    session is one source of many turns, each a statement of its own, and what answers a question
    often sits in several turns of one session: capped at 2 a session, LoCoMo dev's gold turn was
    among the 5 excerpts of 460 of its 728 answerable questions, uncapped 526 of 731 (the same share
    of adversarial questions still fails the subject check: answer/subjects.py)."""
    return f"{hit.source_uri}#{hit.chunk_id}" if hit.source_type == CONVERSATION else hit.source_uri


def capped_by_date(hit: Hit) -> str:
    """`capped_as` for a question about a time (a date it names, or --after/--before): a source's
    sections dated differently count apart. A journal kept in one note dates each `## <day>` section
    on its own, and a question about a week or a month asks for every day of it: capped as one
    source, four days in the window showed three. A note's sections without a date of their own
    share the note's, so one long note still cannot fill the evidence with them."""
    return f"{capped_as(hit)}@{hit.timestamp}"


def spread_sources(hits: list[Hit], factor: float, source_of=capped_as) -> list[Hit]:
    """`hits` ranked again with each one's score times `factor` for every better hit of its source
    (`capped_as`), shown as the component `repeat_factor`. A source's chunks share its title and its
    topic, so its second-best passage often outscores another source's best one while saying less
    that is new, and it still rises above them when it matches much better: at 0.8 by a quarter, a third
    chunk (0.64) by half. SciFact train, in process, nDCG@10 over the distinct abstracts of ten slots:
    0.7373 at 1.0, 0.7434 at 0.8 (one chunk a source: 0.7453); FinanceBench dev, lexical: the right
    filing among the top 5 for 0.710 -> 0.774 of the questions, the right page 0.210 -> 0.194. With the
    discount, a cap of 2, 3 or 50 a source gives the same figures on both; the sample's notes gain a
    third section where no other source comes close (docs/benchmarks.md, session 23)."""
    if factor >= 1.0:
        return hits
    seen: dict[str, int] = {}
    spread = []
    for hit in hits:
        source = source_of(hit)
        above = seen.get(source, 0)
        seen[source] = above + 1
        if above:
            multiplier = factor**above
            hit = replace(hit, score=hit.score * multiplier, components={**hit.components, "repeat_factor": multiplier})
        spread.append(hit)
    spread.sort(key=lambda h: (-h.score, h.chunk_id))
    return spread


def _body(hit: Hit) -> str:
    return hit.text.split("\n", 1)[-1]  # without the breadcrumb, which siblings share


def _dedupe_with_vectors(hits: list[Hit], known: "PoolRows", options: SearchOptions) -> list[Hit]:
    """Copies (the same body text), and near-duplicates by vector similarity where both chunks have
    vectors, else by word sets, giving the same values (numbers, dates, weekdays, identifiers)."""
    threshold = options.dedupe_threshold
    if threshold <= 0:
        return hits[: options.top_k]
    vectors = known.vectors([h.chunk_id for h in hits])
    words = WordSets(_body)
    values: dict[int, set[str]] = {}
    flat: dict[int, str] = {}  # each body once, however many pairs it is compared in

    def same_values(a: Hit, b: Hit) -> bool:
        for hit in (a, b):
            if hit.chunk_id not in values:
                values[hit.chunk_id] = value_words(_body(hit))
        return values[a.chunk_id] == values[b.chunk_id]

    def same_text(a: Hit, b: Hit) -> bool:
        """The same body whatever its case and spacing: a PDF or screenshot copied under another name."""
        for hit in (a, b):
            if hit.chunk_id not in flat:
                flat[hit.chunk_id] = " ".join(_body(hit).casefold().split())
        return flat[a.chunk_id] == flat[b.chunk_id]

    def is_duplicate(a: Hit, b: Hit) -> bool:
        # A file's chunks are embedded with its name in the heading, so two copies' vectors can be far
        # apart (0.586 and 0.523 to one question); the same body text is a copy whatever the cosine.
        if same_text(a, b):
            return True
        if a.chunk_id in vectors and b.chunk_id in vectors:
            close = float(vectors[a.chunk_id] @ vectors[b.chunk_id]) >= threshold
        else:
            close = words.similar(a, b, threshold)
        return close and same_values(a, b)  # "gym on Monday" is no copy of "gym on Tuesday" (values.py)

    return drop_duplicates(hits, is_duplicate, options.top_k)
