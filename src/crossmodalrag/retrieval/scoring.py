"""Scoring a search's candidate pool: each chunk's components (lexical, vector, recency, title,
usage; search.py's docstring defines them) blended by the profile's weights, then the factors for OCR
confidence, a date the question names and a superseded agent memory."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace
from typing import TYPE_CHECKING

from crossmodalrag.retrieval.coverage import coverages
from crossmodalrag.retrieval.dates import DATE_FACTOR, within
from crossmodalrag.retrieval.filters import CHUNK_TIME, NEWEST_TIME
from crossmodalrag.retrieval.fusion import blend, min_max, reciprocal_rank_fusion, scale_to_best
from crossmodalrag.retrieval.gate import NEVER, model_cosines
from crossmodalrag.types import Hit

if TYPE_CHECKING:
    import numpy as np

    from crossmodalrag.retrieval.search import SearchOptions
    from crossmodalrag.retrieval.semantic import SemanticIndex

SECONDS_PER_DAY = 86400.0
SUPERSEDED_FACTOR = 0.5


class PoolRows:
    """A search's candidates with their rows, title matches and usage strength, read once, and their
    vectors, read when first needed: the shifted second pass (`_shifted_query`) ranks the same chunks."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        pool: set[int],
        term_weights: dict[str, float],
        semantic: "SemanticIndex | None",
        options: SearchOptions,
    ) -> None:
        self.semantic = semantic
        ids = sorted(pool)
        self.rows: dict[int, sqlite3.Row] = {  # a chunk removed by a concurrent writer is simply absent
            row["id"]: row
            for row in conn.execute(
                "SELECT c.id, c.source_id, c.text, c.locator, c.modality, c.metadata, s.uri, s.source_type, s.title, "
                f"{CHUNK_TIME} AS timestamp, c.char_start, c.char_end, c.byte_start, c.byte_end, m.superseded_by, "
                f"{NEWEST_TIME} AS newest "  # in this statement: one round trip less
                "FROM chunks c JOIN sources s ON s.id = c.source_id LEFT JOIN agent_memories m ON m.source_id = s.id "
                f"WHERE c.id IN ({','.join('?' * len(ids))})",
                ids,
            )
        }
        titles = sorted({row["title"] for row in self.rows.values()})
        self.title_match = dict(zip(titles, coverages(conn, titles, term_weights), strict=True))
        usage = semantic is not None and options.weights(hybrid=True).get("usage")
        self.rehearsed = _rehearsal(conn, ids, options) if usage else {}
        self._vectors: dict[int, "np.ndarray | None"] = {}
        # The best BM25 candidate when it holds every word of the question (search.py sets it): see
        # `lift_exact_match`.
        self.exact_match: int | None = None

    def vectors(self, ids: list[int]) -> dict[int, "np.ndarray"]:
        """The representative (first piece's) vector of each of `ids` that has one."""
        assert self.semantic is not None
        missing = [i for i in ids if i not in self._vectors]
        if missing:
            found = self.semantic.representative_vectors(missing)
            self._vectors.update({i: found.get(i) for i in missing})
        return {i: vector for i in ids if (vector := self._vectors[i]) is not None}


def score_pool(
    known: PoolRows,
    lexical: dict[int, float],
    cosines: dict[int, float],
    asked: dict[int, float],
    options: SearchOptions,
    model: str | None = None,
    dated: list[tuple[float, float]] | None = None,
) -> list[Hit]:
    """Each candidate's components and blended score, ranking by `cosines`, reporting `asked`."""
    hybrid = known.semantic is not None
    rows, title_match, rehearsed = known.rows, known.title_match, known.rehearsed
    newest = next(iter(rows.values()))["newest"] if rows else None
    lexical_norm = scale_to_best({i: lexical.get(i, 0.0) for i in rows})
    vector_norm = min_max({i: cosines[i] for i in rows if i in cosines}) if hybrid else {}
    rrf = _rrf(lexical, cosines) if options.fusion == "rrf" else {}
    weights, lexical_blend = options.weights(hybrid), options.weights(False)
    cosines_of_model = model_cosines(options, model)
    close = cosines_of_model.close if cosines_of_model else NEVER
    hits = []
    for chunk_id, row in rows.items():
        components = {
            "bm25": lexical.get(chunk_id, 0.0),
            "lexical": lexical_norm[chunk_id],
            "recency": _recency(row["timestamp"], newest, options.recency_half_life_days),
            "title": title_match.get(row["title"], 0.0),
        }
        if hybrid:
            cosine = asked.get(chunk_id, 0.0)  # the question's own, even when a shifted query ranks
            # Usage re-ranks relevant candidates only: being looked at often never makes a chunk relevant.
            relevant = lexical.get(chunk_id, 0.0) > 0 or cosine >= close
            usage = rehearsed.get(chunk_id, 0.0) if relevant else 0.0
            components.update(cosine=cosine, vector=vector_norm.get(chunk_id, 0.0), usage=usage)
            if cosines is not asked:  # ranked by the question moved toward its best hits (_shifted_query)
                components["shifted_cosine"] = cosines.get(chunk_id, 0.0)
        # A chunk not embedded yet (an interrupted embedding run) is ranked as a search without vectors
        # would rank it: scored 0 for meaning, an exact match of a rare word sank below 50 unrelated chunks.
        unembedded = hybrid and chunk_id not in cosines
        score = rrf.get(chunk_id, 0.0) if rrf else blend(components, lexical_blend if unembedded else weights)
        if rrf:
            components["rrf"] = score
        extras = _chunk_extras(row)
        if "ocr_confidence" in extras:
            # Weak OCR is weak evidence: it ranks below an equally matching clean text.
            components["ocr_confidence"] = extras["ocr_confidence"]
            components["ocr_factor"] = ocr_factor(extras["ocr_confidence"])
            score *= components["ocr_factor"]
        if dated and within(row["timestamp"], dated):
            components["date_factor"] = DATE_FACTOR  # dated when the query says (retrieval/dates.py)
            score *= DATE_FACTOR
        if row["superseded_by"] is not None:
            # An agent memory whose fact a newer memory restated (agent/memories.py): kept, ranked lower.
            components["superseded"] = 1.0
            score *= SUPERSEDED_FACTOR
        hits.append(
            Hit(
                chunk_id,
                row["uri"],
                row["source_type"],
                row["modality"],
                row["title"],
                row["locator"],
                row["text"],
                row["timestamp"],
                score,
                components,
                page=extras.get("page"),
                page_label=extras.get("page_label"),
                ocr_confidence=extras.get("ocr_confidence"),
                source_id=row["source_id"],
                char_start=row["char_start"],
                char_end=row["char_end"],
                byte_start=row["byte_start"],
                byte_end=row["byte_end"],
            )
        )
    hits.sort(key=lambda h: (-h.score, h.chunk_id))
    successor_of = {row["source_id"]: row["superseded_by"] for row in rows.values() if row["superseded_by"] is not None}
    return below_successors(lift_exact_match(hits, known.exact_match), successor_of)


