"""Ctrl-C in a terminal: every long-running command stops within 2 s, says in one line
what stopped, and leaves no process behind.

A terminal sends SIGINT to its whole foreground process group, not to one process, so each
command runs here in a session of its own and the signal goes to the group
(``os.killpg``): the command and every child it started in that group get it at once. The
signal is sent only once the command is ready (its last ready line printed, or the capsule
it crawls holds a request of it), so the figure measured is the stop, not the start.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sextant.pipeline import STOP_GRACE_SECONDS, Children
from tests.gemini_server import ROOT, CapsuleProcess, capsule_process

#: What the issue asks: the prompt is back within two seconds of Ctrl-C.
STOP_WITHIN = 2.0
#: Starting is not what is measured; a loaded machine may take its time.
READY_WITHIN = 180.0

SITE = "site.ctrlc.test"
#: A small capsule and a page that never answers: a request to it is in flight until cut.
SPEC = {
    "capsules": [
        {
            "hostname": SITE,
            "routes": {
                "/robots.txt": {"status": 20, "meta": "text/plain", "body": "User-agent: *\n"},
                "/": {"gemtext": "# Home\n=> /a A\n=> /b B\n"},
                "/a": {"gemtext": "# A\n=> /b B\n"},
                "/b": {"gemtext": "# B\n"},
                "/stuck/": {"gemtext": "# Stuck\n=> /stuck/forever Forever\n"},
                "/stuck/forever": {"hostile": "stall_before_header", "seconds": 600},
            },
        }
    ]
}

Process = tuple[int, str]  # pid and start time: a pid alone may be reused


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()  # fields from the state on: [0] state, [1] ppid


def _family(root: int) -> set[Process]:
    """``root``, its descendants and every member of its process group, still running."""
    parents: dict[int, int] = {}
    starts: dict[int, str] = {}
    members: set[int] = {root}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (fields := _stat(int(entry.name))) is None:
            continue
        if fields[0] in "ZX":
            continue
        pid = int(entry.name)
        parents[pid], starts[pid] = int(fields[1]), fields[19]
        if int(fields[2]) == root:
            members.add(pid)
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in members} - members
        members |= more
        grew = bool(more)
    return {(pid, starts[pid]) for pid in members if pid in starts}


def _alive(process: Process) -> bool:
    fields = _stat(process[0])
    return fields is not None and fields[0] not in "ZX" and fields[19] == process[1]


def _survivors(processes: list[Process], within: float = 1.0) -> list[Process]:
    """Those of ``processes`` still alive ``within`` seconds from now. A process sent
    SIGKILL a moment ago can still be on its way out (the CI machine once saw one still
    running when its group's kill had just returned); one that lives a second on was
    not stopped."""
    deadline = time.monotonic() + within
    while (alive := [each for each in processes if _alive(each)]) and time.monotonic() < deadline:
        time.sleep(0.01)
    return alive


@dataclass
class Stopped:
    seconds: float
    status: int
    stdout: str  # what was printed after the Ctrl-C
    stderr: str
    left_alive: list[Process]

    def stop_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@dataclass
class Command:
    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def output(self) -> str:
        return self.out.read_text(errors="replace") + self.err.read_text(errors="replace")

    def wait_for(self, *needles: str, timeout: float = READY_WITHIN) -> None:
        self.wait_until(lambda: all(needle in self.output() for needle in needles), timeout)

    def wait_until(self, ready: Callable[[], bool], timeout: float = READY_WITHIN) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if self.process.poll() is not None:
                raise AssertionError(f"exited ({self.process.returncode}):\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready within {timeout:g} s:\n{self.output()}")
            time.sleep(0.05)
        time.sleep(0.3)  # the last ready line may not be the last write of every process

    def ctrl_c(self) -> Stopped:
        """What a terminal does on Ctrl-C, and how the command took it."""
        return self.send(signal.SIGINT, group=True)

    def send(self, signum: signal.Signals, *, group: bool) -> Stopped:
        family = _family(self.process.pid)
        printed = (self.out.stat().st_size, self.err.stat().st_size)
        started = time.monotonic()
        if group:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)
        try:
            status = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            status = -999
        seconds = time.monotonic() - started
        left = _survivors([each for each in family if each[0] != self.process.pid])
        stdout = self.out.read_bytes()[printed[0] :].decode(errors="replace")
        stderr = self.err.read_bytes()[printed[1] :].decode(errors="replace")
        return Stopped(seconds, status, stdout, stderr, left)


@contextlib.contextmanager
def sextant(directory: Path, *args: str) -> Iterator[Command]:
    """``sextant ARGS`` in a session of its own; whatever it leaves behind is killed."""
    out, err = directory / "stdout.txt", directory / "stderr.txt"
    command = [sys.executable, "-m", "sextant", "--data-dir", str(directory / "data"), *args]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    family: set[Process] = set()
    try:
        running = Command(process, out, err)
        yield running
    finally:
        family = _family(process.pid)
        for pid, _ in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.wait()


def assert_stopped_quietly(stopped: Stopped, what: str | None, status: int) -> None:
    """Within the time, with ``status``, nothing left running, and on stderr one line that
    says ``what`` stopped (nothing at all for ``None``) and no error."""
    report = f"{stopped}"
    assert stopped.seconds <= STOP_WITHIN, report
    assert stopped.status == status, report
    assert len(stopped.stop_lines()) == (0 if what is None else 1), report
    assert what is None or what in stopped.stop_lines()[0], report
    for noise in ("Error", "Traceback", "Aborted"):
        assert noise not in stopped.stderr + stopped.stdout, report
    assert stopped.left_alive == [], report


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served_requests(log: Path) -> str:
    return log.read_text() if log.exists() else ""


def crawl_args(server: CapsuleProcess, path: str) -> list[str]:
    pins = [arg for pin in server.resolve_args for arg in ("--resolve", pin)]
    return ["--seed", server.url(SITE, path), "--allow-host", SITE, "--delay", "0", *pins]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[CapsuleProcess, Path]]:
    log = tmp_path / "requests.jsonl"
    with capsule_process(SPEC, tmp_path, requests_log=log) as server:
        yield server, log


def test_ctrl_c_stops_serve_and_every_capsule_process(tmp_path: Path) -> None:
    with sextant(tmp_path, "serve", "--port", "0", "--processes", "2") as serve:
        serve.wait_for("Ctrl-C stops")
        stopped = serve.ctrl_c()
    assert_stopped_quietly(stopped, "search capsule stopped", 130)
    assert stopped.stdout == ""


def test_ctrl_c_stops_a_crawl_with_a_request_that_never_ends(
    tmp_path: Path, site: tuple[CapsuleProcess, Path]
) -> None:
    server, log = site
    with sextant(tmp_path, "crawl", *crawl_args(server, "/stuck/"), "--timeout", "600") as crawl:
        crawl.wait_until(lambda: "/stuck/forever" in served_requests(log))
        stopped = crawl.ctrl_c()
    assert_stopped_quietly(stopped, "crawl stopped", 130)
    # The cut request is not lost: it is in the frontier for the next crawl.
    assert re.search(r"frontier left +[1-9]", stopped.stdout), stopped.stdout


def test_ctrl_c_stops_run_while_it_serves(
    tmp_path: Path, site: tuple[CapsuleProcess, Path]
) -> None:
    server, _ = site
    extra = [f"--crawl-arg={arg}" for arg in crawl_args(server, "/")]
    with sextant(tmp_path, "run", "--port", str(free_port()), *extra) as run:
        run.wait_for("Ctrl-C stops", "next cycle")
        stopped = run.ctrl_c()
    assert_stopped_quietly(stopped, "run stopped", 130)
    assert stopped.stdout == ""


@pytest.mark.parametrize(
    ("signum", "group", "what", "status"),
    [(signal.SIGINT, True, "run stopped", 130), (signal.SIGTERM, False, None, 0)],
    ids=["ctrl-c", "kill"],
)
def test_run_in_the_middle_of_a_crawl_stops_with_every_child(
    tmp_path: Path,
    site: tuple[CapsuleProcess, Path],
    signum: signal.Signals,
    group: bool,
    what: str | None,
    status: int,
) -> None:
    """Ctrl-C reaches the whole group; `kill PID` (a service manager) the parent alone, which
    stops the rest, quietly."""
    server, log = site
    extra = [f"--crawl-arg={arg}" for arg in crawl_args(server, "/stuck/")]
    with sextant(tmp_path, "run", "--port", str(free_port()), *extra) as run:
        run.wait_until(lambda: "/stuck/forever" in served_requests(log))
        run.wait_for("Ctrl-C stops")
        stopped = run.send(signum, group=group)
    assert_stopped_quietly(stopped, what, status)


def test_a_child_deaf_to_sigterm_is_killed_with_its_process_group_after_the_grace() -> None:
    # It ignores SIGTERM, and so does the process it started (SIG_IGN survives exec).
    deaf = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    with Children() as children:
        child = children.start([sys.executable, "-c", deaf], stdout=subprocess.PIPE)
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        child.stdout.close()
        family = _family(child.pid)
        assert len(family) == 2
        started = time.monotonic()
    seconds = time.monotonic() - started
    assert STOP_GRACE_SECONDS <= seconds <= STOP_WITHIN
    assert _survivors(family) == []


@pytest.mark.slow
def test_ctrl_c_stops_the_demo_and_everything_it_started(tmp_path: Path) -> None:
    port = free_port()
    demo = ["demo", "--port", str(port), "--space-address", "127.0.6.10"]
    with sextant(tmp_path, *demo) as running:
        running.wait_for("Press Ctrl-C", "Ctrl-C stops")
        stopped = running.ctrl_c()
    # Ctrl-C is how a demo ends: status 0, so `make demo` reports no error either.
    assert_stopped_quietly(stopped, "demo stopped", 0)
    assert stopped.stdout == ""
    for address in (("127.0.0.1", port), ("127.0.6.10", 1965)):
        with pytest.raises(ConnectionRefusedError), socket.create_connection(address, timeout=1):
            pass
