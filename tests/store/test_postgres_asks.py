"""What one ask costs on PostgreSQL (issue 16): statements per hybrid ask, BM25 computed by the server
(the same doubles as the client's formula and FTS5's), the HNSW index reachable from a prepared
statement, the planner's statistics after the index build."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np

from crossmodalrag.chunking.turns import semantic_text
from crossmodalrag.config import Settings
from crossmodalrag.index import fts
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.retrieval.search import SearchOptions, search
from crossmodalrag.retrieval.semantic import semantic_index
from crossmodalrag.store import open_store
from crossmodalrag.store.postgres import lexical, open_postgres_store
from tests.fakes import HashingEmbedder
from tests.retrieval.helpers import add_docs, note

NOTES = (
    note("parser", "# Parser\nWe replaced the regex parser with a hand-written tokenizer after backtracking.", days=0),
    note("cache", "# Cache\nThe render cache keys on the document hash; parser output is cached, caches too.", days=5),
    note("garden", "# Garden\nTomatoes and basil on the balcony; the parser of seed packets is me.", days=9),
    note("bike", "# Bike\nThe bike needs new brakes, tyres and a bell before the trip.", days=12),
    note("tokens", "# Tokenizer notes\nTokenizers split text; a tokenizer's tokens feed the parser parser.", days=3),
    note("title-only", "# Elsewhere\nNothing of the sort here at all.", title="parser cache", days=1),
)
QUERIES = ("parser", "parser tokenizer cache", "hand-written tokenizer", "cach*", "tok* parser", "bike bell trip")


def recording(store) -> list[tuple[str, tuple]]:
    """Every statement the store's connection sends from now on."""
    sent: list[tuple[str, tuple]] = []
    execute = store.conn.execute

    def record(sql, params=None):
        sent.append((sql, params))
        return execute(sql, params)

    store.conn.execute = record
    return sent


def client_bm25(conn, query: str) -> dict[int, float]:
    """The client-side formula (lexical._score over every posting), for mode `any` without filters."""
    terms = fts.query_terms(query)
    analyzed = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])]
    phrases = [p for group in lexical._phrases(terms, analyzed, "any", query) for p in group]
    counts, lengths = lexical._postings(conn, {token: prefix for phrase in phrases for token, prefix in phrase})
    holders = {c for phrase in phrases for c in set.intersection(*(set(counts.get(t, ())) for t, _ in phrase))}
    total, length_sum = lexical.corpus_statistics(conn)
    return lexical._score({c: lengths[c] for c in holders}, phrases, counts, total, length_sum / total)


def test_the_server_computes_bm25_to_the_same_doubles_as_the_client_formula_and_fts5(postgres_url, db_path):
    with open_postgres_store(postgres_url) as pg, open_store(db_path) as lite:
        for store in (pg, lite):
            add_docs(store, *NOTES)
        for query in QUERIES:
            terms = fts.query_terms(query)
            analyzed = [sorted(s) for s in fts.analyze(pg.conn, [t.word for t in terms])]
            served = lexical.bm25_scores(pg.conn, query, terms, analyzed, "any", None)
            assert served == client_bm25(pg.conn, query) and served, query  # exactly equal, not close
            options = SearchOptions(top_k=10, recency_weight=0.0)
            on_sqlite = {h.source_uri: h.components["bm25"] for h in search(lite, query, options).hits}
            on_postgres = {h.source_uri: h.components["bm25"] for h in search(pg, query, options).hits}
            assert on_sqlite.keys() == on_postgres.keys()
            assert all(math.isclose(on_sqlite[u], on_postgres[u], rel_tol=1e-9) for u in on_sqlite), query


def test_a_hybrid_ask_sends_six_statements(postgres_url, db_path):
    """Corpus statistics ride with the document frequencies and with BM25, the newest time with the
    chunk rows: frequencies, BM25, nearest, chunk rows, vectors for near-duplicates (8 in session 6, 6
    in session 7; a larger memory adds one for the cosines of lexical hits outside the nearest and one
    for the BM25 of nearest chunks outside the lexical top), then the same candidates' cosines to the
    query shifted toward its best hits (session 20): their rows, titles and vectors are reused."""
    embedder = HashingEmbedder()
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        embed_missing(store, embedder)
        index = semantic_index(store, embedder, Settings(db_path=db_path))
        search(store, "parser tokenizer", SearchOptions(), index)  # builds the HNSW index first
        sent = recording(store)
        result = search(store, "parser tokenizer", SearchOptions(), index)
    assert result.hybrid and result.hits
    assert len(sent) == 6, [sql[:60] for sql, _ in sent]


def test_nearest_can_use_the_hnsw_index_from_a_prepared_statements_generic_plan(postgres_url, db_path):
    """psycopg prepares a statement run five times; its generic plan knows no parameter values, so a
    model id sent as one could never match the partial index made for that model."""
    embedder = HashingEmbedder()
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        embed_missing(store, embedder)
        index = semantic_index(store, embedder, Settings(db_path=db_path))
        index.refresh()
        sent = recording(store)
        index.nearest(embedder.embed(["bike"])[0], 2)
        sql, params = next((sql, params) for sql, params in sent if "ORDER BY" in sql)
        number = itertools.count(1)
        numbered = re.sub(r"\?", lambda _: f"${next(number)}", sql)
        raw = store.conn.raw
        for setting in ("plan_cache_mode = force_generic_plan", "enable_seqscan = off", "enable_sort = off"):
            raw.execute(f"SET {setting}")
        raw.execute(f"PREPARE nearest AS {numbered}")
        from psycopg import sql as pgsql

        arguments = pgsql.SQL(", ").join(pgsql.Literal(p) for p in params)
        plan = raw.execute(pgsql.SQL("EXPLAIN EXECUTE nearest({})").format(arguments)).fetchall()
    assert any("chunk_vectors_hnsw_" in line for (line,) in plan), plan


