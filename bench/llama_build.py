#!/usr/bin/env python3
"""How fast each llama.cpp build reads prompts and generates on this CPU.

    python bench/llama_build.py [--workdir DIR] [--model PATH.gguf] [--rounds N] [--tokens N]

Builds llama.cpp (from the installed llama-cpp-python version's own sdist, fetched from PyPI) twice
into `--workdir`: with the AVX2-only flags `mem` used before (the baseline) and with what
`scripts/llama-cmake-args` picks for this CPU; each build takes a few minutes and is kept for
reruns. Each build then serves the same Python package through LLAMA_CPP_LIB_PATH, in its own
process, builds alternating for `--rounds`:
- prompt tokens per CPU-second with one thread: the process's own CPU time, so it stays
  comparable on a machine that other work shares (wall-clock figures there are noise);
- prompt tokens per second (wall) with two threads, which is what a user sees on a calm machine;
- generated tokens per CPU-second with one thread.
Prints one JSON object on stdout (best round of each build and the ratio to the baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from benchlib import log, machine, source_state

ROOT = Path(__file__).resolve().parents[1]
BASELINE_FLAGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
DEFAULT_MODEL = ROOT / "data" / "models" / "llm" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

MEASURE = r"""
import json, resource, sys, time
from llama_cpp import Llama, llama_print_system_info
model, count = sys.argv[1], int(sys.argv[2])
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
def load(threads):
    return Llama(model, n_ctx=1024, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
text = b"The parser was rewritten because regular expressions backtracked on nested lists. " * 40
one = load(1)
tokens = one.tokenize(text)[:count]
one.reset(); started = cpu(); one.eval(tokens); prompt_cpu = count / (cpu() - started)
one.reset(); one.eval(tokens[:64]); started = cpu()
for token in tokens[64:96]:
    one.eval([token])
generated_cpu = 32 / (cpu() - started)
one.close()
two = load(2)
two.reset(); started = time.perf_counter(); two.eval(tokens); prompt_wall = count / (time.perf_counter() - started)
print(json.dumps({"system": llama_print_system_info().decode().strip(), "prompt_tokens_per_cpu_second_1t": prompt_cpu,
                  "generated_tokens_per_cpu_second_1t": generated_cpu, "prompt_tokens_per_second_2t": prompt_wall}))
"""


def sdist(workdir: Path) -> Path:
    """The llama.cpp sources vendored in the installed llama-cpp-python's sdist."""
    from importlib.metadata import version

    release = version("llama-cpp-python")
    source = workdir / f"llama_cpp_python-{release}" / "vendor" / "llama.cpp"
    if not source.is_dir():
        log(f"fetching the llama-cpp-python {release} sdist")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={release}", "-d", str(workdir)],
            check=True,
        )  # fmt: skip
        with tarfile.open(workdir / f"llama_cpp_python-{release}.tar.gz") as archive:
            archive.extractall(workdir, filter="data")
    return source


def build(source: Path, folder: Path, flags: str) -> Path:
    """libllama and libggml* built with `flags` into folder/lib (kept between runs)."""
    lib = folder / "lib"
    if (lib / "libllama.so").is_file() and (folder / "flags").read_text() == flags:
        return lib
    log(f"building llama.cpp with {flags} (a few minutes)")
    configure = ["cmake", "-S", str(source), "-B", str(folder), "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON"]
    configure += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=OFF"]
    configure += ["-DLLAMA_BUILD_SERVER=OFF", "-DLLAMA_CURL=OFF", *flags.split()]
    subprocess.run(configure, check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(folder), "--target", "llama", "-j2"], check=True, capture_output=True)
    lib.mkdir(exist_ok=True)
    for shared in (folder / "bin").glob("*.so*"):
        (lib / shared.name).unlink(missing_ok=True)
        (lib / shared.name).symlink_to(shared)
    (folder / "flags").write_text(flags)
    return lib


def measure(lib: Path, model: Path, tokens: int) -> dict:
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(lib)}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(model), str(tokens)], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        return {"failed": f"exit code {done.returncode}", "stderr": done.stderr.strip()[-300:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def best(rounds: list[dict]) -> dict:
    ok = [r for r in rounds if "failed" not in r]
    if not ok:
        return rounds[-1]
    keys = [k for k in ok[0] if k != "system"]
    return {"system": ok[0]["system"], **{k: round(max(r[k] for r in ok), 1) for k in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/llama-builds"))
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=300, help="prompt length")
    args = parser.parse_args()
    if not args.model.is_file():
        raise SystemExit(f"no GGUF model at {args.model} (hint: mem models install --llm, or --model PATH)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    source = sdist(args.workdir)
    detected = subprocess.run([str(ROOT / "scripts" / "llama-cmake-args")], capture_output=True, text=True, check=True)
    builds = {
        "avx2 (baseline)": BASELINE_FLAGS,
        "scripts/llama-cmake-args": detected.stdout.replace("-DLLAVA_BUILD=OFF", "").strip(),
    }
    libs = {
        name: build(source, args.workdir / f"build-{index}", flags)
        for index, (name, flags) in enumerate(builds.items())
    }
    rounds: dict[str, list[dict]] = {name: [] for name in builds}
    for round_number in range(args.rounds):
        for name, lib in libs.items():
            log(f"round {round_number + 1}: {name}")
            rounds[name].append(measure(lib, args.model, args.tokens))
    results = {name: {"flags": builds[name], **best(runs)} for name, runs in rounds.items()}
    baseline, chosen = results["avx2 (baseline)"], results["scripts/llama-cmake-args"]
    ratios = {
        key: round(chosen[key] / baseline[key], 2)
        for key in baseline
        if isinstance(baseline.get(key), float) and isinstance(chosen.get(key), float)
    }
    load = os.getloadavg()[0]
    report = {"benchmark": "llama_build", "machine": machine(), "source": source_state(), "model": args.model.name}
    print(
        json.dumps(
            {**report, "load_average_1m": round(load, 2), "builds": results, "ratio_to_baseline": ratios}, indent=2
        )
    )


if __name__ == "__main__":
    main()
