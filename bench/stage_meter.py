"""Wall time, CPU time and peak memory of one pipeline stage run as its own process.

``wait4`` gives the child's CPU. A poller thread reads ``/proc`` meanwhile for two peaks:
each process's own high-water mark (``VmHWM``: :mod:`bench.peak_rss` says why not
``wait4``'s ``ru_maxrss``, which starts from the spawning process's RSS), the largest of
which is reported, and the whole process tree's PSS added up (the indexer's workers, the
capsule's processes), which is what the machine has to hold at once.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.peak_rss import high_water_mb


@dataclass(frozen=True)
class StageRun:
    name: str
    seconds: float
    cpu: float
    peak_rss_mb: float  # the largest single process's own high-water mark, sampled
    peak_tree_mb: float  # the process tree's PSS added up, sampled
    peak_tree_anonymous_mb: float  # the anonymous part of it (not mapped files), sampled
    returncode: int
    stdout: str


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants, from /proc (children of children in any order)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                parents[int(name)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    tree = [root]
    seen = {root}
    for pid in tree:  # grows while it is walked: a breadth-first search
        for child, parent in parents.items():
            if parent == pid and child not in seen:
                seen.add(child)
                tree.append(child)
    return tree


def tree_pss_mb(roots: list[int]) -> tuple[float, float]:
    """The trees' proportional set size, and the anonymous part of it: pages shared between
    processes (the index files every capsule process maps, a forked parent's memory) are
    counted once, not per process as adding RSS would. The rest of the total is file pages
    mapped (the index, the store): page cache the kernel may drop and read again, where
    anonymous memory is what the processes themselves hold."""
    total_kb = anonymous_kb = 0
    for root in roots:
        for pid in tree_pids(root):
            try:
                with open(f"/proc/{pid}/smaps_rollup") as rollup:
                    fields = dict(line.split()[:2] for line in rollup if line.startswith("Pss"))
                total_kb += int(fields["Pss:"])
                anonymous_kb += int(fields.get("Pss_Anon:", fields["Pss:"]))
            except (OSError, KeyError, ValueError):
                continue
    return total_kb / 1024, anonymous_kb / 1024


class TreePeak:
    """Samples process trees until stopped: the peak of their summed PSS, and the largest
    high-water mark of any one process in them."""

    def __init__(self, roots: Callable[[], list[int]], every: float = 0.25) -> None:
        self.peak_mb = 0.0
        self.peak_anonymous_mb = 0.0
        self.largest_process_mb = 0.0
        self._roots = roots
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            roots = self._roots()
            total, anonymous = tree_pss_mb(roots)
            self.peak_mb = max(self.peak_mb, total)
            self.peak_anonymous_mb = max(self.peak_anonymous_mb, anonymous)
            for root in roots:
                for pid in tree_pids(root):
                    mark = high_water_mb(pid)
                    if mark is not None:
                        self.largest_process_mb = max(self.largest_process_mb, mark)


def run_stage(name: str, command: list[str], cwd: Path) -> StageRun:
    """Run ``command`` to its end and measure it; stdout is kept (``--json`` figures)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, text=True)
    stdout = process.stdout
    assert stdout is not None  # stdout=PIPE
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.append(stdout.read()), daemon=True)
    reader.start()
    with TreePeak(lambda: [process.pid]) as peak:
        _, status, usage = os.wait4(process.pid, 0)
    reader.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return StageRun(
        name=name,
        seconds=time.perf_counter() - started,
        cpu=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=peak.largest_process_mb,
        peak_tree_mb=peak.peak_mb,
        peak_tree_anonymous_mb=peak.peak_anonymous_mb,
        returncode=process.returncode,
        stdout="".join(output),
    )
