"""L3 concepts: events clustered by meaning, across episodes, with stable ids and names.

Clustering walks the events oldest first and puts each into the closest existing cluster when its
centroid is within the similarity threshold, else starts a new one. New (newer) events therefore
never move old ones. A new concept's id comes from its oldest member, and a concept that keeps any
of its events keeps its id (episodes alike, episodes.lasting_ids): ids are stable as memory grows and
notes are edited. A concept keeps the name it got first; the LLM names only new concepts (a short
label, validated), with the most distinctive terms as the fallback, so an unchanged memory rebuilds
with zero model calls.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from crossmodalrag.memory.episodes import (
    EventRow,
    centroid,
    lasting_ids,
    load_events,
    member_links,
    members_of,
    replace_level,
)
from crossmodalrag.memory.nodes import Node, rows, stable_id, with_evidence
from crossmodalrag.retrieval.stopwords import STOPWORDS
from crossmodalrag.store import Store

if TYPE_CHECKING:
    from crossmodalrag.answer.llm import LLM

MIN_MEMBERS = 2  # a topic seen once is an event, not a concept
# The default clustering threshold on each embedding model's own cosine scale (a concept_sim_threshold set
# by the user wins). MiniLM's 0.6 is the original; multilingual-e5 puts unrelated events at 0.78-0.89 (LoCoMo
# dev's gold events), so at 0.6 every event fell into one concept. 0.90 is the e5 threshold whose clusters of
# those events agree best with MiniLM's at 0.6 (bench/concept_threshold.py, docs/benchmarks.md); mapping 0.6
# through the gate's floor and close (retrieval/gate.py) gives 0.855, which agrees less and still merged them.
CONCEPT_THRESHOLDS = {"sentence-transformers/all-MiniLM-L6-v2": 0.6, "multilingual-e5-small": 0.90}
UNFITTED_THRESHOLD = 0.6  # a model nobody fitted: MiniLM's, as before thresholds were per model
TERM = re.compile(r"[^\W\d_][\w'-]{2,}")
LABEL = re.compile(r"^[\w][\w '/+#.-]{1,38}[\w+#.]$")


def cluster(events: list[EventRow], threshold: float) -> list[list[EventRow]]:
    """Leader clustering over normalized vectors, oldest event first (see the module docstring)."""
    import numpy as np

    sums: list = []
    groups: list[list[EventRow]] = []
    centroids = None
    for event in events:
        if event.vector is None:
            continue
        best = -1
        if centroids is not None and len(groups):
            scores = centroids @ event.vector
            best = int(np.argmax(scores))
            if scores[best] < threshold:
                best = -1
        if best < 0:
            groups.append([event])
            sums.append(event.vector.astype(np.float64).copy())
            row = event.vector[None, :]
            centroids = row.copy() if centroids is None else np.vstack([centroids, row])
        else:
            groups[best].append(event)
            sums[best] += event.vector
            centroids[best] = sums[best] / max(float(np.linalg.norm(sums[best])), 1e-12)
    return groups


def distinctive_terms(members: list[EventRow], document_frequency: Counter, total: int, n: int = 3) -> list[str]:
    """The members' words weighted by tf-idf against all events: the deterministic concept name."""
    counts = Counter(term for event in members for term in _terms(event.statement))
    scored = {t: c * math.log(1 + total / (1 + document_frequency[t])) for t, c in counts.items()}
    return sorted(scored, key=lambda t: (-scored[t], t))[:n]


def _terms(text: str) -> set[str]:
    return {w.lower() for w in TERM.findall(text) if w.lower() not in STOPWORDS}


def llm_label(llm: "LLM", statements: list[str]) -> str | None:
    """A 1-5 word label for a topic from a few of its events, or None if the answer is not one."""
    from crossmodalrag.answer.llm import Generation, LLMError

    schema = {
        "type": "object",
        "properties": {"label": {"type": "string", "minLength": 3, "maxLength": 40}},
        "required": ["label"],
    }
    prompt = 'Name the common topic of these events in 1 to 5 words. Answer JSON {"label": ...}.\n' + "\n".join(
        f"- {s}" for s in statements[:6]
    )
    try:
        raw = "".join(llm.stream([{"role": "user", "content": prompt}], Generation(30, 0.0, json_schema=schema)))
    except LLMError:
        return None
    match = re.search(r'"label"\s*:\s*"([^"]{3,40})"', raw)
    label = " ".join(match.group(1).split()) if match else ""
    return label if LABEL.match(label) and len(label.split()) <= 5 else None


