"""Module 14: how busy the machine was with OTHER work while something was being timed.

On Linux, /proc/stat counts the jiffies every CPU spent busy; subtracting this process's own CPU
time (time.process_time, all its threads) leaves what other processes took; so does the CPU time
of helper processes that work for us (`helper_cpu`: `tito bench`'s torch worker reports its own
process_time with every reply). The figure is in cores: 0.0 is a quiet machine, 1.0 means another
process kept one core busy throughout.
Elsewhere the 1-minute load average stands in (it counts this process too, so one is taken off).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

NOISY_LOAD = 0.5  # cores busy with other work: above this a timing is "noisy"
PROC_STAT = "/proc/stat"


@dataclass(frozen=True)
class Load:
    """Cores kept busy by other work during an interval, and where the figure came from."""

    cores: float
    source: str  # "/proc/stat" | "loadavg" | "unknown"

    @property
    def busy(self) -> bool:
        return self.cores > NOISY_LOAD


def cpu_jiffies(text: str) -> tuple[int, int]:
    """(busy, total) jiffies from the aggregate "cpu" line of /proc/stat's text."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:]]
            # user nice system idle iowait irq softirq steal guest guest_nice; guest time is
            # already inside user/nice, so only the first eight add up to the total.
            total = sum(values[:8])
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            return total - idle, total
    raise ValueError(f"no aggregate 'cpu' line in {PROC_STAT}")


def _read_stat() -> tuple[int, int] | None:
    try:
        with open(PROC_STAT) as f:
            return cpu_jiffies(f.read())
    except (OSError, ValueError):
        return None


class LoadMeter:
    """Start it before timing, read it after: `with LoadMeter() as m: ...; m.load`."""

    def __init__(
        self,
        *,
        read_stat: Callable[[], tuple[int, int] | None] = _read_stat,
        cpu_clock: Callable[[], float] = time.process_time,
        cpus: int | None = None,
        helper_cpu: Callable[[], float] | None = None,
    ) -> None:
        """helper_cpu: CPU seconds our own helper processes have used so far (a running total);
        what they use during the interval is ours too, not other work."""
        self._read = read_stat
        self._cpu = cpu_clock
        self._helper = helper_cpu or (lambda: 0.0)
        self.cpus = cpus or os.cpu_count() or 1
        self.load: Load | None = None
        self._start: tuple[tuple[int, int] | None, float] | None = None

    def __enter__(self) -> LoadMeter:  # noqa: PYI034
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._start = (self._read(), self._cpu() + self._helper())

    def stop(self) -> Load:
        if self._start is None:
            raise RuntimeError("LoadMeter.stop() before start()")
        (before, cpu0), after, cpu1 = self._start, self._read(), self._cpu() + self._helper()
        if before is not None and after is not None and after[1] > before[1]:
            busy, total = after[0] - before[0], after[1] - before[1]
            tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
            wall_s = total / self.cpus / tick  # every CPU ticks once per jiffy of wall time
            others_s = busy / tick - (cpu1 - cpu0)  # CPU seconds other processes took (not ours)
            self.load = Load(max(0.0, others_s / wall_s), "/proc/stat")
        elif hasattr(os, "getloadavg"):
            self.load = Load(max(0.0, os.getloadavg()[0] - 1.0), "loadavg")
        else:
            self.load = Load(0.0, "unknown")
        return self.load
