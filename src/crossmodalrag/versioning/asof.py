"""`mem ask --as-of`: answer from what memory held at a past time or seq, without copying the database.

Sources whose content is the same then and now are searched where they live; only the sources that
changed or went since then are rebuilt, from the log's states, into a small in-memory store, searched
the same way, and the two rankings merged. Sources added since are left out. When every source of
then is still the same now, the live vectors are those of the same versions and the search is hybrid;
otherwise it is lexical (old versions have no vectors, and one ranking must compare both sides), and a
notice says so. Forgotten content cannot take part, which a notice says too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from crossmodalrag.answer.evidence import Retriever
from crossmodalrag.retrieval.search import SearchResult, coverage_of, search
from crossmodalrag.store import Store, open_store
from crossmodalrag.versioning.history import forgotten_since, resolve_point, states_at
from crossmodalrag.versioning.log import head, load_state
from crossmodalrag.versioning.sources import restore_source
from crossmodalrag.wording import counted

WIDEN = 4  # live hits asked for per wanted hit: some belong to sources that changed since


@dataclass
class PastState:
    """The sources present at `seq`: live ones still the same, and the rebuilt older versions."""

    seq: int
    same: set[str]  # uris whose live content is the content at seq
    older: Store | None  # the rebuilt versions of sources that changed or went since
    changed: int = 0  # sources present then whose content changed or went since
    erased: int = 0  # ... of which `mem forget` erased the content
    unrecorded: int = 0  # ... of which the log never kept the content (versioning off, or edited outside mem)
    notices: list[str] = field(default_factory=list)


def past_state(store: Store, point: str) -> PastState:
    """Work out the state at a point (see resolve_point). Raises CMRAGError for an unknown point."""
    conn = store.conn
    seq = resolve_point(conn, point)
    then = {target: digest for (kind, target), digest in states_at(conn, seq).items() if kind == "source"}
    now = {target: digest for (kind, target), digest in states_at(conn, head(conn)[0]).items() if kind == "source"}
    same = {uri for uri, digest in then.items() if now.get(uri) == digest}
    states = [(uri, load_state(conn, digest)) for uri, digest in then.items() if uri not in same]
    result = PastState(seq, same, None)
    kept = [(uri, state) for uri, state in states if state is not None]
    missing = [uri for uri, state in states if state is None]
    result.changed, result.erased = len(states), sum(1 for uri in missing if forgotten_since(conn, "source", uri, seq))
    result.unrecorded = len(missing) - result.erased
    if kept:
        result.older = _rebuild(kept)
    result.notices.append(f"answering from memory as of seq {seq}: {len(then)} sources")
    if result.erased:
        result.notices.append(f"{counted(result.erased, 'source')} held then, forgotten since, left out")
    if result.unrecorded:
        result.notices.append(
            f"{counted(result.unrecorded, 'source')} held then, left out: the log did not keep that version"
            " (changed with CMRAG_VERSIONING=off, or outside mem)"
        )
    return result


def _rebuild(states: list[tuple[str, dict]]) -> Store:
    older = open_store(Path(":memory:"))
    older.conn.versioning = False  # type: ignore[attr-defined]  (a scratch copy: nothing to record)
    with older.transaction() as conn:
        for uri, state in states:
            restore_source(conn, uri, state)
    return older


@dataclass
class PastRetriever(Retriever):
    """A Retriever whose searches see the memory as it was at `past.seq`."""

    past: PastState | None = None

    def search(self, query: str, answering: bool = False) -> SearchResult:
        assert self.past is not None
        wide = replace(self.options, top_k=self.options.top_k * WIDEN)
        live = search(self.store, query, wide, self.semantic)
        hits = [hit for hit in live.hits if hit.source_uri in self.past.same]
        results = [live]
        if self.past.older is not None:
            older = search(self.past.older, query, self.options, None)
            for hit in older.hits:
                hit.source_id, hit.chunk_id = None, -hit.chunk_id  # not rows of the live database
            hits += older.hits
            results.append(older)
        hits = sorted(hits, key=lambda hit: -hit.score)[: self.options.top_k]
        # The abstention gate reads what the kept hits hold: the live search's coverage and similarity
        # counted sources added since (a question only they answer was answered from unrelated notes).
        coverage, matched = coverage_of(self.store, query, hits) if hits else (0.0, 0)
        cosines = [hit.components["cosine"] for hit in hits if "cosine" in hit.components]
        unknown = [name for name in live.unknown_names if all(name in r.unknown_names for r in results)]
        result = replace(live, hits=hits, coverage=coverage, matched_terms=matched, unknown_names=unknown)
        result = replace(result, similarity=max(cosines) if cosines and live.similarity is not None else None)
        if self.past.older is not None:  # two lexical rankings merged: no hybrid score or similarity
            result = replace(result, hybrid=False, similarity=None)
        return result


def as_of(retriever: Retriever, point: str) -> PastRetriever:
    """The same retrieval, over the memory at a past point. Raises CMRAGError for an unknown point."""
    past = past_state(retriever.store, point)
    semantic = retriever.semantic if past.older is None else None  # see the module docstring
    if retriever.semantic is not None and semantic is None:
        past.notices.append(
            f"ranked lexically: {counted(past.changed, 'source')} changed or went since, and "
            f"{'its older versions have' if past.changed == 1 else 'their older versions have'} no vectors"
        )
    elif semantic is None:
        past.notices.append("ranked lexically")
    return PastRetriever(retriever.store, retriever.options, semantic, retriever.notices + past.notices, past=past)