def test_building_the_vector_index_gathers_the_planners_statistics(postgres_url, db_path):
    """Right after a bulk load the planner guessed 0.5% of the rows per model and sorted them all
    instead of walking the graph; the build now runs ANALYZE."""
    embedder = HashingEmbedder()
    with open_postgres_store(postgres_url) as store:
        add_docs(store, *NOTES)
        embed_missing(store, embedder)
        stats = "SELECT COUNT(*) FROM pg_stats WHERE tablename = 'chunk_vectors'"
        assert store.conn.execute(stats).fetchone()[0] == 0
        semantic_index(store, embedder, Settings(db_path=db_path)).refresh()
        assert store.conn.execute(stats).fetchone()[0] > 0


def test_representative_vectors_come_back_exactly(any_store, db_path):
    embedder = HashingEmbedder()
    add_docs(any_store, *NOTES)
    embed_missing(any_store, embedder)
    rows = any_store.conn.execute("SELECT id, text FROM chunks ORDER BY id").fetchall()
    vectors = semantic_index(any_store, embedder, Settings(db_path=db_path)).representative_vectors(
        [r[0] for r in rows]
    )
    expected = embedder.embed([semantic_text(text) for _, text in rows])
    assert len(vectors) == len(rows)
    for (chunk, _), wanted in zip(rows, expected, strict=True):
        assert vectors[chunk].dtype == np.float32 and np.array_equal(vectors[chunk], wanted.astype(np.float32))


def test_mode_all_keeps_the_client_formula(postgres_url, db_path):
    with open_postgres_store(postgres_url) as pg, open_store(db_path) as lite:
        for store in (pg, lite):
            add_docs(store, *NOTES)
        options = SearchOptions(top_k=10, recency_weight=0.0, match="all")
        for query in ("hand-written tokenizer", "parser tokenizer"):
            on_sqlite = {h.source_uri: round(h.components["bm25"], 9) for h in search(lite, query, options).hits}
            on_postgres = {h.source_uri: round(h.components["bm25"], 9) for h in search(pg, query, options).hits}
            assert on_sqlite == on_postgres


# Chunks where a phrase and its words count differently: the words many times but the phrase once,
# the phrase twice, the words apart or reversed (no phrase), the phrase only in the title (a match
# that scores 0: the title's weight is 0), and the same for a CJK phrase (bigrams in a row).
PHRASE_NOTES = (
    note("words", "# Words\nThe render cache: we render pages, cache them, render again; cache keys, cache size."),
    note("phrase", "# Phrase\nA render cache hit, then a render cache miss.", days=5),
    note("apart", "# Apart\nCache the render output; the cache render order matters."),
    # OCR text is the one chunk text that does not repeat its source's title
    replace(note("title", "Nothing about it here, only cache and render.", title="render cache"), format="ocr"),
    note("zh-once", "# 缓存\n渲染缓存很快，渲染页面，缓存页面，渲染两次，缓存键。"),
    note("zh-twice", "# 两次\n渲染缓存命中，渲染缓存未命中。"),
    note("zh-apart", "# 分开\n缓存渲染结果。"),
    *(note(f"other-{n}", f"# Other {n}\nThe bike needs new brakes, tyres and {n} bells.") for n in range(8)),
)


def test_mode_phrase_scores_the_phrase_as_fts5_does(postgres_url, db_path):
    """FTS5 scores a phrase as one term: its occurrences in the body, the chunks holding it (report
    item 3: PostgreSQL scored the words one by one, as mode all, and ranked differently)."""
    options = SearchOptions(top_k=10, recency_weight=0.0, match="phrase")
    ranked = []
    with open_postgres_store(postgres_url) as pg, open_store(db_path) as lite:
        for store in (lite, pg):
            add_docs(store, *PHRASE_NOTES)
            for query in ("render cache", "Render-cache!", "渲染缓存"):
                ranked.append(scored(search(store, query, options).hits))
            # A holder the filter leaves out still counts in the phrase's document frequency.
            earlier = SearchOptions(top_k=10, recency_weight=0.0, match="phrase", before=1_735_689_600.0 + 3 * 86400)
            ranked.append(scored(search(store, "render cache", earlier).hits))
    on_sqlite, on_postgres = ranked[:4], ranked[4:]
    assert on_sqlite == on_postgres
    assert [uri for uri, _ in on_sqlite[0]][:2] == ["/vault/phrase.md", "/vault/words.md"]
    assert ("/vault/title.md", 0.0) in on_sqlite[0] and not any("apart" in uri for uri, _ in on_sqlite[0])
    assert [uri for uri, _ in on_sqlite[2]] == ["/vault/zh-twice.md", "/vault/zh-once.md"]
    assert [uri for uri, _ in on_sqlite[3]] == ["/vault/words.md", "/vault/title.md"]


def scored(hits) -> list[tuple[str, float]]:
    return [(h.source_uri, round(h.components["bm25"], 9)) for h in hits]
