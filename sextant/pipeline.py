"""``sextant demo`` and ``sextant run``: the stages wired together as processes.

Each stage runs as its own ``sextant`` subprocess rather than being imported,
for two reasons: the core must not import a stage (the import graph points
one way), and a crash of the crawler or indexer must not take the search
capsule down with it — the capsule keeps serving the last good index, which
the indexer swaps in atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import click

from sextant.cli import EXIT_INTERRUPTED, pass_settings
from sextant.config import Settings
from sextant.errors import SextantError

SAMPLE_SEED = "gemini://station.example/"
#: How long a child gets to stop after SIGTERM before its process group is killed. Every
#: stage stops sooner (the crawl gives requests in flight one second), and Ctrl-C must give
#: the prompt back within two (tests/test_ctrl_c.py).
STOP_GRACE_SECONDS = 1.5
#: How often a parent waiting for a child looks at it; a Ctrl-C ends the wait at once.
POLL_SECONDS = 0.1
#: Besides Ctrl-C, what stops `demo` and `run` with their children: a `kill` or a service
#: manager, and the terminal closing (its SIGHUP no longer reaches the children, see
#: :class:`Children`).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StageFailed(SextantError):
    """A stage subprocess exited with an error."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: stop as asked. Not an error, and nobody to tell (a service
    manager, a closed terminal), unlike Ctrl-C's ``KeyboardInterrupt``."""


def _terminated(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(signum)


def sextant_command(data_dir: Path, *args: str) -> list[str]:
    """The command line that runs ``sextant`` with this interpreter and data dir."""
    return [sys.executable, "-m", "sextant", "--data-dir", str(data_dir), *args]


def stage_environment(db_url: str) -> dict[str, str]:
    """A stage's environment: ours, naming the store the parent uses. Without it a child
    would take the SQLite default instead of a ``--db-url`` given to the parent. (The
    environment, not the command line, where a password would show in ``ps``.)"""
    return {**os.environ, "SEXTANT_DB_URL": db_url}


class Children:
    """The processes a command starts, every one stopped when the ``with`` block ends.

    Each child runs in a process group of its own, so the terminal's Ctrl-C (a SIGINT to
    its foreground group) reaches this process only. It alone decides and reports: it stops
    the children with SIGTERM, which every stage takes as a quiet request, and the command
    says in one line what stopped. Children in the terminal's group would each stop by
    themselves and say so in their own words, and one could end before the parent noticed
    the Ctrl-C, which then took the child's exit status for a failure. Inside the block,
    SIGTERM and SIGHUP raise :class:`Terminated` (unless ignored, as under ``nohup``), so
    the children are stopped however the command is.
    """

    def __init__(self) -> None:
        self._started: list[subprocess.Popen[bytes]] = []
        self._handlers: dict[int, Any] = {}

    def __enter__(self) -> Children:
        self._handlers = {
            sig: signal.signal(sig, _terminated)
            for sig in STOP_SIGNALS
            if signal.getsignal(sig) == signal.SIG_DFL
        }
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop(*self._started)
        finally:
            for sig, handler in self._handlers.items():
                signal.signal(sig, handler)

    def start(self, command: Sequence[str], **popen: Any) -> subprocess.Popen[bytes]:
        """A long-running child (a server), stopped at the latest when the block ends."""
        self._started = [process for process in self._started if process.poll() is None]
        process = subprocess.Popen(command, process_group=0, **popen)
        self._started.append(process)
        return process

    def run_stage(self, data_dir: Path, *args: str, db_url: str) -> None:
        """Run one stage to completion, its output going straight to the user."""
        process = self.start(sextant_command(data_dir, *args), env=stage_environment(db_url))
        returncode = wait_for_exit(process)
        if returncode != 0:
            raise StageFailed(f"`sextant {' '.join(args[:1])}` exited with status {returncode}")

    def stop(self, *processes: subprocess.Popen[bytes]) -> None:
        """SIGTERM, then SIGKILL to the process group of whichever is still running after
        the grace (with what it started: a capsule's server processes). Ctrl-C is ignored
        meanwhile: the stop is short, and cut half-way it would leave children behind."""
        ignored = {
            sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, *STOP_SIGNALS)
        }
        try:
            running = [process for process in processes if process.poll() is None]
            for process in running:
                process.terminate()
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for process in running:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(max(0.0, deadline - time.monotonic()))
            for process in running:
                if process.poll() is None:  # still the leader, so the group is still its own
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        finally:
            for sig, handler in ignored.items():
                signal.signal(sig, handler)


