"""`mem` with unusual standard streams, as cron jobs and daemons start it: a closed stdin (`<&-`)
reads as empty, as `</dev/null` does, instead of failing on Python's missing sys.stdin; output to a
full device is one error line, not an unexpected OSError."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import write_note


def run_with_stdin_closed(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crossmodalrag", *argv],
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.close(0),  # noqa: PLW1509 - the child's stdin, closed after it was set up
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["forget", "1"], 1, "stdin is not a terminal: pass --yes"),
        (["chat", "--no-llm"], 0, ""),
        (["mcp"], 0, ""),
    ],
)
def test_a_closed_stdin_reads_as_empty(isolated_env, tmp_path, argv, code, said):
    write_note(tmp_path / "vault", "heron.md", "# Heron\nThe heron fishes at dawn.\n")
    assert run_with_stdin_closed("ingest-notes", str(tmp_path / "vault")).returncode == 0
    result = run_with_stdin_closed(*argv)
    assert result.returncode == code, result.stderr
    assert "unexpected" not in result.stderr and "Traceback" not in result.stderr
    assert said in result.stderr


def test_output_to_a_full_device_is_one_error_line(isolated_env, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    write_note(tmp_path / "vault", "heron.md", "# Heron\nThe heron fishes at dawn.\n")
    assert run_with_stdin_closed("ingest-notes", str(tmp_path / "vault")).returncode == 0
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "crossmodalrag", "sources", "--json"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: no space left on the device (writing the output) (hint: free disk space, then rerun the command;"
        " everything committed so far is kept)"
    ]
