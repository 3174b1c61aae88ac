"""How much of a query a text covers: the idf weight of each query token, and which tokens a text
contains exactly, as a prefix, or through its stem. The abstention gate reads the best hit's
coverage (gate.py); the title boost is the title's coverage (search.py)."""

from __future__ import annotations

import math
import sqlite3
import unicodedata

from crossmodalrag.index import fts
from crossmodalrag.index.scripts import WORD, exact_token, has_vietnamese, is_cjk, is_function_bigram

STEM_MIN_LETTERS = 5  # the shortest leading part of a query word that counts as its stem (see _contains)


def best_coverage(matches: list[set[str]], weights: dict[str, float]) -> tuple[float, int]:
    """(coverage, matched term count) of the text covering the largest idf-weighted share."""
    total = sum(weights.values())
    if not matches or total <= 0:
        return 0.0, 0
    best = max(matches, key=lambda found: (weight_of(found, weights), len(found)))
    return weight_of(best, weights) / total, len(best)


def weight_of(found: set[str], weights: dict[str, float]) -> float:
    """The summed weight of the tokens found, added in the weights' own order: a set's order follows
    string hashes, which differ per process, and float addition is not associative (the same memory
    and query would score a ulp apart from one run to the next)."""
    return sum(weight for token, weight in weights.items() if token in found)


def coverage_weights(
    terms: list[fts.QueryTerm], analyzed: list[list[str]], weights: dict[str, float]
) -> dict[str, float]:
    """The term weights the abstention gate counts: a CJK bigram is a term like any word, except
    the grammar bigrams of questions (什么, です), which the answering note seldom contains."""
    grammar = {
        token
        for term, tokens in zip(terms, analyzed, strict=True)
        if term.is_cjk and is_function_bigram(term.word)
        for token in tokens
    }
    kept = {token: weight for token, weight in weights.items() if token not in grammar}
    return kept or weights


def prefix_tokens(terms: list[fts.QueryTerm], analyzed: list[list[str]]) -> set[str]:
    """Index tokens of the terms that match as prefixes: covered by any token that starts with them."""
    return {token for term, tokens in zip(terms, analyzed, strict=True) if term.prefix for token in tokens}


def stem_alternatives(
    conn: sqlite3.Connection, terms: list[fts.QueryTerm], analyzed: list[list[str]]
) -> dict[str, str]:
    """Each query token's Snowball stem token or folded form as the index spells it: a Spanish or
    German word is covered by any form that shares its stem (emitió by emitida), a Greek one written
    with accents by the word written without (Αθήνα by Αθηνα), as they matched in BM25."""
    stemmed = [
        (tokens, term.stem or term.folded)
        for term, tokens in zip(terms, analyzed, strict=True)
        if term.stem or term.folded
    ]
    if not stemmed:
        return {}
    spelled = fts.analyze(conn, [stem for _, stem in stemmed])
    matched = zip(stemmed, spelled, strict=True)
    return {token: stem for (tokens, _), found in matched for token in tokens for stem in found}


def exact_forms(terms: list[fts.QueryTerm], analyzed: list[list[str]]) -> dict[str, set[str]]:
    """The exact-form tokens (index/scripts.py) that a Vietnamese text must hold to cover each query
    token typed with diacritics. Folding merges distinct words (táo "apple", tạo "make"): counting
    the folded match let an off-topic question cover 74% of a Vietnamese passage, and the gate refused
    none of five off-topic questions (Spanish, without the merge: three). A token also reached by a
    word typed without diacritics keeps folding."""
    required: dict[str, set[str]] = {}
    unaccented: set[str] = set()
    for term, tokens in zip(terms, analyzed, strict=True):
        for token in tokens:
            if term.exact:
                required.setdefault(token, set()).add(term.exact)
            else:
                unaccented.add(token)
    return {token: exact for token, exact in required.items() if token not in unaccented}


def term_weights(conn: sqlite3.Connection, stems: list[list[str]]) -> dict[str, float]:
    """idf per query token; a token absent from memory gets the highest idf (it is unmatched)."""
    flat = sorted({s for group in stems for s in group})
    if not flat:
        return {}
    total, frequencies = fts.document_frequencies(conn, flat)
    return {s: math.log(1 + (total - frequencies.get(s, 0) + 0.5) / (frequencies.get(s, 0) + 0.5)) for s in flat}


def matches(
    conn: sqlite3.Connection,
    texts: list[str],
    weights: dict[str, float],
    prefixes: set[str] | None = None,
    alternatives: dict[str, str] | None = None,
    exact: dict[str, set[str]] | None = None,
    asked_in_vietnamese: bool = False,
) -> list[set[str]]:
    """The query tokens (keys of `weights`) that each text covers (see _contains), or covers
    through the token's alternative (its stem token); in a Vietnamese text, a token with `exact`
    forms only through one of them (exact_forms), and in any text when the question is Vietnamese
    (`asked_in_vietnamese`): its marks make the word, and "mái" (roof) was covered by German "Mai"."""
    if not texts or not weights:
        return [set() for _ in texts]
    prefixes, alternatives, exact = prefixes or set(), alternatives or {}, exact or {}
    stems = {token[:n] for token in weights if not is_cjk(token) for n in range(STEM_MIN_LETTERS, len(token))}
    wanted = set(weights) | stems | set(alternatives.values()) | {form for forms in exact.values() for form in forms}
    token_sets = fts.analyze(conn, [fts.index_body(t) for t in texts], only=wanted, prefixes=prefixes)
    found = []
    for text, tokens in zip(texts, token_sets, strict=True):
        vietnamese = has_vietnamese(text)
        if asked_in_vietnamese and exact and not vietnamese:
            tokens = tokens | spelled_exactly(text)  # only a Vietnamese text is indexed with them
        found.append(
            {
                token
                for token in weights
                if (_contains(tokens, token, token in prefixes) or alternatives.get(token) in tokens)
                and (not (vietnamese or asked_in_vietnamese) or not exact.get(token) or bool(exact[token] & tokens))
            }
        )
    return found


def spelled_exactly(text: str) -> set[str]:
    """The exact-form tokens of every accented word of a text, in any language (José, Müller)."""
    return {token for word in WORD.findall(unicodedata.normalize("NFC", text)) if (token := exact_token(word))}


def coverages(
    conn: sqlite3.Connection, texts: list[str], weights: dict[str, float], prefixes: set[str] | None = None
) -> list[float]:
    """Idf-weighted fraction of the query's tokens that each text covers."""
    total = sum(weights.values())
    if total <= 0:
        return [0.0 for _ in texts]
    return [weight_of(found, weights) / total for found in matches(conn, texts, weights, prefixes)]


def _contains(tokens: set[str], token: str, as_prefix: bool) -> bool:
    """Does a text with these index tokens cover a query token? Exactly; or, for a long word that
    matched as a prefix, through a word that starts with it (Gebäude in Gebäudekomplex); or
    through the word's stem: an inflected query word (Turkish evlerinden, German Kaisers) counts
    when the text has its first STEM_MIN_LETTERS or more letters as a word of its own (evler)."""
    if token in tokens or (as_prefix and any(t.startswith(token) for t in tokens)):
        return True
    if len(token) <= STEM_MIN_LETTERS or is_cjk(token):
        return False
    return any(token[:n] in tokens for n in range(STEM_MIN_LETTERS, len(token)))
