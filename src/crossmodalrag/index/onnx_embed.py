"""The offline MiniLM run by onnxruntime directly: fastembed's vectors without fastembed's import.

Importing fastembed pulls in huggingface_hub, httpx and requests for its downloads: ~0.45 s of every
process that embeds a query, a third of a cold `mem ask --no-llm` on the README's sample. For the
model `mem models install --offline` assembles (files pinned by hash, nothing to download) this
module does what fastembed's mean-pooled, normalised text embedding does with the same files and
session options: tokenizer.json padded to the batch's longest text, the ONNX graph, the mean of the
token vectors the attention mask keeps (summed in float64), L2 normalisation.
tests/index/test_embed_real.py holds the vectors equal to fastembed's.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from crossmodalrag.index.embed import ModelIdentity, TokenWindow, extra_import_failed, normalized
from crossmodalrag.index.models import ModelSpec, ModelUnavailable, verify

if TYPE_CHECKING:
    import numpy as np

MODEL_FILE = "model.onnx"


class OnnxEmbedder(TokenWindow):
    """A sentence-transformers model with mean pooling (the offline MiniLM), behind the Embedder interface."""

    def __init__(self, spec: ModelSpec, threads: int | None = None) -> None:
        try:
            import numpy  # noqa: F401
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise extra_import_failed(exc, ("numpy", "onnxruntime", "tokenizers")) from exc
        assert spec.path is not None
        sha = verify(spec)
        config = json.loads((spec.path / "tokenizer_config.json").read_text(encoding="utf-8"))
        tokenizer = Tokenizer.from_file(str(spec.path / "tokenizer.json"))
        window = min(spec.max_tokens, *(config[key] for key in ("model_max_length", "max_length") if key in config))
        special = json.loads((spec.path / "special_tokens_map.json").read_text(encoding="utf-8"))
        tokenizer.add_special_tokens([token for token in special.values() if isinstance(token, str)])
        pad = config["pad_token"]
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad), pad_token=pad)  # to the batch's longest
        super().__init__(tokenizer, window)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads is not None:
            options.intra_op_num_threads = options.inter_op_num_threads = threads
        try:
            self._session = ort.InferenceSession(
                str(spec.path / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            raise ModelUnavailable(
                f"onnxruntime cannot load {spec.path / MODEL_FILE}: {exc}", "run `mem models install --offline --force`"
            ) from exc
        self._inputs = {node.name for node in self._session.get_inputs()}
        self.identity = ModelIdentity(spec.name, sha, int(self._session.get_outputs()[0].shape[-1]), window)

    def embed(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        if not texts:
            return np.zeros((0, self.identity.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        tokens = self._session.run(None, {name: value for name, value in feed.items() if name in self._inputs})[0]
        summed = np.sum(tokens, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        # Normalised in float64 before the cast, then once more in float32, exactly as fastembed + FastEmbedder.
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return normalized(pooled.astype(np.float32))
