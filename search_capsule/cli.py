"""``sextant serve``: the search capsule on the command line."""

from __future__ import annotations

import dataclasses
import logging
import signal
from functools import partial
from pathlib import Path

import click

from gemserve.admission import share_of
from gemserve.server import bind_sockets
from search_capsule.processes import Supervisor, default_process_count
from search_capsule.server import (
    DEFAULT_LIMITS,
    SERVER_LIMITS,
    STOPPED,
    accepted_names,
    load_certificate,
    serve_process,
    tls_context,
)
from search_capsule.services import CapsuleLimits
from sextant.cli import EXIT_INTERRUPTED, pass_settings
from sextant.config import Settings
from sextant.errors import ConfigError
from sextant.store.migrate import open_store

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
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=None,
    help="Server processes sharing the port, each with its own searcher and caches "
    "(a search uses one core). Default: one per core, at most 8.",
)
@click.option(
    "--seed-port",
    "seed_ports",
    multiple=True,
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Also accept suggested seeds on this port (repeatable). By default the add-seed "
    "form takes only port 1965, so visitors cannot aim the crawler at other services.",
)
@click.option(
    "--search-budget",
    type=click.FloatRange(0.01, 60.0),
    default=DEFAULT_LIMITS.search_budget,
    show_default=True,
    help="Seconds of search-thread time one search may take; a costlier query stops early "
    "and shows the best results found so far, marked as such. Each search's time is charged "
    "to its client's allowance (10 costly pages a second, bursts of 40, per address; 25 ms "
    "of search costs as much as one page), and each address has one search in flight per "
    "process, its others waiting behind it.",
)
@click.option(
    "--connections-per-address",
    type=click.IntRange(1, 100_000),
    default=SERVER_LIMITS.max_connections_per_address,
    show_default=True,
    help="Open connections one client address (an IPv6 /64) may hold, shared out among the "
    "processes; one more is closed at once. Each process serves at most "
    f"{SERVER_LIMITS.max_connections} connections, and once half are open, new ones get "
    f"{SERVER_LIMITS.crowded_request_timeout:g} s instead of "
    f"{SERVER_LIMITS.request_timeout:g} s to send their request.",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every failure and connection problem.")
@pass_settings
def serve(
    settings: Settings,
    host: str,
    port: int,
    hostname: str,
    cert: Path | None,
    key: Path | None,
    processes: int | None,
    seed_ports: tuple[int, ...],
    search_budget: float,
    connections_per_address: int,
    verbose: bool,
) -> None:
    """Serve search over Gemini: gemini://HOSTNAME/ answers from any Gemini client.

    Without --cert/--key a self-signed certificate for HOSTNAME is created in the data
    directory on first start and reused afterwards (clients pin it: TOFU). The index is
    picked up when `sextant index` builds or swaps it, without a restart.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    certificate = load_certificate(settings, hostname, cert, key)
    tls_context(certificate)  # an unusable key is reported now, not by every process
    open_store(settings.db_url).dispose()  # create or upgrade it once, before the processes
    count = processes or default_process_count()
    try:
        sockets = bind_sockets(host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host} port {port}: {exc.strerror or exc}. "
            "Choose another with --host/--port, or stop what is using it."
        ) from None
    bound = sockets[0].getsockname()[1]
    origin = hostname if bound == 1965 else f"{hostname}:{bound}"
    kind = "generated, self-signed" if certificate.generated else "from --cert"

    def banner() -> None:
        click.echo(f"search capsule listening on {host} port {bound}: gemini://{origin}/")
        click.echo(f"processes: {count}")
        click.echo(f"certificate ({kind}): {certificate.cert_file}")
        click.echo(f"SHA-256 fingerprint: {certificate.facts.fingerprint_sha256}")
        click.echo(f"valid until {certificate.facts.not_after:%Y-%m-%d}; Ctrl-C stops")

    names = accepted_names(hostname, host)
    # Each process allows a client its share of the rate and of the connections: connections
    # spread evenly over the processes.
    limits = shared_limits(
        dataclasses.replace(
            DEFAULT_LIMITS,
            search_budget=search_budget,
            seed_ports=DEFAULT_LIMITS.seed_ports | frozenset(seed_ports),
        ),
        count,
    )
    server_limits = dataclasses.replace(
        SERVER_LIMITS, max_connections_per_address=share_of(connections_per_address, count)
    )
    run = partial(
        serve_process, settings, limits, certificate, host, names, server_limits=server_limits
    )
    try:
        if count == 1:
            run(sockets, stop_on=signal.SIGTERM, ready=banner)
            return
        stopped_by = Supervisor(run, sockets, count).run(ready=banner)
    finally:
        for listening in sockets:
            listening.close()
    if stopped_by == signal.SIGINT:
        click.echo(STOPPED, err=True)
        raise SystemExit(EXIT_INTERRUPTED)
    # SIGTERM: a service manager, or `sextant run` or `demo` that started us and reports
    # the stop itself; stopping is what was asked, as quietly as one process does it.


def shared_limits(limits: CapsuleLimits, processes: int) -> CapsuleLimits:
    """Each process's part of the per-client allowance: connections spread evenly."""
    if limits.rate_per_client is None or processes == 1:
        return limits
    return dataclasses.replace(
        limits,
        rate_per_client=limits.rate_per_client / processes,
        burst_per_client=max(1, limits.burst_per_client // processes),
    )
