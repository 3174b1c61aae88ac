"""Top-k BM25 on PostgreSQL without scoring every matching chunk (an ask's lexical side, session 8).

lexical.SERVER_BM25 scores every chunk holding any phrase of the query: at 1M chunks a question of
common words holds ~150k of them, and that statement alone took ~0.5 s. An ask keeps only the top
`limit`, so this module finds that top exactly, as a MaxScore search does:

1. One statement counts each phrase's holders (streaming over the postings' covering primary key,
   schema 7: no heap page read), derives each phrase's idf as SERVER_BM25 does, and scores exactly
   (every phrase, the same doubles as SERVER_BM25) only the chunks holding the rarest phrases: the
   phrases of fewest holders, taken while they total at most CANDIDATE_BUDGET, and until they hold
   `limit` (a top needs that many). It returns every phrase's idf and largest term weight, and the
   best `limit` of those candidates.
2. A phrase adds at most idf x its largest term weight (over its holders, from the same counting
   pass) to any chunk's score. Let theta be the `limit`-th candidate's score. The phrases whose bounds, summed from the
   smallest, stay below theta cannot lift a chunk holding only them into the top: such chunks are
   skipped. If a phrase outside that set was not among the rarest, the top is not proven: a second
   statement scores every match on the server as before and returns its top `limit` (a question
   of only common words, or whose rare words fewer than `limit` chunks hold, pays the full cost).

The result is exact: the same `limit` chunks, scores and tie order (score desc, chunk id) as sorting
SERVER_BM25's every match, not an approximation (tests compare them). What is saved is scoring and
sending every match: the holders of every phrase are still counted for its idf (an index-only pass
over its postings, nothing kept).
Prefix words (`cach*`) and filtered or non-`any` searches keep lexical.bm25_scores (every match).
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from crossmodalrag.index import fts
from crossmodalrag.store.postgres.lexical import BM25_OF_HELD, K1, B, _phrases, _scored_by_server

CANDIDATE_BUDGET = 20_000  # holders of the rarest phrases scored in the first statement
ROUNDING = 1e-9  # the bound and a score round differently: the bound is widened by this share

_MEMBERS = "members AS MATERIALIZED (SELECT * FROM unnest(?::int[], ?::text[], ?::int[]) AS m(phrase, token, size))"

# (phrase, chunk, tf, length) for the chunks holding every token of a phrase of `{members}`: a
# one-word phrase's postings as they are, several words grouped by chunk (tf: the rarest word's).
_HOLDERS = """
  SELECT m.phrase, p.chunk_id, p.body_tf AS tf, p.length
  FROM {members} m JOIN chunk_postings p ON p.lexeme = m.token WHERE m.size = 1
  UNION ALL
  SELECT m.phrase, p.chunk_id, MIN(p.body_tf), MAX(p.length)
  FROM {members} m JOIN chunk_postings p ON p.lexeme = m.token WHERE m.size > 1
  GROUP BY 1, 2 HAVING COUNT(*) = MAX(m.size)
