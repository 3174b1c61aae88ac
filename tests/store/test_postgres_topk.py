"""Top-k BM25 on PostgreSQL (issue 16, session 8): the best `limit` chunks found without scoring every
match are exactly the first `limit` of every match's BM25 (scores, order, ties), on a memory where a
few words are rare and most are common, with either statement path (rarest phrases enough, or a
second statement for the others); a hybrid ask ranks exactly as with every match scored."""

from __future__ import annotations

import random

import pytest

from crossmodalrag.config import Settings
from crossmodalrag.index import fts
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.store.postgres import lexical, open_postgres_store, topk
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

COMMON = "cache parser token render index query batch window sync digest".split()
RARE = ("zelkova", "quillon", "marrowind")
QUERIES = (
    "zelkova cache parser",  # one rare word and common ones: the rare word's holders decide the top
    "cache parser token render",  # only common words: a second statement scores the others
    "quillon marrowind window",
    "hand-written parser",  # a phrase of two tokens
    "cache",
    "xyzzy plugh",  # no chunk holds a word
    "zelkova",
)


def memory(store, notes: int = 120) -> None:
    """Notes of common words in varied counts and lengths (many equal scores), a few rare words, and
    a note holding the query words only in its title (BM25 0)."""
    draw = random.Random(7)
    docs = []
    for n in range(notes):
        words = [draw.choice(COMMON) for _ in range(draw.randint(3, 40))]
        if n % 17 == 0:
            words.append(RARE[n % len(RARE)])
        if n % 23 == 0:
            words += ["hand-written", "parser"]
        docs.append(note(f"n{n}", " ".join(words), days=n % 9))
    docs.append(note("title-only", "nothing of the sort", title="cache parser zelkova"))
    add_docs(store, *docs)


def every_match_top(conn, query: str, limit: int) -> list[tuple[int, float]]:
    terms = fts.query_terms(query)
    analyzed = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])]
    every = lexical.bm25_scores(conn, query, terms, analyzed, "any", None)
    return sorted(every.items(), key=lambda item: (-item[1], item[0]))[:limit]


def top(conn, query: str, limit: int) -> topk.TopBm25:
    terms = fts.query_terms(query)
    analyzed = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])]
    return topk.top_bm25(conn, query, terms, analyzed, limit)


@pytest.mark.parametrize("budget", [1, 40, topk.CANDIDATE_BUDGET])
def test_the_top_k_is_exactly_the_first_k_of_every_match(postgres_url, monkeypatch, budget):
    """A budget of 1 scores only the rarest phrase's holders first (the second statement then does
    the rest when the bound says so); the default scores every holder of this small memory at once."""
    monkeypatch.setattr(topk, "CANDIDATE_BUDGET", budget)
    with open_postgres_store(postgres_url) as store:
        memory(store)
        for query in QUERIES:
            for limit in (1, 3, 10, 30, 500):
                found = top(store.conn, query, limit)
                assert list(found.scores.items()) == every_match_top(store.conn, query, limit), (query, limit)


def test_scores_of_other_chunks_equal_every_matchs(postgres_url):
    with open_postgres_store(postgres_url) as store:
        memory(store)
        terms = fts.query_terms("cache parser zelkova")
        analyzed = [sorted(s) for s in fts.analyze(store.conn, [t.word for t in terms])]
        every = lexical.bm25_scores(store.conn, "cache parser zelkova", terms, analyzed, "any", None)
        found = top(store.conn, "cache parser zelkova", 5)
        ids = [row[0] for row in store.conn.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
        others = found.scores_of(store.conn, ids)
        assert len(found.scores) == 5 and len(every) > 5
        assert {**others, **found.scores} == every  # a chunk holding no query word is absent


def test_an_ask_receives_at_most_limit_bm25_rows(postgres_url):
    """Before: one row per matching chunk (~150k for a question at 1M chunks)."""
    with open_postgres_store(postgres_url) as store:
        memory(store)
        received = []
        execute = store.conn.execute

        def record(sql, params=None):
            cursor = execute(sql, params)
            if "chunk_postings" in sql and "score" in sql:
                rows = cursor.fetchall()
                received.append(len(rows))
                return FetchedRows(rows)
            return cursor

        store.conn.execute = record
        options = SearchOptions(top_k=2, min_candidates=6)
        search(store, "cache parser token", options)
        store.conn.execute = execute
        phrases = len(top(store.conn, "cache parser token", 6).idf)
        every = len(every_match_top(store.conn, "cache parser token", 10_000))
        assert received and max(received) == 6 + phrases < every  # the top 6 and each phrase's idf


class FetchedRows(list):
    def fetchall(self):
        return list(self)


def test_a_hybrid_ask_ranks_as_with_every_match_scored(postgres_url, db_path, monkeypatch):
    embedder = HashingEmbedder()
    with open_postgres_store(postgres_url) as store:
        memory(store)
        embed_missing(store, embedder)
        index = semantic_index(store, embedder, Settings(db_path=db_path))
        options = SearchOptions(top_k=3, min_candidates=4, recency_weight=0.1)
        asked = {q: search(store, q, options, index) for q in QUERIES}
        monkeypatch.setattr(topk, "top_bm25", lambda *args: None)  # every match scored, as before
        for query, result in asked.items():
            before = search(store, query, options, index)
            assert [(h.chunk_id, h.score, h.components) for h in result.hits] == [
                (h.chunk_id, h.score, h.components) for h in before.hits
            ], query


def test_postings_are_read_from_the_primary_key_alone(postgres_url):
    """Schema 7: the key covers body_tf, length and owner, so BM25 reads no heap page per posting."""
    with open_postgres_store(postgres_url) as store:
        memory(store)
        raw = store.conn.raw
        raw.execute("COMMIT")
        raw.execute("VACUUM chunk_postings")
        for setting in ("enable_seqscan = off", "enable_bitmapscan = off"):
            raw.execute(f"SET {setting}")
        plan = raw.execute(
            "EXPLAIN SELECT chunk_id, body_tf, length FROM chunk_postings WHERE lexeme = 'cach'"
        ).fetchall()
    assert "Index Only Scan" in plan[0][0], plan
