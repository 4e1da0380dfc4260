"""``sextant sample-space``: the bundled Geminispace, for demos and trying things out."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import click
import trio

from gemserve.sample_space.serve import RunningCapsule, serve_space
from gemserve.sample_space.space import SEED_URL
from sextant.cli import run_async


@click.group("sample-space")
def sample_space() -> None:
    """The small Geminispace bundled with Sextant (nine capsules on loopback)."""


@sample_space.command("serve")
@click.option(
    "--base-address",
    default="127.0.0.10",
    show_default=True,
    help="Loopback address of the first capsule; the others take the next addresses.",
)
@click.option("--port", default=1965, show_default=True, help="Port every capsule listens on.")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the capsules' addresses as JSON here once all are listening.",
)
def serve_command(base_address: str, port: int, ready_file: Path | None) -> None:
    """Serve the sample capsules until Ctrl-C.

    Point a crawl at them with the printed --resolve pins, for example:
    sextant crawl --seed gemini://station.example/ --resolve station.example:1965:127.0.0.10 …
    """

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            try:
                running = await nursery.start(
                    partial(serve_space, base_address=base_address, port=port)
                )
            except* OSError as group:
                reason = group.exceptions[0].strerror  # type: ignore[union-attr]
                raise click.ClickException(
                    f"cannot listen on {base_address} port {port}: {reason}. "
                    "Is the sample space already running? Try another --base-address."
                ) from None
            _announce(running, ready_file)

    run_async(main, interrupted="sample space stopped")


def _announce(running: list[RunningCapsule], ready_file: Path | None) -> None:
    for capsule in running:
        click.echo(f"{capsule.url:<32} {capsule.address}:{capsule.port}")
    pins = " ".join(f"--resolve {c.pin}" for c in running)
    click.echo(
        f"\ncrawl it with:\n  sextant crawl --seed {SEED_URL} --allow-host '*.example' {pins}"
    )
    if ready_file is not None:
        document = {
            "seed": SEED_URL,
            "capsules": [
                {"host": c.host, "address": c.address, "port": c.port, "pin": c.pin}
                for c in running
            ],
        }
        tmp = ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(document, indent=2), encoding="utf-8")
        tmp.replace(ready_file)  # atomic: a reader never sees half a file
