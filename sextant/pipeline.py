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
from collections.abc import Iterator, Sequence
from pathlib import Path

import click

from sextant.cli import pass_settings
from sextant.config import Settings
from sextant.errors import SextantError

SAMPLE_SEED = "gemini://station.example/"
#: How long a child gets to stop after SIGINT before it is killed.
STOP_GRACE_SECONDS = 10.0


class StageFailed(SextantError):
    """A stage subprocess exited with an error."""


def sextant_command(data_dir: Path, *args: str) -> list[str]:
    """The command line that runs ``sextant`` with this interpreter and data dir."""
    return [sys.executable, "-m", "sextant", "--data-dir", str(data_dir), *args]


def stage_environment(db_url: str) -> dict[str, str]:
    """A stage's environment: ours, naming the store the parent uses. Without it a child
    would take the SQLite default instead of a ``--db-url`` given to the parent. (The
    environment, not the command line, where a password would show in ``ps``.)"""
    return {**os.environ, "SEXTANT_DB_URL": db_url}


def run_stage(data_dir: Path, *args: str, db_url: str) -> None:
    """Run one stage to completion, its output going straight to the user."""
    command = sextant_command(data_dir, *args)
    completed = subprocess.run(command, env=stage_environment(db_url), check=False)
    if completed.returncode != 0:
        raise StageFailed(
            f"`sextant {' '.join(args[:1])}` exited with status {completed.returncode}"
        )


@contextlib.contextmanager
def child_process(command: Sequence[str], **popen: object) -> Iterator[subprocess.Popen[bytes]]:
    """A long-running child that is always stopped (SIGINT, then SIGKILL) when we leave."""
    process = subprocess.Popen(command, **popen)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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
    until Ctrl-C. Every process it starts is stopped on the way out.
    """
    data_dir = settings.data_dir / "demo"
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
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
    click.secho(f"Demo data directory: {data_dir}", bold=True)
    with child_process(
        space, stdout=subprocess.DEVNULL, env=stage_environment(store)
    ) as space_process:
        layout = wait_for_file(ready, space_process, timeout=30)
        click.secho(f"1/3 sample space up: {len(layout['capsules'])} capsules", bold=True)
        pins = [arg for capsule in layout["capsules"] for arg in ("--resolve", capsule["pin"])]
        run_stage(
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
        run_stage(data_dir, "index", db_url=store)
        serve = sextant_command(data_dir, *serve_args(host, port, hostname))
        with child_process(serve, env=stage_environment(store)) as capsule:
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
            _wait_until_interrupted(capsule)


def _wait_until_interrupted(process: subprocess.Popen[bytes]) -> None:
    try:
        while process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo("\nstopping the demo…")
        return
    raise StageFailed(f"the search capsule exited with status {process.returncode}")


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
    runs on schedule.
    """
    data_dir = settings.ensure_data_dir()
    serve_command = sextant_command(data_dir, *serve_args(host, port, hostname))
    capsule: subprocess.Popen[bytes] | None = None
    try:
        while True:
            if capsule is None or capsule.poll() is not None:
                if capsule is not None:
                    click.echo(
                        f"search capsule exited ({capsule.returncode}); restarting", err=True
                    )
                capsule = subprocess.Popen(serve_command, env=stage_environment(settings.db_url))
            started = time.monotonic()
            _cycle(data_dir, settings.db_url, crawl_args)
            if once:
                return
            _sleep_until(started + interval, capsule)
    except KeyboardInterrupt:
        click.echo("\nstopping…", err=True)
    finally:
        if capsule is not None:
            stop_process(capsule)


def _cycle(data_dir: Path, db_url: str, crawl_args: Sequence[str]) -> None:
    for args in (["crawl", "--recrawl", *crawl_args], ["index"]):
        try:
            run_stage(data_dir, *args, db_url=db_url)
        except StageFailed as exc:
            click.echo(f"{exc}; the capsule keeps serving the last good index", err=True)
            return


def _sleep_until(deadline: float, capsule: subprocess.Popen[bytes]) -> None:
    while time.monotonic() < deadline and capsule.poll() is None:
        time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))


__all__ = ["demo", "run"]
