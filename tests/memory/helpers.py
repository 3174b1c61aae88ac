"""Small memories for the hierarchy tests: documents through the real ingest, a model that answers
from a script (one output per call), and the hashing embedder as the semantic index."""

from __future__ import annotations

import json

from crossmodalrag.config import Settings
from crossmodalrag.index.embeddings import embed_missing
from crossmodalrag.memory.build import build_memory
from crossmodalrag.retrieval.semantic import SemanticIndex
from tests.fakes import HashingEmbedder, ScriptedLLM
from tests.retrieval.helpers import DAY, add_docs, note  # noqa: F401  (re-exported for the tests)


class ScriptedExtractor(ScriptedLLM):
    """Answers each call with the next output of a list (the last one repeats)."""

    def __init__(self, *outputs: str | dict) -> None:
        super().__init__()
        self.outputs = [o if isinstance(o, str) else json.dumps(o) for o in outputs]
        self.generations = []

    def stream(self, messages, generation):
        self.generations.append(generation)
        self.text = self.outputs[min(len(self.calls), len(self.outputs) - 1)]
        yield from super().stream(messages, generation)


def event(statement: str, evidence=(1,), kind: str = "decision") -> dict:
    return {"event": statement, "type": kind, "cite": list(evidence)}


def events_output(*items: dict) -> dict:
    return {"events": list(items)}


def semantic_for(store, db_path, embedder: HashingEmbedder | None = None) -> SemanticIndex:
    embedder = embedder or HashingEmbedder()
    embed_missing(store, embedder)
    return SemanticIndex(store, embedder, Settings(db_path=db_path))


def build(store, db_path, llm=None, semantic=None, levels=None, **settings):
    options = Settings(db_path=db_path, **{"llm_provider": "none", **settings})
    kwargs = {"levels": levels} if levels else {}
    return build_memory(store, options, llm=llm, semantic=semantic or semantic_for(store, db_path), **kwargs)
