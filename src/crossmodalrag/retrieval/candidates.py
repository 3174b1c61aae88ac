"""Candidate pools: which chunks a search scores at all. The best by BM25 (FTS5 on SQLite, stored term
statistics on PostgreSQL, or the symbols a symbols-only question holds), the nearest by meaning, and
the newest in an asked date window. Apart from search.py, which scores and ranks what these return."""

from __future__ import annotations

import heapq
import sqlite3
from typing import TYPE_CHECKING

from crossmodalrag.index import fts
from crossmodalrag.retrieval.filters import CHUNK_TIME, filter_clause, is_filtered, nearest_passing
from crossmodalrag.retrieval.symbols import symbol_query, symbol_scores

if TYPE_CHECKING:
    import numpy as np

    from crossmodalrag.retrieval.search import SearchOptions
    from crossmodalrag.retrieval.semantic import SemanticIndex
    from crossmodalrag.store.postgres.topk import TopBm25


def dated_chunks(conn: sqlite3.Connection, options: SearchOptions, limit: int) -> set[int]:
    """The newest `limit` chunks that pass the filters, the date window among them."""
    where, params = filter_clause(options)
    return {
        row[0]
        for row in conn.execute(
            f"SELECT c.id FROM chunks c JOIN sources s ON s.id = c.source_id WHERE {where}"
            f" ORDER BY {CHUNK_TIME} DESC, c.id LIMIT ?",
            (*params, limit),
        )
    }


def lexical_candidates(
    conn: sqlite3.Connection,
    query: str,
    terms: list[fts.QueryTerm],
    analyzed: list[list[str]],
    options: SearchOptions,
    limit: int,
    symbols: list[str],
):
    """(the best `limit` chunks by BM25, every match the backend scored, PostgreSQL's exact top or None).
    On PostgreSQL `top` holds only the top `limit` (store/postgres/topk.py), and so does every_match.
    A symbols-only question (symbols.py) scores the chunks holding its symbols instead."""
    expression = _expression(query, terms, options.match)
    top = None
    if symbols:
        every_match = symbol_scores(conn, symbols, options)
    elif fts.on_postgres(conn):  # BM25 from stored term statistics (store/postgres/lexical.py)
        from crossmodalrag.store.postgres.lexical import bm25_scores
        from crossmodalrag.store.postgres.topk import top_bm25

        where = filter_clause(options) if is_filtered(options) else None
        if expression and options.match == "any" and where is None:
            top = top_bm25(conn, query, terms, analyzed, limit)
        if top is not None:
            every_match = top.scores
        else:
            every_match = bm25_scores(conn, query, terms, analyzed, options.match, where) if expression else {}
    else:
        every_match = _bm25_scores(conn, expression, options) if expression else {}
    lexical = dict(heapq.nlargest(limit, every_match.items(), key=lambda item: (item[1], -item[0])))
    return lexical, every_match, top


def vector_candidates(
    conn: sqlite3.Connection,
    semantic: "SemanticIndex",
    vector: "np.ndarray",
    lexical: dict[int, float],
    every_match: dict[int, float],
    top: "TopBm25 | None",
    options: SearchOptions,
    limit: int,
) -> dict[int, float]:
    """Cosines to `vector` of its nearest chunks that pass the filters and of the lexical candidates;
    adds to `lexical` the BM25 of the nearest chunks that match the query's words."""
    wanted = nearest_passing(conn, semantic, vector, limit, options)
    if options.match != "any":
        wanted = {chunk: cosine for chunk, cosine in wanted.items() if chunk in every_match}
    cosines = dict(list(wanted.items())[:limit])
    cosines.update(semantic.scores_for(vector, [c for c in lexical if c not in cosines]))
    lexical.update({c: every_match[c] for c in cosines if c in every_match})
    if top is not None:
        lexical.update(top.scores_of(conn, [c for c in cosines if c not in every_match]))
    return cosines


def matching_chunks(conn: sqlite3.Connection, query: str, options: SearchOptions) -> set[int] | None:
    """The chunks (passing the filters) that hold every word (`--match all`) or the phrase (`--match
    phrase`): what a memory level keeps of its nodes' evidence. None under `--match any`, where no
    chunk is ruled out by its words."""
    if options.match == "any":
        return None
    symbols = symbol_query(query)
    terms = [] if symbols else fts.search_terms(conn, query)
    analyzed = [sorted(s) for s in fts.analyze(conn, [t.word for t in terms])] if terms else []
    _, every_match, _ = lexical_candidates(conn, query, terms, analyzed, options, 0, symbols)
    return set(every_match)


def _expression(query: str, terms: list[fts.QueryTerm], match: str) -> str | None:
    """The FTS5 MATCH expression of a query in a match mode; None when nothing can match."""
    if match == "phrase":
        return fts.phrase_expression(query)
    if not terms:
        return None
    return fts.match_expression(terms, mode=match, pairs=fts.query_pairs(query) if match == "any" else None)


def _bm25_scores(conn: sqlite3.Connection, expression: str, options: SearchOptions) -> dict[int, float]:
    """BM25 of every matching chunk (that passes the filters). One unordered pass is cheaper than
    ORDER BY bm25 LIMIT (which scores every match anyway) and than re-querying specific rowids."""
    if not is_filtered(options):
        rows = conn.execute(
            "SELECT rowid, -bm25(chunks_fts, ?, 1.0) FROM chunks_fts WHERE chunks_fts MATCH ?",
            (options.title_column_weight, expression),
        ).fetchall()
        return dict(rows)
    where, params = filter_clause(options)
    rows = conn.execute(
        "SELECT f.rowid, -bm25(chunks_fts, ?, 1.0) FROM chunks_fts f JOIN chunks c ON c.id = f.rowid "
        f"JOIN sources s ON s.id = c.source_id WHERE chunks_fts MATCH ? AND {where}",
        (options.title_column_weight, expression, *params),
    ).fetchall()
    return dict(rows)