def concept_threshold(setting: float | None, model: str | None) -> float:
    """The clustering threshold in force: the one set, else the embedding model's own (CONCEPT_THRESHOLDS)."""
    return setting if setting is not None else CONCEPT_THRESHOLDS.get(model or "", UNFITTED_THRESHOLD)


def build_concepts(
    store: Store,
    threshold: float | None,
    llm: "LLM | None" = None,
    events: list[EventRow] | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """Rebuild L3 from the events (skipped, with the reason, when no event has a vector). `threshold`
    None: the embedding `model`'s own."""
    events = load_events(store.conn) if events is None else events
    if not any(e.vector is not None for e in events):
        return {"skipped": "no event has an embedding yet: run `mem reindex-embeddings`, then `mem build-memory`"}
    groups = [g for g in cluster(events, concept_threshold(threshold, model)) if len(g) >= MIN_MEMBERS]
    names = {row["id"]: row["title"] for row in rows(store.conn, "level = 'concept'")}
    frequency = Counter(t for e in events for t in _terms(e.statement))
    nodes, llm_calls = [], 0
    fresh = [stable_id("concept", members[0].id) for members in groups]
    for members, concept_id in zip(
        groups, lasting_ids(store.conn, "concept", "in_concept", groups, fresh), strict=True
    ):
        name = names.get(concept_id)
        if name is None and llm is not None:
            llm_calls += 1
            name = llm_label(llm, [e.statement for e in members])
        if name is None:
            name = " / ".join(distinctive_terms(members, frequency, len(events))) or members[0].statement[:40]
        nodes.append(_concept_node(concept_id, name, members))
    changed, removed = replace_level(store, "concept", nodes, groups, "in_concept")
    return {"concepts": len(nodes), "changed": changed, "removed": removed, "llm_calls": llm_calls}


def why_no_concepts(conn) -> str:
    """Why the memory holds no concept, for `mem concepts` and the drift level: no events, no vectors,
    or no two events close enough in meaning (after deletes, say), each with what to do."""
    found = conn.execute(
        "SELECT COUNT(*), COUNT(vector) FROM memory_nodes WHERE level = 'event' AND supported = 1"
    ).fetchone()
    if not found[0]:
        return "no events yet: run `mem build-memory` (notes need a language model, git commits do not)"
    if not found[1]:
        return "no event has an embedding yet: run `mem reindex-embeddings`, then `mem build-memory`"
    return (
        f"no {MIN_MEMBERS} events are close enough in meaning to form one (CMRAG_CONCEPT_SIM_THRESHOLD);"
        " `mem build-memory` clusters them again as events are added"
    )


def _concept_node(concept_id: str, name: str, members: list[EventRow]) -> Node:
    times = [e.time for e in members if e.time is not None]
    return Node(
        id=concept_id,
        level="concept",
        title=name,
        statement=" ".join(e.statement for e in members[:3])[:400],
        first_time=min(times) if times else None,
        last_time=max(times) if times else None,
        links=member_links(members),
        vector=centroid([e.vector for e in members]),
        metadata={"events": len(members), "projects": len({e.project for e in members})},
    )


def list_concepts(store: Store, top: int = 20, min_support: int = 1) -> list[dict[str, Any]]:
    """Concepts by centrality, each with its member events and supporting chunks."""
    found = rows(
        store.conn,
        "level = 'concept' AND json_extract(metadata, '$.events') >= ?",
        (min_support,),
        "centrality DESC, id",
        top,
    )
    out = with_evidence(store.conn, found, ("member",))
    members = members_of(store.conn, [row["id"] for row in found], "in_concept")
    for item, row in zip(out, found, strict=True):
        item["events"] = members.get(item["id"], [])
        item["support"] = len(item["events"])
        item["projects"] = _json(row["metadata"]).get("projects", 0)
    return out


def _json(text: str) -> dict:
    import json

    return json.loads(text or "{}")