def wait_for_exit(process: subprocess.Popen[bytes]) -> int:
    """The child's exit status, once it ends. Not ``Popen.wait()``: on Ctrl-C that gives the
    child a quarter of a second to die of the same SIGINT, which our children never get."""
    while (returncode := process.poll()) is None:
        time.sleep(POLL_SECONDS)
    return returncode


def wait_for_file(path: Path, process: subprocess.Popen[bytes], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        if process.poll() is not None:
            raise StageFailed(f"the sample space exited with status {process.returncode}")
        time.sleep(0.05)
    raise StageFailed(f"the sample space did not start within {timeout:g} s")


def wait_for_port(
    host: str, port: int, process: subprocess.Popen[bytes], timeout: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise StageFailed(f"the search capsule exited with status {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise StageFailed(f"the search capsule did not listen on {host}:{port} within {timeout:g} s")


def serve_args(host: str, port: int, hostname: str) -> list[str]:
    return ["serve", "--host", host, "--port", str(port), "--hostname", hostname]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address of the capsule.")
@click.option("--port", default=1965, show_default=True, help="Port of the search capsule.")
@click.option("--hostname", default="localhost", show_default=True, help="Capsule host name.")
@click.option(
    "--space-address",
    default="127.0.0.10",
    show_default=True,
    help="Loopback address of the first sample capsule.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Stop after the capsule is up and the instructions are printed (for scripts).",
)
@pass_settings
def demo(
    settings: Settings, host: str, port: int, hostname: str, space_address: str, no_wait: bool
) -> None:
    """Crawl, index and serve the bundled sample Geminispace, offline.

    Starts the sample capsules on loopback, crawls them into a fresh demo data
    directory, builds the index, and serves search on gemini://HOSTNAME:PORT/
    until Ctrl-C, which stops every process it started within two seconds. Ctrl-C
    is how a demo ends, so it then exits with status 0 (and `make demo` reports no
    error); with --no-wait, for scripts, an interrupted demo exits with 130.
    """
    data_dir = settings.data_dir / "demo"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    click.secho(f"Demo data directory: {data_dir}", bold=True)
    try:
        with Children() as children:
            _demo(children, data_dir, host, port, hostname, space_address, no_wait)
    except KeyboardInterrupt:
        click.echo(f"demo stopped; its data stays in {data_dir} until the next demo", err=True)
        raise SystemExit(EXIT_INTERRUPTED if no_wait else 0) from None
    except Terminated:
        raise SystemExit(0) from None


def _demo(
    children: Children,
    data_dir: Path,
    host: str,
    port: int,
    hostname: str,
    space_address: str,
    no_wait: bool,
) -> None:
    # The demo's own store, whatever SEXTANT_DB_URL says: the sample space must never
    # end up in a real store.
    store = f"sqlite:///{data_dir / 'sextant.db'}"
    ready = data_dir / "sample-space.json"
    space = sextant_command(
        data_dir,
        "sample-space",
        "serve",
        "--base-address",
        space_address,
        "--ready-file",
        str(ready),
    )
    space_process = children.start(space, stdout=subprocess.DEVNULL, env=stage_environment(store))
    layout = wait_for_file(ready, space_process, timeout=30)
    click.secho(f"1/3 sample space up: {len(layout['capsules'])} capsules", bold=True)
    pins = [arg for capsule in layout["capsules"] for arg in ("--resolve", capsule["pin"])]
    children.run_stage(
        data_dir,
        "crawl",
        "--seed",
        layout["seed"],
        "--allow-host",
        "*.example",
        "--delay",
        "0",
        *pins,
        db_url=store,
    )
    click.secho("2/3 crawl finished; building the index", bold=True)
    children.run_stage(data_dir, "index", db_url=store)
    serve = sextant_command(data_dir, *serve_args(host, port, hostname))
    capsule = children.start(serve, env=stage_environment(store))
    wait_for_port(host, port, capsule)
    url = f"gemini://{hostname}/" if port == 1965 else f"gemini://{hostname}:{port}/"
    click.secho(f"3/3 search capsule up at {url}", bold=True)
    click.echo(
        "\nTry it:\n"
        f"  sextant --data-dir {data_dir} search 'solar'\n"
        f"  sextant --data-dir {data_dir} search 'lang:de kartoffel'\n"
        f"  open {url} in a Gemini client (Lagrange, Amfora, AV-98: `av98 {url}`)\n"
    )
    if no_wait:
        return
    click.echo("Press Ctrl-C to stop the demo.")
    returncode = wait_for_exit(capsule)
    raise StageFailed(f"the search capsule exited with status {returncode}")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address of the capsule.")
@click.option("--port", default=1965, show_default=True, help="Port of the search capsule.")
@click.option("--hostname", default="localhost", show_default=True, help="Capsule host name.")
@click.option(
    "--interval",
    default=6 * 3600.0,
    show_default=True,
    help="Seconds from the start of one crawl-and-index cycle to the next.",
)
@click.option("--once", is_flag=True, help="Run one cycle, then stop (the capsule too).")
@click.option(
    "--crawl-arg",
    "crawl_args",
    multiple=True,
    help="An extra argument for `sextant crawl` (repeatable), e.g. --crawl-arg=--max-pages=5000.",
)
@pass_settings
def run(
    settings: Settings,
    host: str,
    port: int,
    hostname: str,
    interval: float,
    once: bool,
    crawl_args: tuple[str, ...],
) -> None:
    """Crawl, index and serve on a schedule: the production loop.

    The search capsule runs the whole time (restarted if it dies) and serves
    the last good index; each cycle recrawls due pages and new seeds, then
    indexes incrementally. A failing cycle is reported and the next one
    runs on schedule. Ctrl-C stops the capsule and any stage running within
    two seconds, with exit status 130 (SIGTERM: quietly, with 0); the next
    run continues the crawl.
    """
    data_dir = settings.ensure_data_dir()
    serve_command = sextant_command(data_dir, *serve_args(host, port, hostname))
    try:
        with Children() as children:
            capsule: subprocess.Popen[bytes] | None = None
            while True:
                if capsule is None or capsule.poll() is not None:
                    if capsule is not None:
                        click.echo(
                            f"search capsule exited ({capsule.returncode}); restarting", err=True
                        )
                    capsule = children.start(serve_command, env=stage_environment(settings.db_url))
                started = time.monotonic()
                _cycle(children, data_dir, settings.db_url, crawl_args)
                if once:
                    return
                next_start = time.time() + max(0.0, started + interval - time.monotonic())
                at = time.strftime("%H:%M:%S", time.localtime(next_start))
                click.echo(f"next cycle at {at}; Ctrl-C stops")
                _sleep_until(started + interval, capsule)
    except KeyboardInterrupt:
        click.echo("run stopped; the next one continues the crawl from here", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Terminated:  # like `sextant serve`: stopping is a service's normal end
        raise SystemExit(0) from None


def _cycle(children: Children, data_dir: Path, db_url: str, crawl_args: Sequence[str]) -> None:
    for args in (["crawl", "--recrawl", *crawl_args], ["index"]):
        try:
            children.run_stage(data_dir, *args, db_url=db_url)
        except StageFailed as exc:
            click.echo(f"{exc}; the capsule keeps serving the last good index", err=True)
            return


def _sleep_until(deadline: float, capsule: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline and capsule.poll() is None:
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))


__all__ = ["demo", "run"]