def below_successors(hits: list[Hit], successor_of: dict[int, int]) -> list[Hit]:
    """`hits` in their order, but each superseded memory (source id -> the memory that superseded it,
    `successor_of`) moved just below its successor's first hit, scored just under it, where both are
    hits. SUPERSEDED_FACTOR alone does not do it: "We use Redis for session storage" after "We do not
    use Redis ..." is closer in words but 0.03 further in meaning, and min-max over a pool of two gave
    it vector 0.0 to the old one's 1.0, a lead the factor halved but kept; and fused lists
    (agent/recall.py) rank by places, where a factor counts only as far as it moves a place."""
    if not successor_of:
        return hits
    ordered = list(hits)
    for _ in range(len(ordered)):  # each pass moves one hit; a cycle of marks stops at the bound
        moved = _move_below_successor(ordered, successor_of)
        if not moved:
            break
    return ordered


def _move_below_successor(ordered: list[Hit], successor_of: dict[int, int]) -> bool:
    """Move the first hit ranked above its successor's first hit to just below it (in place)."""
    first_place: dict[int, int] = {}
    for place, hit in enumerate(ordered):
        first_place.setdefault(hit.source_id, place)
    for place, hit in enumerate(ordered):
        newer = first_place.get(successor_of.get(hit.source_id, -1))
        if newer is not None and newer > place:
            score = min(hit.score, math.nextafter(ordered[newer].score, -math.inf))
            ordered.insert(newer + 1, replace(hit, score=score))
            del ordered[place]
            return True
    return False


def lift_exact_match(hits: list[Hit], exact_match: int | None) -> list[Hit]:
    """`hits` with the chunk `exact_match` (the best word match, holding every word of the question)
    raised just above every chunk that holds none of them, its lift shown as the component
    `exact_floor`. An embedding model has no meaning for an identifier, a code or a ticket number
    (MiniLM cuts "zqmark12x" into word pieces), and the vector component, spread min-max over the
    pool, turns its noise into a full 0.55 of the score: over 45 notes the only note holding the
    code ranked 3rd behind two holding no word of it (cosines 0.80 and 0.28 to its 0.02); over
    335k chunks it fell out of the top 5 and the gate refused, having seen none of its words."""
    exact = next((h for h in hits if h.chunk_id == exact_match), None)
    unmatched = max((h.score for h in hits if h.components["bm25"] <= 0), default=None)
    if exact is None or unmatched is None or exact.score > unmatched:
        return hits
    lifted = replace(
        exact, score=math.nextafter(unmatched, math.inf), components={**exact.components, "exact_floor": unmatched}
    )
    return sorted((lifted if h is exact else h for h in hits), key=lambda h: (-h.score, h.chunk_id))


def _rehearsal(conn: sqlite3.Connection, ids: list[int], options: SearchOptions) -> dict[int, float]:
    from crossmodalrag.memory.usage import chunk_target, strength

    found = strength(conn, [chunk_target(i) for i in ids], options.usage_half_life_days, options.usage_saturation)
    return {int(target.split(":", 1)[1]): value for target, value in found.items()}


def ocr_factor(confidence: float | None) -> float:
    """Score multiplier for OCR text: 1.0 at full confidence, down to 0.5 at none."""
    return 1.0 if confidence is None else 0.5 + 0.5 * max(0.0, min(1.0, confidence))


def _chunk_extras(row: sqlite3.Row) -> dict:
    """Page and its label (PDF) and OCR confidence (images) from chunk metadata; text and code have none."""
    if row["modality"] not in ("pdf", "image"):
        return {}
    metadata = json.loads(row["metadata"])
    return {k: metadata[k] for k in ("page", "page_label", "ocr_confidence") if metadata.get(k) is not None}


def _rrf(lexical: dict[int, float], cosines: dict[int, float]) -> dict[int, float]:
    rankings = [sorted(lexical, key=lambda i: -lexical[i]), sorted(cosines, key=lambda i: -cosines[i])]
    return reciprocal_rank_fusion([r for r in rankings if r])


def _recency(timestamp: float | None, newest: float | None, half_life_days: float) -> float:
    if timestamp is None or newest is None or half_life_days <= 0:
        return 0.0
    age_days = max(0.0, newest - timestamp) / SECONDS_PER_DAY
    return 0.5 ** (age_days / half_life_days)