"""

# Every phrase's term frequency and length in the chunks of the array {ids} (a hybrid ask's few nearest
# chunks): one index scan per token that skips between the ids. (For TOP_BM25's thousands of
# candidates a hash join is cheaper: 17k ids over 7 tokens took ~0.4 s of CPU this way at 530k chunks.)
_HELD = """
held AS MATERIALIZED (
  SELECT m.phrase, p.chunk_id, MIN(p.body_tf) AS tf, MAX(p.length) AS length
  FROM members m JOIN chunk_postings p ON p.lexeme = m.token AND p.chunk_id = ANY({ids})
  GROUP BY 1, 2 HAVING COUNT(*) = MAX(m.size)
)"""

# Counting streams over the postings index-only (schema 7's covering key): no posting is kept. Each
# phrase's largest term weight tf (k1 + 1) / (tf + k1 (1 - b + b length / average)) comes from the
# same pass: times its idf, the most it adds to any chunk's score (MaxScore's bound; BM25_OF_HELD
# multiplies in another order, hence ROUNDING). Only the chosen phrases' holders are scored.
TOP_BM25 = f"""
WITH {_MEMBERS},
stats AS MATERIALIZED (
  SELECT COALESCE(SUM(chunks), 0)::float8 AS total, COALESCE(SUM(length), 0)::float8 AS sum FROM chunk_stats
),
average AS MATERIALIZED (SELECT CASE WHEN total > 0 THEN sum / total ELSE 1.0::float8 END AS length FROM stats),
counted AS MATERIALIZED (
  SELECT phrase, COUNT(*) AS holders,
         MAX(h.tf * ({K1}::float8 + 1) / (h.tf + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * h.length / a.length)))
           AS weight
  FROM ({_HOLDERS.format(members="members")}) AS h CROSS JOIN average a GROUP BY phrase
),
idf AS MATERIALIZED (
  SELECT phrase, holders, weight,
         GREATEST(ln((GREATEST(total, holders) - holders + 0.5::float8) / (holders + 0.5::float8)), 1e-6::float8) AS idf
  FROM counted CROSS JOIN stats
),
chosen AS MATERIALIZED (  -- the rarest phrases while their holders fit the budget, and until `limit` are held
  SELECT phrase FROM (
    SELECT phrase, holders, SUM(holders) OVER (ORDER BY holders, phrase ROWS UNBOUNDED PRECEDING) AS upto FROM idf
  ) AS ranked
  WHERE upto <= ? OR upto - holders < ?
),
chosen_members AS MATERIALIZED (SELECT m.* FROM members m JOIN chosen USING (phrase)),
candidates AS MATERIALIZED (
  SELECT DISTINCT chunk_id FROM ({_HOLDERS.format(members="chosen_members")}) AS chosen_holder
),
held AS MATERIALIZED (  -- each token's postings again, kept when a candidate's: `+ 0` makes it a hash join
  SELECT m.phrase, p.chunk_id, MIN(p.body_tf) AS tf, MAX(p.length) AS length
  FROM members m JOIN chunk_postings p ON p.lexeme = m.token JOIN candidates c ON c.chunk_id = p.chunk_id + 0
  GROUP BY 1, 2 HAVING COUNT(*) = MAX(m.size)
),
scored AS ({BM25_OF_HELD})
SELECT i.phrase, NULL::bigint, i.idf, (SELECT length FROM average), i.weight, c.phrase IS NOT NULL
FROM idf i LEFT JOIN chosen c USING (phrase)
UNION ALL
(SELECT NULL, chunk_id, score, NULL, NULL, NULL FROM scored ORDER BY score DESC, chunk_id LIMIT ?)
"""

# The BM25 of given chunks with the idf and average length of an earlier TOP_BM25 (the same snapshot's
# statistics, so the scores agree with its top): for the cosine-nearest chunks of a hybrid ask.
SCORES_OF = f"""
WITH {_MEMBERS},
idf AS MATERIALIZED (SELECT * FROM unnest(?::int[], ?::float8[]) AS i(phrase, idf)),
average AS MATERIALIZED (SELECT ?::float8 AS length),
{_HELD.format(ids="?::bigint[]")},
scored AS ({BM25_OF_HELD})
SELECT chunk_id, score FROM scored
"""


class TopBm25(NamedTuple):
    """The best `limit` chunks by BM25, and the statistics that scored them."""

    scores: dict[int, float]  # chunk id -> BM25, at most `limit` chunks, best first
    members: tuple[list[int], list[str], list[int]]  # (phrase number, token, tokens in the phrase)
    idf: dict[int, float]  # phrase number -> idf
    average: float  # mean chunk length
    limit: int

    def scores_of(self, conn, ids: Iterable[int]) -> dict[int, float]:
        """BM25 of `ids` that hold some phrase (a chunk holding none is absent), under the same
        statistics; one statement, none when fewer than `limit` chunks hold a phrase (all are here)."""
        ids = sorted(set(ids) - set(self.scores))
        if not ids or len(self.scores) < self.limit:
            return {}
        rows = conn.execute(SCORES_OF, (*self.members, list(self.idf), list(self.idf.values()), self.average, ids))
        return dict(rows.fetchall())


def top_bm25(conn, query: str, terms: list[fts.QueryTerm], analyzed: list[list[str]], limit: int) -> TopBm25 | None:
    """The top `limit` chunks by BM25 in mode `any` without filters, exactly as the first `limit` of
    lexical.bm25_scores sorted by (score desc, chunk id); None when a prefix word asks for every match."""
    phrases = [p for group in _phrases(terms, analyzed, "any", query) for p in group]
    if any(prefix for phrase in phrases for _, prefix in phrase):
        return None
    members = _members(phrases)
    top = _ranked(conn, members, limit)
    if top is None:  # nothing to match
        return TopBm25({}, members, {}, 1.0, limit)
    scores, idf, weight, chosen, average = top
    if _essential(scores, idf, weight, limit) - chosen:  # the rarest phrases cannot decide the top
        scores = _scored_by_server(conn, phrases, {t: False for phrase in phrases for t, _ in phrase}, limit)
    return TopBm25(scores, members, idf, average, limit)


def _members(phrases: list[list[tuple[str, bool]]]) -> tuple[list[int], list[str], list[int]]:
    rows = sorted(
        {(number, token, len({t for t, _ in phrase})) for number, phrase in enumerate(phrases) for token, _ in phrase}
    )
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _ranked(conn, members, limit: int):
    """TOP_BM25: (the top of the rarest phrases' holders, idf and largest term weight per phrase held
    by some chunk, the phrases whose holders were scored, average length); None when there is no phrase."""
    if not members[0]:
        return None
    rows = conn.execute(TOP_BM25, (*members, CANDIDATE_BUDGET, limit, limit)).fetchall()
    phrases = [row for row in rows if row[1] is None]
    return (
        {chunk: score for _, chunk, score, *_ in rows if chunk is not None},
        {phrase: idf for phrase, _, idf, *_ in phrases},
        {phrase: weight for phrase, *_, weight, _ in phrases},
        {phrase for phrase, *_, scored in phrases if scored},
        phrases[0][3] if phrases else 1.0,  # no phrase held by any chunk: nothing is scored
    )


def _essential(scores: dict[int, float], idf: dict[int, float], weight: dict[int, float], limit: int) -> set[int]:
    """Phrases whose holders may reach the top: all but those whose bounds (idf x largest weight),
    summed from the smallest, stay below the `limit`-th score found (all while fewer were found)."""
    held = sorted(weight, key=lambda p: (idf[p] * weight[p], p))
    if len(scores) < limit:
        return set(held)
    theta, bound, skipped = min(scores.values()), 0.0, 0
    for phrase in held:
        bound += idf[phrase] * weight[phrase]
        if bound * (1 + ROUNDING) >= theta:
            break
        skipped += 1
    return set(held[skipped:])
