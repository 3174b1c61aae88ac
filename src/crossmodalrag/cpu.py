"""How many threads to compute with: the cores that other processes are not using right now.

llama.cpp and onnxruntime threads spin while they wait for each other, so one thread per core
collapses when another process holds a core (measured: llama.cpp generation 30 -> 1.6 tokens/s
with 2 threads on 2 cores under one busy process, 21 tokens/s with 1 thread). The load average
lags by a minute and counts our own earlier work, so the rule reads the CPU time the whole machine
spent busy over a short window, less this process's own. The window is the time since this module
was imported or last asked (a command's own start-up, ~0.3 s before it loads a model), or, when
that is too short or too old, a 0.1 s pause.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
SAMPLE_SECONDS = 0.1  # /proc/stat counts in 10 ms ticks: 20 ticks on 2 cores
# A core counts as taken when others kept it busy at least this share of the window.
BUSY_SHARE = 0.5
# One measurement serves the calls of the next few seconds, each of which would wait SAMPLE_SECONDS:
# a command loads the embedder, then the LLM a second later, and one answer makes several model
# calls (gate, answer, sentence checks).
REUSE_SECONDS = 5.0
_measured: tuple[float, float] | None = None  # (when, busy cores) of the last measurement


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _busy_and_total() -> tuple[int, int] | None:
    try:
        fields = PROC_STAT.read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields[:8]]
    # user nice system idle iowait irq softirq steal: niced processes yield their core to us (CFS
    # gives a nice-10 process a tenth of a nice-0 one's share), so they do not count as busy; unless
    # we run niced ourselves, and then niced work competes with ours as an equal.
    free = ticks[3] + ticks[4] + (ticks[1] if os.nice(0) <= 0 else 0)
    return sum(ticks) - free, sum(ticks)


def busy_cores(window: float = SAMPLE_SECONDS) -> float:
    """Cores kept busy by processes of normal priority over `window` seconds (the load average where
    there is no /proc/stat). Call it while this process is idle, or it counts itself."""
    first = _busy_and_total()
    if first is None:
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):
            return 0.0
    time.sleep(window)
    second = _busy_and_total()
    if second is None or second[1] <= first[1]:
        return 0.0
    return (os.cpu_count() or 1) * (second[0] - first[0]) / (second[1] - first[1])


def _open_window() -> tuple[float, float, tuple[int, int]] | None:
    """(when, this process's CPU seconds, the machine's counters): the start of a measurement."""
    counters = _busy_and_total()
    return None if counters is None else (time.monotonic(), time.process_time(), counters)


def others_busy_since(window: tuple[float, float, tuple[int, int]] | None) -> float | None:
    """Cores other processes kept busy since `window` opened: the machine's busy time less this
    process's own CPU time, so this process need not be idle. None when the window is shorter
    than SAMPLE_SECONDS (too few ticks) or older than REUSE_SECONDS (it would say little about now)."""
    if window is None:
        return None
    opened, own_seconds, first = window
    if not SAMPLE_SECONDS <= time.monotonic() - opened <= REUSE_SECONDS:
        return None
    second = _busy_and_total()
    if second is None or second[1] <= first[1]:
        return None
    own_ticks = (time.process_time() - own_seconds) * os.sysconf("SC_CLK_TCK")
    return max(0.0, (os.cpu_count() or 1) * (second[0] - first[0] - own_ticks) / (second[1] - first[1]))


_window = _open_window()  # a command's start-up is its first window


def auto_threads(configured: int = 0) -> int:
    """`configured` when set (> 0); else one thread per core that no other process is keeping busy,
    at least one."""
    if configured > 0:
        return configured
    cores = usable_cores()
    taken = int(_recent_busy_cores() + (1 - BUSY_SHARE)) if cores > 1 else 0
    return max(1, cores - taken)


def _recent_busy_cores() -> float:
    """Others' busy cores, measured again only when the last measurement is older than REUSE_SECONDS:
    over the window since the last call when it can be (`others_busy_since`), else by `busy_cores`."""
    global _measured, _window
    if _measured is None or time.monotonic() - _measured[0] > REUSE_SECONDS:
        busy = others_busy_since(_window)
        _measured = (time.monotonic(), busy_cores() if busy is None else busy)
    _window = _open_window()
    return _measured[1]
