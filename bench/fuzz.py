#!/usr/bin/env python3
"""A long fuzz run of the parsers that read user files and user text.

    python bench/fuzz.py [--examples 20000] [--target NAME ...] [--seed N]

Runs each target of tests/fuzz/properties.py (the same properties the test suite checks with
150 examples) with many more generated inputs, and prints one JSON object on stdout: per target,
the inputs tried, the failures (hypothesis stops a target at its first failure and shrinks it; the
shrunk input is reported), and the seconds taken. Exit code 1 if any target failed.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, for tests.fuzz

from benchlib import clean_environment, log, machine  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fuzz import properties as p  # noqa: E402
from tests.fuzz.test_properties import LINE, NOTE_BYTES  # noqa: E402

DATES = st.one_of(st.text(max_size=40), st.datetimes(), st.dates(), st.integers(), st.floats(), st.none(), p.SURROGATES)


def targets(folder: Path, conn: sqlite3.Connection) -> dict[str, tuple[Any, Callable[..., None]]]:
    """name → (strategy of argument tuples, check)."""
    return {
        "markdown_chunker": (st.tuples(p.MARKDOWN), p.check_markdown_chunks),
        "heading_rule": (st.tuples(LINE), p.check_heading_name),
        "private_spans": (st.tuples(p.MARKDOWN, p.MARKDOWN, p.MARKDOWN), p.check_private_spans),
        "note_reader": (st.tuples(NOTE_BYTES), lambda content: p.check_read_note(folder, content)),
        "frontmatter": (st.tuples(p.YAML), p.check_frontmatter),
        "date_parser": (st.tuples(DATES), p.check_parse_date),
        "fts_query": (st.tuples(p.QUERY), lambda query: p.check_query(conn, query)),
        "eval_file_loader": (st.tuples(p.EVAL_FILE), lambda content: p.check_eval_file(folder, content)),
    }


def run_target(strategy, check: Callable[..., None], examples: int, random_seed: int | None) -> dict[str, Any]:
    calls = 0

    def counted(args: tuple) -> None:
        nonlocal calls
        calls += 1
        check(*args)

    test = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=random_seed is None,
    )(given(strategy)(counted))
    if random_seed is not None:
        test = seed(random_seed)(test)
    started = time.perf_counter()
    failure = None
    try:
        test()
    except Exception as error:  # noqa: BLE001 - a failure is data here
        failure = "".join(traceback.format_exception_only(type(error), error)).strip()[-2000:]
    return {
        "inputs": calls,
        "failures": 0 if failure is None else 1,
        "seconds": round(time.perf_counter() - started, 1),
        **({"failure": failure} if failure else {}),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000, help="generated inputs per target")
    parser.add_argument("--target", action="append", help="only this target (repeatable)")
    parser.add_argument("--seed", type=int, help="random seed (default: hypothesis's derandomized run)")
    args = parser.parse_args()
    clean_environment()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        conn = p.fts_table()
        for name, (strategy, check) in targets(Path(folder), conn).items():
            if args.target and name not in args.target:
                continue
            log(f"fuzzing {name} with {args.examples} inputs …")
            result = results[name] = run_target(strategy, check, args.examples, args.seed)
            log(f"  {result['inputs']} inputs, {result['failures']} failures, {result['seconds']} s")
    total = {
        "inputs": sum(r["inputs"] for r in results.values()),
        "failures": sum(r["failures"] for r in results.values()),
    }
    print(
        json.dumps(
            {"machine": machine(), "examples_per_target": args.examples, "targets": results, "total": total}, indent=2
        )
    )
    return 1 if total["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
