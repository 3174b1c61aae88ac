"""The thread rule: as many threads as cores that no other process keeps busy."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from crossmodalrag import cpu


@pytest.fixture(autouse=True)
def fresh_measurement(monkeypatch):
    monkeypatch.setattr(cpu, "_measured", None)
    monkeypatch.setattr(cpu, "_window", None)


@pytest.mark.parametrize(
    "cores, busy, threads",
    [(2, 0.0, 2), (2, 0.3, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1), (4, 1.2, 3), (1, 1.0, 1)],
)
def test_free_cores_become_threads(monkeypatch, cores, busy, threads):
    monkeypatch.setattr(cpu, "usable_cores", lambda: cores)
    monkeypatch.setattr(cpu, "busy_cores", lambda window=cpu.SAMPLE_SECONDS: busy)
    assert cpu.auto_threads() == threads


def test_one_measurement_serves_the_calls_of_the_next_seconds(monkeypatch):
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)
    measured = []
    monkeypatch.setattr(cpu, "busy_cores", lambda window=cpu.SAMPLE_SECONDS: measured.append(1) or 1.0)
    assert cpu.auto_threads() == cpu.auto_threads() == 1
    assert len(measured) == 1
    monkeypatch.setattr(cpu, "_measured", (time.monotonic() - cpu.REUSE_SECONDS - 1, 0.0))
    assert cpu.auto_threads() == 1 and len(measured) == 2  # an old one is measured again


def test_the_window_since_the_last_call_counts_others_only(monkeypatch):
    """No pause when a window is open: the machine's busy ticks less this process's own."""
    clock = {"now": 100.0, "cpu": 10.0}
    monkeypatch.setattr(cpu.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(cpu.time, "process_time", lambda: clock["cpu"])
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(cpu, "usable_cores", lambda: 2)
    monkeypatch.setattr(cpu, "busy_cores", lambda window=0: pytest.fail("no pause with an open window"))
    counters = iter([(1000, 5000), (1080, 5100)])  # 0.5 s on 2 cores: 100 ticks, 80 of them busy
    monkeypatch.setattr(cpu, "_busy_and_total", lambda: next(counters))
    window = cpu._open_window()
    clock["now"], clock["cpu"] = 100.5, 10.45  # this process: 45 of the busy ticks
    assert cpu.others_busy_since(window) == pytest.approx(0.7)  # 35 of 100 ticks on 2 cores
    monkeypatch.setattr(cpu, "_window", (100.0, 10.0, (1000, 5000)))
    monkeypatch.setattr(cpu, "_busy_and_total", lambda: (1080, 5100))
    assert cpu.auto_threads() == 1  # 0.7 of a core taken by others


@pytest.mark.parametrize("age", [0.01, cpu.REUSE_SECONDS + 1])
def test_a_window_too_short_or_too_old_is_not_read(monkeypatch, age):
    monkeypatch.setattr(cpu, "_busy_and_total", lambda: (0, 0))
    assert cpu.others_busy_since((time.monotonic() - age, time.process_time(), (0, 0))) is None


def test_a_configured_count_wins(monkeypatch):
    monkeypatch.setattr(cpu, "busy_cores", lambda window=0: pytest.fail("not measured when configured"))
    assert cpu.auto_threads(3) == 3


def test_busy_cores_reads_the_machine_counters_over_a_window(monkeypatch):
    samples = iter([(100, 1000), (150, 1100)])  # 50 of 100 ticks busy
    monkeypatch.setattr(cpu, "_busy_and_total", lambda: next(samples))
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 2)
    assert cpu.busy_cores(window=0) == pytest.approx(1.0)


@pytest.mark.parametrize("own_nice, busy", [(0, 300), (5, 700)])
def test_niced_work_is_free_only_to_a_process_of_normal_priority(monkeypatch, tmp_path, own_nice, busy):
    stat = tmp_path / "stat"
    stat.write_text("cpu  200 400 100 1000 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")  # user nice system idle ...
    monkeypatch.setattr(cpu, "PROC_STAT", stat)
    monkeypatch.setattr(cpu.os, "nice", lambda increment: own_nice)
    assert cpu._busy_and_total() == (busy, 1700)


def test_without_proc_stat_the_load_average_stands_in(monkeypatch):
    monkeypatch.setattr(cpu, "_busy_and_total", lambda: None)
    monkeypatch.setattr(cpu.os, "getloadavg", lambda: (1.5, 1.0, 0.5))
    assert cpu.busy_cores() == 1.5


@pytest.fixture
def spinner():
    """Another process keeping one core busy."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)
    yield process
    process.kill()
    process.wait()


@pytest.mark.integration
@pytest.mark.skipif(not cpu.PROC_STAT.exists(), reason="Linux /proc/stat")
def test_a_spinning_process_shows_as_a_busy_core(spinner):
    started, spun = time.monotonic(), _cpu_ticks(spinner.pid)
    busy = cpu.busy_cores(window=0.5)
    spinner_cores = _cores_used(spinner.pid, spun, started)  # its share of a core: less on a busy machine
    assert spinner_cores > 0.1
    assert busy >= 0.8 * spinner_cores - 0.05


@pytest.mark.integration
@pytest.mark.skipif(not cpu.PROC_STAT.exists(), reason="Linux /proc/stat")
def test_a_spinning_process_shows_through_a_window_in_which_this_one_works_too(spinner):
    window, spun = cpu._open_window(), _cpu_ticks(spinner.pid)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:  # this process busy as well: its own ticks are taken out
        pass
    # The spinner's own share of a core in the window, not a full core: on a machine busy with other
    # work it gets less, and others_busy_since must count at least what it did get.
    spinner_cores = _cores_used(spinner.pid, spun, window[0])
    assert spinner_cores > 0.1
    assert cpu.others_busy_since(window) >= 0.8 * spinner_cores - 0.05


def _cores_used(pid: int, ticks_then: int, since: float) -> float:
    """The share of a core process `pid` used since `since` (a monotonic time)."""
    return (_cpu_ticks(pid) - ticks_then) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - since)


def _cpu_ticks(pid: int) -> int:
    """A process's user and system CPU ticks, from /proc/<pid>/stat (fields 14 and 15)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])
