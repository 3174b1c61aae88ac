"""Deterministic stand-ins for real components, for unit tests only."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from crossmodalrag.index.embed import ModelIdentity

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Bag of words hashed into `dim` buckets; `synonyms` map words onto a shared bucket so tests
    can express 'same meaning, different words'. Pieces are runs of `window` words."""

    def __init__(
        self, dim: int = 64, synonyms: dict[str, str] | None = None, name: str = "fake/hashing", window: int = 10_000
    ) -> None:
        self.synonyms = synonyms or {}
        self.window = window
        self.identity = ModelIdentity(name, hashlib.sha256(name.encode()).hexdigest(), dim, window)
        self.calls: list[int] = []

    def _bucket(self, word: str) -> int:
        word = self.synonyms.get(word, word)
        return int(hashlib.md5(word.encode()).hexdigest(), 16) % self.identity.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.identity.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                out[row, self._bucket(word)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def split_to_window(self, text: str) -> list[str]:
        words = list(re.finditer(r"\S+\s*", text))
        if len(words) <= self.window:
            return [text]
        starts = [words[i].start() for i in range(0, len(words), self.window)]
        return [text[s:e] for s, e in zip(starts, starts[1:] + [len(text)], strict=True)]


class ScriptedLLM:
    """Streams a fixed answer in small pieces, or fails as told: the stand-in for a model server."""

    provider = "fake"
    model = "scripted"

    def __init__(
        self,
        text: str = "",
        fail: Exception | None = None,
        fail_after: int | None = None,
        margins: list[float] | None = None,
    ) -> None:
        self.text = text
        self.fail = fail
        self.fail_after = fail_after
        self.calls: list[list[dict]] = []
        self.usage: dict[str, int] = {}
        # The judge's yes-minus-no margins, handed out in order (the gate's first, then one per
        # checked sentence); once used up, every check passes with +5.
        self.margins = list(margins or [])
        self.judged: list[list[dict]] = []

    def support_margins(self, prompts):
        self.judged.extend(prompts)
        return [self.margins.pop(0) if self.margins else 5.0 for _ in prompts]

    def check(self) -> str:
        return "scripted model ready"

    def stream(self, messages, generation):
        self.calls.append(messages)
        if self.fail and self.fail_after is None:
            raise self.fail
        pieces = re.findall(r"\S+\s*|\s+", self.text)
        for index, piece in enumerate(pieces):
            if self.fail and index == self.fail_after:
                raise self.fail
            yield piece
        self.usage = {"completion_tokens": len(pieces)}
