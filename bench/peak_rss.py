"""The peak memory of a child process, its own and no one else's.

``wait4``'s ``ru_maxrss`` is not that: Linux carries the high-water mark across ``execve``,
and Python starts children with ``vfork``, so a child's figure starts from the RSS of the
process that spawned it (a test runner at 350 MB made a 200 MB crawl read 355 MB). The
kernel's per-image mark, ``VmHWM`` in ``/proc/PID/status``, starts afresh at ``execve``; it
is read until the child exits (a mark only grows, so the last read before exit is the peak
unless the child peaks in its final moments, which a crawl or an index run does not).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLL_SECONDS = 0.01


@dataclass(frozen=True, slots=True)
class Measured:
    returncode: int
    seconds: float
    peak_rss_mb: float
    cpu_seconds: float  # user + system, from wait4 (which, unlike maxrss, is the child's own)


def high_water_mb(pid: int) -> float | None:
    """``VmHWM`` of a live process in MiB; None once it has gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return None


def wait_measured(process: subprocess.Popen[Any], started: float) -> Measured:
    """Wait for ``process`` (started at ``started`` on perf_counter) while reading its peak."""
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return Measured(
                returncode=process.returncode,
                seconds=time.perf_counter() - started,
                peak_rss_mb=peak,
                cpu_seconds=usage.ru_utime + usage.ru_stime,
            )
        mark = high_water_mb(process.pid)
        if mark is not None:
            peak = max(peak, mark)
        time.sleep(POLL_SECONDS)


def run_measured(command: Sequence[str], **popen: Any) -> Measured:
    """Run ``command`` to its end and measure it (``popen``: keyword arguments for Popen)."""
    started = time.perf_counter()
    return wait_measured(subprocess.Popen(command, **popen), started)
