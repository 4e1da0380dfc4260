"""Several capsule processes on one port, so searches use every core.

A search is Python and numpy under the GIL: threads in one process take turns, so one
process answers at most what one core can compute. Here the parent binds the listening
sockets, forks ``count`` children that each run the whole capsule (its own searcher,
caches and store connections) and accept from the same sockets — a child with more open
connections than a sibling leaves new ones to it (:mod:`search_capsule.loadshare`) — and then only
supervises:

* a child that dies (a crash, the OOM killer, ``kill -9``) is replaced, at most once a
  second, while the others keep answering;
* SIGTERM or SIGINT to the parent stops every child and ends the parent; children ignore
  SIGINT, so Ctrl-C in a terminal (sent to the whole process group) stops them in order
  rather than all at once.

Each child's caches, per-client throttle, search lanes and connection counts are its own:
an identical query may be computed once per child, and each child allows a client its
share of the rate and of the open connections (``sextant serve`` divides the totals by the
number of processes), and one search in flight.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

from search_capsule.loadshare import LoadShare
from sextant.errors import SextantError

log = logging.getLogger(__name__)

#: A slot whose child died sooner than this after starting waits this long before the next.
RESTART_DELAY = 1.0
#: Seconds a child gets to finish after SIGTERM before it is killed.
STOP_GRACE = 5.0

ChildMain = Callable[[list[socket.socket], LoadShare], None]


def default_process_count() -> int:
    """One process per core the scheduler gives us, at most eight."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


class Supervisor:
    """Runs ``count`` children of ``child_main`` on ``sockets`` until told to stop; ``share``
    (one slot per child) is how they spread connections over themselves."""

    def __init__(
        self,
        child_main: ChildMain,
        sockets: list[socket.socket],
        count: int,
        share: LoadShare | None = None,
    ) -> None:
        self._child_main = child_main
        self._sockets = sockets
        self._count = count
        self._share = share or LoadShare(count)
        if self._share.processes != count:
            raise ValueError(f"the load share has {self._share.processes} slots, not {count}")
        self._context = multiprocessing.get_context("fork")
        self._children: dict[int, BaseProcess] = {}
        self._started_at: dict[int, float] = {}
        self._stopping = False

    def run(self, ready: Callable[[], None] | None = None) -> int:
        """Supervise until SIGTERM/SIGINT; the signal number that stopped us. ``ready`` is
        called once the signals are ours and the children started (a banner printed before
        would invite a Ctrl-C nobody handles yet)."""
        received: list[int] = []
        # The handler wakes the wait below at once: a wait interrupted by a signal resumes
        # by itself (PEP 475), and Ctrl-C must not wait for its timeout (tests/test_ctrl_c.py).
        woken, wake = socket.socketpair()
        wake.setblocking(False)

        def stop(signum: int, _frame: FrameType | None) -> None:
            received.append(signum)
            self._stopping = True
            with contextlib.suppress(OSError):
                wake.send(b"\0")

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for slot in range(self._count):
                self._start(slot)
            if ready is not None:
                ready()
            while not self._stopping:
                wait([woken, *(child.sentinel for child in self._children.values())], timeout=0.5)
                self._replace_dead()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            woken.close()
            wake.close()
        return received[0] if received else 0

    def _start(self, slot: int) -> None:
        child = self._context.Process(
            target=_child,
            args=(self._child_main, self._sockets, self._share, slot),
            name=f"capsule-{slot}",
        )
        child.start()
        self._children[slot] = child
        self._started_at[slot] = time.monotonic()

    def _replace_dead(self) -> None:
        for slot, child in list(self._children.items()):
            if child.is_alive() or self._stopping:
                continue
            child.join()
            self._share.leave(slot)
            lived = time.monotonic() - self._started_at[slot]
            log.error(
                "capsule process %s ended with %s after %.1f s; starting another",
                child.pid,
                _describe_exit(child.exitcode),
                lived,
            )
            if lived < RESTART_DELAY:
                time.sleep(RESTART_DELAY - lived)
            self._start(slot)

    def _stop_all(self) -> None:
        for child in self._children.values():
            if child.is_alive():
                child.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for child in self._children.values():
            child.join(max(0.0, deadline - time.monotonic()))
            if child.is_alive():
                child.kill()
                child.join()


def _child(
    child_main: ChildMain, sockets: list[socket.socket], share: LoadShare, slot: int
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited
    share.join(slot)
    try:
        child_main(sockets, share)
    except SextantError as exc:  # a message for people; the supervisor reports the exit
        log.error("%s", exc)
        raise SystemExit(1) from None


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit status {code}"
