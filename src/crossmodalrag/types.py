"""Value types shared across layers. Result types render JSON through `to_dict` only."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


@dataclass
class Document:
    """One source as a connector parsed it: the unit of fingerprinting and of one transaction."""

    uri: str
    source_type: str  # "note" | "commit"
    title: str
    text: str
    format: str  # which chunker splits it: "markdown" | "diff" | "plain"
    modality: str = "text"  # "text" for notes, "code" for git
    timestamp: float | None = None  # unix seconds
    locator: str = ""  # how to cite the whole source: a vault-relative path, repo@sha7
    metadata: dict[str, Any] = field(default_factory=dict)
    extractor: str = ""  # e.g. "pypdfium2 5.15.2": part of the fingerprint, so upgrades re-derive
    # The reader cut text out of the file (a `<private>` span): no hash of its raw bytes may be stored.
    withheld_text: bool = False


@dataclass
class Chunk:
    """A piece of a document: what is indexed, retrieved and cited."""

    text: str  # starts with a one-line breadcrumb so it stands on its own
    locator: str
    char_start: int  # offsets of the body into Document.text
    char_end: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hit:
    """A retrieved chunk with its final score and the components that produced it."""

    chunk_id: int
    source_uri: str
    source_type: str
    modality: str
    title: str
    locator: str
    text: str
    timestamp: float | None
    score: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    sub_query: str | None = None  # for comparative questions: which side's pass found it
    page: int | None = None  # 1-based, for PDF evidence
    page_label: str | None = None  # the number printed on that page (`2`, `iv`), when not `page`
    ocr_confidence: float | None = None  # for text recognized in an image
    # Where the chunk's body sits in the source text: characters, and UTF-8 bytes (None for chunks
    # stored before byte offsets were recorded).
    char_start: int | None = None
    char_end: int | None = None
    byte_start: int | None = None
    byte_end: int | None = None
    source_id: int | None = None  # the database id: what `/sources/{id}` and `mem source ID` open
    focus: int = 0  # where in its flat body the excerpt starts: at the query's words (retrieval/snippets.py)


def iso_time(timestamp: float | None) -> str | None:
    """Unix seconds as an ISO-8601 UTC string (None stays None, and so does a time no date can print:
    a transcript's "0001-01-01T00:00+05:00" is in year 0)."""
    if timestamp is None:
        return None
    try:
        return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return None


def human_date(timestamp: float) -> str:
    """A date as people ask and answer in it ("7 May 2023"), which the model copies into its
    answer: from an ISO header it wrote "2023-05-07", which matches no one's "7 May 2023"."""
    day = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return f"{day.day} {day:%B %Y}"


EXCERPT_CHARS = 280


def flat_body(text: str) -> str:
    """A chunk's body without its breadcrumb line, collapsed to one line."""
    return " ".join((text.split("\n", 1)[1] if "\n" in text else text).split())


# Scripts written without spaces between words (Han, kana, Thai, Lao): any character boundary is a
# place to cut. Looking for a space there found only the one after a leading "…", so a long Chinese
# chunk's excerpt came out as "… …".
_UNSPACED = re.compile("[\u0e00-\u0eff\u3000-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
# A clause ends here in Chinese and Japanese: a nicer place for an excerpt to begin, when one is close.
_CLAUSE_END = "。、，！？；："
NUDGE = 20  # characters an unspaced start may move to land after a clause end (snippets.LEAD is 60)


def excerpt(text: str, limit: int = EXCERPT_CHARS, start: int = 0) -> str:
    """The chunk's flat body from `start` (the hit's focus: retrieval/snippets.py), cut at word
    boundaries, with "…" where text was left out."""
    flat = flat_body(text)
    if 0 < start < len(flat):
        flat = "… " + flat[_first_boundary(flat, start) :]
    if len(flat) <= limit:
        return flat
    return flat[: _last_boundary(flat, limit)] + " …"


def _first_boundary(flat: str, start: int) -> int:
    """Where an excerpt focused at `start` begins: not mid-word, and in unspaced text after a
    clause end within reach (the focus stands a few dozen characters before the match)."""
    if _UNSPACED.match(flat[start - 1]) or _UNSPACED.match(flat[start]):
        clause_ends = [at for at in range(start, min(start + NUDGE, len(flat) - 1)) if flat[at] in _CLAUSE_END]
        return clause_ends[0] + 1 if clause_ends else start
    if flat[start - 1] == " ":
        return start
    return flat.find(" ", start - 1) + 1 or start


def _last_boundary(flat: str, limit: int) -> int:
    """Where an excerpt at most `limit` long ends: after a word, which in unspaced text is any
    character (not back at a clause end: the focus may have put the match at the very end)."""
    cut = flat.rfind(" ", 0, limit)
    unspaced = [at for at in range(limit - 1, max(cut, 0), -1) if _UNSPACED.match(flat[at])]
    cut = max(cut, unspaced[0] + 1 if unspaced else 0)
    return cut if cut > 0 else limit


@dataclass
class Evidence:
    """A hit as presented to the user, numbered E1, E2, …"""

    id: str
    hit: Hit

    def citation(self) -> dict[str, Any]:
        """How a citation of this evidence resolves in JSON: its id and where it comes from."""
        hit = self.hit
        return {
            "id": self.id,
            "source_uri": hit.source_uri,
            "locator": hit.locator,
            "title": hit.title,
            **({"page": hit.page} if hit.page is not None else {}),
            **({"page_label": hit.page_label} if hit.page_label is not None else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        hit = self.hit
        return {
            "id": self.id,
            "source_id": hit.source_id,
            "chunk_id": hit.chunk_id,
            "source_uri": hit.source_uri,
            "source_type": hit.source_type,
            "modality": hit.modality,
            "title": hit.title,
            "locator": hit.locator,
            "timestamp": iso_time(hit.timestamp),
            "excerpt": excerpt(hit.text, start=hit.focus),
            "score": round(hit.score, 6),
            "components": {k: round(v, 6) for k, v in hit.components.items()},
            "sub_query": hit.sub_query,
            **({"page": hit.page} if hit.page is not None else {}),
            **({"page_label": hit.page_label} if hit.page_label is not None else {}),
            **({"ocr_confidence": round(hit.ocr_confidence, 4)} if hit.ocr_confidence is not None else {}),
            "char_start": hit.char_start,
            "char_end": hit.char_end,
            "byte_start": hit.byte_start,
            "byte_end": hit.byte_end,
        }


@dataclass
class Answer:
    """The outcome of `ask`: evidence (or an abstention) plus the rendered answer text."""

    query: str
    abstained: bool
    abstention_reason: str | None
    top_score: float
    match_coverage: float
    evidence: list[Evidence]
    text: str
    timing: dict[str, float] = field(default_factory=dict)
    retrieval: str = "lexical"  # or "hybrid"
    similarity: float | None = None
    comparison: dict[str, Any] | None = None
    mode: str = "evidence"  # "llm" when a language model wrote the text
    llm: dict[str, str] | None = None  # {"provider", "model"} of the model that wrote it
    citations: list[dict[str, Any]] = field(default_factory=list)
    citation_warnings: list[dict[str, str]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # e.g. why the model was not used
    usage: dict[str, int] = field(default_factory=dict)  # prompt size and token counts
    debug: dict[str, Any] | None = None  # raw prompt and output, with --debug
    short_answer: str | None = None  # the answer in a few words, when a model wrote one
    # The model's own checks (answer/verify.py): the gate's margin and each sentence's verdict.
    verification: dict[str, Any] | None = None
    # Retrieval at a memory level (`--level event|episode|concept`): the level and the nodes it matched.
    level: str = "evidence"
    matched_nodes: list[dict[str, Any]] | None = None
    # After a weak_retrieval abstention: the best hits the gate refused (C1, C2, …: never cited), so
    # `--explain` can show what came closest and why it was not enough.
    closest: list[Evidence] = field(default_factory=list)

    @property
    def verdict_withheld(self) -> str | None:
        """Why the model's verdict on a statement was withheld for its evidence (answer/synthesize.py), if it was."""
        return (self.verification or {}).get("withheld")

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "answer": self.text,
            "abstained": self.abstained,
            "abstention_reason": self.abstention_reason,
            "top_score": round(self.top_score, 6),
            "match_coverage": round(self.match_coverage, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "retrieval": self.retrieval,
            "comparison": self.comparison,
            "evidence": [e.to_dict() for e in self.evidence],
            "mode": self.mode,
            "llm": self.llm,
            "citations": self.citations,
            "citation_warnings": self.citation_warnings,
            "notices": self.notices,
            "usage": self.usage,
            "timing": {k: round(v, 6) for k, v in self.timing.items()},
            "short_answer": self.short_answer,
            "verification": self.verification,
            "closest": [e.to_dict() for e in self.closest],
            **({"debug": self.debug} if self.debug is not None else {}),
            **({"level": self.level, "matched_nodes": self.matched_nodes} if self.matched_nodes is not None else {}),
        }


def readable(text: str) -> str:
    """Text with the bytes that were not UTF-8 replaced: Python keeps them (from argv, a pipe, a file
    name, an MCP client's JSON "\\udcff") as lone surrogates, which an embedder's tokenizer, SQLite,
    JSON and the terminal reject. Each undecodable byte becomes one U+FFFD."""
    try:
        return os.fsencode(text).decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate no decoding made ("\ud800" typed as such)
        return text.encode("utf-8", "replace").decode("utf-8")
