"""``sextant serve``: the search capsule on the command line."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import click
import trio

from search_capsule.server import (
    accepted_names,
    build_app,
    load_certificate,
    run_capsule,
    tls_context,
)
from sextant.cli import pass_settings, run_async
from sextant.config import Settings
from sextant.errors import ConfigError

CERT_PATH = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=1965, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option(
    "--hostname",
    default="localhost",
    show_default=True,
    help="The capsule's public host name: requests for other hosts get 53, and a generated "
    "certificate is made for it.",
)
@click.option("--cert", type=CERT_PATH, help="PEM certificate (default: generate one, once).")
@click.option("--key", type=CERT_PATH, help="PEM private key belonging to --cert.")
@click.option("--verbose", "-v", is_flag=True, help="Log every failure and connection problem.")
@pass_settings
def serve(
    settings: Settings,
    host: str,
    port: int,
    hostname: str,
    cert: Path | None,
    key: Path | None,
    verbose: bool,
) -> None:
    """Serve search over Gemini: gemini://HOSTNAME/ answers from any Gemini client.

    Without --cert/--key a self-signed certificate for HOSTNAME is created in the data
    directory on first start and reused afterwards (clients pin it: TOFU). The index is
    picked up when `sextant index` builds or swaps it, without a restart.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    certificate = load_certificate(settings, hostname, cert, key)
    context = tls_context(certificate)
    app = build_app(settings)
    names = accepted_names(hostname, host)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            try:
                bound = await nursery.start(
                    partial(
                        run_capsule, app, host=host, port=port, ssl_context=context, hostnames=names
                    )
                )
            except OSError as exc:
                raise ConfigError(
                    f"cannot listen on {host} port {port}: {exc.strerror or exc}. "
                    "Choose another with --host/--port, or stop what is using it."
                ) from None
            origin = hostname if bound == 1965 else f"{hostname}:{bound}"
            kind = "generated, self-signed" if certificate.generated else "from --cert"
            click.echo(f"search capsule listening on {host} port {bound}: gemini://{origin}/")
            click.echo(f"certificate ({kind}): {certificate.cert_file}")
            click.echo(f"SHA-256 fingerprint: {certificate.facts.fingerprint_sha256}")
            click.echo(f"valid until {certificate.facts.not_after:%Y-%m-%d}; Ctrl-C stops")

    try:
        run_async(main, interrupted="search capsule stopped")
    finally:
        app.close()
