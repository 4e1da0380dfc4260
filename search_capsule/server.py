"""Wiring: store, index and certificate in; a running search capsule out.

The Gemini side (TLS, request validation, 59/53, timeouts, bounded connections,
close_notify) is :func:`gemserve.server.serve`; this module gives it our app, our
certificate and our host names.
"""

from __future__ import annotations

import gc
import signal
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import trio
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from gemserve.server import ServerLimits, serve
from indexer.query import open_searcher
from search_capsule.app import CapsuleApp
from search_capsule.cache import TTLCache
from search_capsule.handlers import listings
from search_capsule.loadshare import LoadShare
from search_capsule.searching import SearchService
from search_capsule.services import CapsuleLimits, Services, StoreReader, make_throttle
from sextant.cli import run_async
from sextant.config import Settings
from sextant.errors import ConfigError
from sextant.store.migrate import open_store
from sextant.tls import CertificateFacts, certificate_facts, ensure_certificate, server_context

#: Addresses that mean "every interface": not a name a client can put in a URL.
_WILDCARDS = {"", "0.0.0.0", "::"}

DEFAULT_LIMITS = CapsuleLimits()
STOPPED = "search capsule stopped"
SERVER_LIMITS = ServerLimits(
    request_timeout=10.0,
    max_connections=512,
    send_timeout=30.0,
    max_connections_per_address=32,
    crowded_request_timeout=2.0,
)


@dataclass(frozen=True, slots=True)
class Certificate:
    cert_file: Path
    key_file: Path
    facts: CertificateFacts
    generated: bool  # made by us (self-signed, kept in the data dir)


def load_certificate(
    settings: Settings, hostname: str, cert_file: Path | None = None, key_file: Path | None = None
) -> Certificate:
    """The operator's certificate, or our own self-signed one for ``hostname``.

    Ours is created once in ``settings.cert_dir`` and reused on every start: clients pin
    it on first use (TOFU), so a new certificate at each start would look like an attack.
    """
    if (cert_file is None) != (key_file is None):
        raise ConfigError("give both --cert and --key, or neither to use a generated certificate")
    generated = cert_file is None
    if cert_file is None or key_file is None:
        cert_file, key_file = ensure_certificate(settings.cert_dir, hostname)
    try:
        pem = cert_file.read_bytes()
        der = x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the certificate {cert_file}: {exc}") from exc
    return Certificate(cert_file, key_file, certificate_facts(der), generated)


def tls_context(certificate: Certificate) -> ssl.SSLContext:
    try:
        return server_context(certificate.cert_file, certificate.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"cannot use {certificate.cert_file} with {certificate.key_file}: {exc}. "
            "Check that the key belongs to the certificate."
        ) from exc


def accepted_names(hostname: str, host: str) -> list[str]:
    """Host names requests may carry: ours, and the address we listen on when it is one."""
    names = [hostname]
    if host not in _WILDCARDS and host != hostname:
        names.append(host)
    return names


def build_app(
    settings: Settings,
    limits: CapsuleLimits = DEFAULT_LIMITS,
) -> CapsuleApp:
    """The capsule's app over the store and index that ``settings`` name."""
    engine = open_store(settings.db_url, busy_timeout=limits.store_busy_timeout)
    throttle = make_throttle(limits)
    search = SearchService(
        open_searcher(settings),
        settings.index_dir,
        workers=limits.search_workers,
        max_waiting=limits.max_waiting,
        per_client=limits.searches_per_client,
        budget=limits.search_budget,
        throttle=throttle,
        cache=TTLCache(max_entries=limits.search_cache_entries, ttl=limits.search_cache_ttl),
    )
    services = Services(
        store=StoreReader(engine, limits), search=search, limits=limits, throttle=throttle
    )
    return CapsuleApp(services)


async def run_capsule(
    app: CapsuleApp,
    *,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext,
    hostnames: list[str] | None,
    limits: ServerLimits = SERVER_LIMITS,
    sockets: list[socket.socket] | None = None,
    share: LoadShare | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; ``task_status.started`` reports the bound port. With
    ``sockets`` (bound by the caller, shared by several processes and spread over them by
    ``share``) ``host:port`` only names them."""
    await serve(
        app,
        host=host,
        port=port,
        ssl_context=ssl_context,
        hostnames=hostnames,
        limits=limits,
        sockets=sockets,
        share=share,
        task_status=task_status,
    )


def serve_process(
    settings: Settings,
    limits: CapsuleLimits,
    certificate: Certificate,
    host: str,
    names: list[str],
    sockets: list[socket.socket],
    share: LoadShare | None = None,
    stop_on: signal.Signals = signal.SIGTERM,
    ready: Callable[[], None] | None = None,
    server_limits: ServerLimits = SERVER_LIMITS,
) -> None:
    """One capsule process: its own app (searcher, store connections) on the shared sockets,
    until ``stop_on`` arrives (or Ctrl-C, when it is the only process)."""
    context = tls_context(certificate)
    app = build_app(settings, limits)
    # What exists now (modules, the app) lives as long as the process. Frozen, it is left
    # out of the collector's full passes: these walked its 120,000 objects for 50-110 ms
    # (bench index, 2 cores), and the process answered nobody meanwhile.
    gc.freeze()
    try:
        run_async(
            partial(
                _serve_until,
                app,
                context,
                host,
                names,
                sockets,
                share,
                stop_on,
                ready,
                server_limits,
            ),
            interrupted=STOPPED,
        )
    finally:
        app.close()


async def _serve_until(
    app: CapsuleApp,
    context: ssl.SSLContext,
    host: str,
    names: list[str],
    sockets: list[socket.socket],
    share: LoadShare | None,
    stop_on: signal.Signals,
    ready: Callable[[], None] | None,
    server_limits: ServerLimits,
) -> None:
    with trio.open_signal_receiver(stop_on) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(
                    run_capsule,
                    app,
                    host=host,
                    port=sockets[0].getsockname()[1],
                    ssl_context=context,
                    hostnames=names,
                    sockets=sockets,
                    share=share,
                    limits=server_limits,
                )
            )
            if ready is not None:
                ready()
            nursery.start_soon(listings.warm, app.services)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
