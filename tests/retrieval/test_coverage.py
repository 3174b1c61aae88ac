"""Coverage sums are the same in every process, whatever the string hash seed."""

import os
import subprocess
import sys

from crossmodalrag.retrieval.coverage import best_coverage, weight_of

# Weights whose float sum depends on the order of addition (0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1).
WEIGHTS = {f"token{i}": 0.1 * (i % 7 + 1) + 1e-9 * i for i in range(24)}
SCRIPT = (
    "from crossmodalrag.retrieval.coverage import best_coverage\n"
    f"weights = {WEIGHTS!r}\n"
    "print(repr(best_coverage([set(weights)], weights)))"
)


def test_weight_of_adds_in_the_weights_order():
    found = set(WEIGHTS)
    assert weight_of(found, WEIGHTS) == sum(WEIGHTS.values())
    assert weight_of({"token1", "missing"}, WEIGHTS) == WEIGHTS["token1"]
    assert best_coverage([found], WEIGHTS) == (1.0, 24)


def test_coverage_is_identical_across_hash_seeds():
    seen = {
        subprocess.run(
            [sys.executable, "-c", SCRIPT],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(8)
    }
    assert len(seen) == 1, seen
