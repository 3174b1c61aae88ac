"""Questions made of what the text index cannot read: emoji and symbols (🚀, ™, €, ⚠, ★) and the
names C#, F#, C++.

FTS5's unicode61 tokenizer keeps letters and digits and treats every symbol as a separator, so
"🚀" has no words to match and nothing was ever found for it. Indexing symbols as tokens would mean
re-tokenizing every stored chunk (FTS_VERSION), heavy at 300k chunks; instead a question whose only
content is such symbols is matched by substring over the chunks' text: the newest MAX_MATCHES chunks
that hold one of them (all of them in modes `all` and `phrase`), read newest first so the scan stops
as soon as it has them, and never further back than the newest SCAN_CHUNKS chunks. Only a question
with no words of its own takes this path: in "🍕 party" the words find the evidence as before.

ASCII symbols (`+ * ^ $ < > =`) are not searched for: they are FTS operators or common in code,
where a bare `+` would match every diff, and a question of them keeps its clean "nothing matches".
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from typing import TYPE_CHECKING

from crossmodalrag.index import fts
from crossmodalrag.retrieval.filters import filter_clause, is_filtered

if TYPE_CHECKING:
    from crossmodalrag.retrieval.search import SearchOptions

SYMBOL_CATEGORIES = ("So", "Sm", "Sc")  # other, math and currency symbols: separators to unicode61
# A language named by a letter and `#` or `+` (C#, F#, C++, g++): the letters alone are a lone
# letter the query drops, the signs separators.
CODE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{0,2}(?:#|\+\+)")
# Around a piece of the question, punctuation is the sentence's ("C++?", "(€)"), not the name's.
SENTENCE_MARKS = "\"'.,;:!?()[]{}<>"
REGIONAL_INDICATORS = range(0x1F1E6, 0x1F200)  # a flag is two of them: searched as the pair
# Marks that only vary how a symbol is drawn ("⚠️" is ⚠ and VS16): a note may hold either form.
VARIATION_SELECTORS = dict.fromkeys((0xFE0E, 0xFE0F))
MAX_NEEDLES = 4  # a question's symbols, not a pasted page of emoji: each one is a condition on every row
# What bounds the scan, which reads every chunk's text it passes: it stops at MAX_MATCHES matches and
# never goes past the newest SCAN_CHUNKS chunk ids. A whole `search` over synthetic chunks of ~1,100
# characters (session 34, 2 shared cores at load ~10), one symbol no chunk holds / three / the words
# "parser budget", which every chunk holds: SQLite, 50k chunks, 0.06-0.25 s / 0.33-0.58 s / 0.40-0.58 s;
# PostgreSQL, 25k chunks, 0.08 s / 0.25 s / 0.75 s.
SCAN_CHUNKS = 100_000
MAX_MATCHES = 200


def symbol_query(query: str) -> list[str]:
    """The symbols to search for by substring when they are all a question holds besides function
    words and punctuation (`[]` otherwise): emoji and other non-ASCII symbols one by one (a flag as
    its pair), C#-like names whole and lowercase. Variation selectors are dropped from them."""
    needles, rest = [], []
    for piece in query.translate(VARIATION_SELECTORS).split():
        bare = piece.strip(SENTENCE_MARKS)
        if CODE_NAME.fullmatch(bare):
            needles.append(ascii_lower(bare))
            continue
        found = _symbols(piece)
        needles += found
        drawn = set("".join(found))
        rest.append("".join(" " if char in drawn else char for char in piece))
    # "™" is "TM" in NFKC, a word to query_terms: the symbols are left out before asking for words.
    if not needles or fts.query_terms(" ".join(rest)):
        return []
    return list(dict.fromkeys(needles))[:MAX_NEEDLES]


def _symbols(piece: str) -> list[str]:
    found, index = [], 0
    while index < len(piece):
        char = piece[index]
        if ord(char) in REGIONAL_INDICATORS and index + 1 < len(piece) and ord(piece[index + 1]) in REGIONAL_INDICATORS:
            found.append(piece[index : index + 2])
            index += 2
            continue
        if ord(char) > 127 and unicodedata.category(char) in SYMBOL_CATEGORIES:
            found.append(char)
        index += 1
    return found


def ascii_lower(text: str) -> str:
    """Lowercase ASCII letters only, as the scan (`_holds`) reads case."""
    return text.translate(ASCII_LOWER)


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def symbol_scores(conn: sqlite3.Connection, needles: list[str], options: SearchOptions) -> dict[int, float]:
    """The newest MAX_MATCHES chunks among the newest SCAN_CHUNKS (passing the filters) that hold any
    of the needles (every one in modes `all` and `phrase`), each scored by how many distinct needles
    it holds."""
    conditions = [_holds(conn, needle) for needle in needles]
    held = (" AND " if options.match in ("all", "phrase") else " OR ").join(sql for sql, _ in conditions)
    where, params = filter_clause(options) if is_filtered(options) else ("1 = 1", [])
    join = " JOIN sources s ON s.id = c.source_id" if is_filtered(options) else ""
    rows = conn.execute(
        f"SELECT c.id, c.text FROM chunks c{join} WHERE ({held}) AND {where}"
        " AND c.id > (SELECT COALESCE(MAX(id), 0) FROM chunks) - ? ORDER BY c.id DESC LIMIT ?",
        (*(p for _, patterns in conditions for p in patterns), *params, SCAN_CHUNKS, MAX_MATCHES),
    ).fetchall()
    return {row[0]: float(sum(needle in ascii_lower(row[1]) for needle in needles)) for row in rows}


def _holds(conn: sqlite3.Connection, needle: str) -> tuple[str, list[str]]:
    """(SQL, its LIKE patterns): the chunk's text holds `needle`, its ASCII letters in any case.
    LIKE, not instr: on SQLite each further needle cost a whole scan more with instr, a fifth of one
    with LIKE, which ignores ASCII case there. On PostgreSQL ILIKE, `~*` and lower() read every row's
    whole text lowercased (25k chunks: 0.7-0.9 s against LIKE's 0.12 s), so a needle with letters is
    looked for in its usual spellings there instead: c# and C#, abc#, ABC# and Abc#."""
    spellings = [needle]
    if fts.on_postgres(conn) and needle != needle.upper():
        spellings = list(dict.fromkeys((needle, needle.upper(), needle.capitalize())))
    return "(" + " OR ".join(["c.text LIKE ? ESCAPE '\\'"] * len(spellings)) + ")", [_pattern(s) for s in spellings]


def _pattern(needle: str) -> str:
    """A LIKE pattern for text holding `needle` literally."""
    return "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def symbol_coverage(texts: list[str], needles: list[str]) -> tuple[float, int]:
    """(share of the needles the text holding most of them holds, how many), as `_coverage` reports words."""
    if not needles:
        return 0.0, 0
    best = max((sum(needle in ascii_lower(text) for needle in needles) for text in texts), default=0)
    return best / len(needles), best
