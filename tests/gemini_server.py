"""Scripted test capsules: real TLS servers on loopback that answer from a script.

Crawler tests stand up several capsules, each on its own loopback address with its own
certificate, and script what every path returns: a normal :class:`Response`, an async
function of the request, or a :class:`Hostile` behaviour that takes over the wire after
the request line (endless bodies, slow drips, broken headers, missing close_notify...).
Each capsule records the requests it received, so tests can check politeness spacing and
that a URL was fetched exactly once.

Everything runs on :func:`gemserve.server.serve_raw`, the listener our real capsules use,
and well-behaved answers go through the same request validation and response writing.

In-process::

    alpha = ScriptedCapsule("alpha.test")
    alpha.route("/", gemtext("# Home\\n=> /a A\\n"))
    alpha.route("/endless", endless_body())
    running = await capsules(alpha)            # the pytest fixture from tests/conftest.py
    running["alpha.test"].url("/")             # gemini://alpha.test:PORT/
    running.resolve_args                       # ["alpha.test:PORT:127.1.x.y"] for --resolve

In another process (for kill/resume tests and benchmarks)::

    python -m tests.gemini_server --spec capsules.json [--requests-log hits.jsonl]

prints one JSON line once every capsule listens (see :func:`run_spec`), then serves until
killed. :func:`capsule_process` wraps that for tests.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import select
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import trio

from gemserve.server import (
    Request,
    Response,
    ServerLimits,
    ServerStream,
    accepted_hosts,
    call_app,
    receive_request,
    respond,
    serve_raw,
)
from sextant.tls import certificate_facts, make_self_signed, server_context_from_pem

ROOT = Path(__file__).resolve().parent.parent

HostileHandler = Callable[[ServerStream, Request], Awaitable[None]]
DynamicRoute = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Hostile:
    """A route that writes raw bytes itself once the request line has been read."""

    name: str
    handler: HostileHandler


Route = Response | DynamicRoute | Hostile


class Hit(NamedTuple):
    at: float  # time.monotonic(), comparable across processes on one machine
    path: str  # path, plus "?query" when the request had one


# --- addresses ---------------------------------------------------------------------------

# 127.1.0.0/16 is ours: the demo uses 127.0.0.x and the sample-space tests 127.0.3.x. Every
# capsule gets a fresh address, so crawler politeness (per host *and* per address) sees
# separate servers unless a test shares an address on purpose. Ports are always ephemeral,
# so parallel test processes that happen to pick the same address cannot collide either.
_ADDRESS_SPACE = 254 * 255
_address_counter = itertools.count(os.getpid() * 7919)


def allocate_address() -> str:
    """A loopback address no other capsule of this process has been given."""
    index = next(_address_counter) % _ADDRESS_SPACE
    return f"127.1.{index // 254}.{index % 254 + 1}"


# --- the capsule -------------------------------------------------------------------------


class ScriptedCapsule:
    """One capsule: a host name, a certificate for it, and scripted routes.

    Routes are looked up at request time by ``path?query`` first, then by ``path``, so they
    may be added or changed while the capsule runs. Unknown paths get 51.
    """

    def __init__(
        self,
        hostname: str,
        *,
        address: str | None = None,
        port: int = 0,
        key_type: str = "ec",
        cert_names: Iterable[str] | None = None,
        not_before: datetime | None = None,
        not_after: datetime | None = None,
        response_delay: float = 0.0,
        check_host: bool = True,
        limits: ServerLimits | None = None,
    ) -> None:
        self.hostname = hostname
        self.address = address
        self.port = port
        self.response_delay = response_delay
        self.limits = limits or ServerLimits(request_timeout=5.0, send_timeout=10.0)
        self.requests: list[Hit] = []
        self.on_request: Callable[[ScriptedCapsule, Hit], None] | None = None
        self._routes: dict[str, Route] = {}
        self._accepted = accepted_hosts([hostname]) if check_host else None
        self._current: ssl.SSLContext
        self.cert_pem = b""
        self.rotate_certificate(
            key_type=key_type, names=cert_names, not_before=not_before, not_after=not_after
        )
        # The listener keeps this context for good; the SNI callback (which OpenSSL calls
        # with or without SNI) swaps in the current one, so rotation needs no restart.
        self.ssl_context = server_context_from_pem(self.cert_pem, self._key_pem)
        self.ssl_context.sni_callback = self._select_context

    # scripting

    def route(self, path: str, answer: Route) -> ScriptedCapsule:
        """Script ``path`` (optionally with ``?query``). Returns the capsule for chaining.

        A :class:`Response` is sent as is on every request, so give it a ``bytes`` body; for a
        streamed body use a dynamic route that builds a fresh response per request.
        """
        self._routes[path] = answer
        return self

    def hostile(self, path: str, behaviour: Hostile | Response) -> ScriptedCapsule:
        return self.route(path, behaviour)

    def routes(self, table: Mapping[str, Route]) -> ScriptedCapsule:
        for path, answer in table.items():
            self.route(path, answer)
        return self

    # certificates

    def rotate_certificate(
        self,
        *,
        key_type: str = "ec",
        names: Iterable[str] | None = None,
        not_before: datetime | None = None,
        not_after: datetime | None = None,
    ) -> str:
        """Serve a new certificate from the next connection on; returns its fingerprint."""
        self.cert_pem, self._key_pem = make_self_signed(
            list(names) if names is not None else [self.hostname],
            key_type=key_type,
            not_before=not_before,
            not_after=not_after,
        )
        self._current = server_context_from_pem(self.cert_pem, self._key_pem)
        return self.fingerprint

    @property
    def fingerprint(self) -> str:
        return certificate_facts(
            ssl.PEM_cert_to_DER_cert(self.cert_pem.decode())
        ).fingerprint_sha256

    def _select_context(
        self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext
    ) -> None:
        connection.context = self._current

    # observations

    def hits(self, path: str) -> list[float]:
        """When ``path`` (with ``?query`` if any) was requested."""
        return [hit.at for hit in self.requests if hit.path == path]

    @property
    def paths(self) -> list[str]:
        return [hit.path for hit in self.requests]

    # serving

    async def handle(self, stream: ServerStream) -> None:
        outcome = await receive_request(stream, limits=self.limits, hostnames=self._accepted)
        if isinstance(outcome, Response):
            await respond(stream, outcome, limits=self.limits)
            return
        url = outcome.url
        target = url.path if url.query is None else f"{url.path}?{url.query}"
        hit = Hit(time.monotonic(), target)
        self.requests.append(hit)
        if self.on_request is not None:
            self.on_request(self, hit)
        if self.response_delay:
            await trio.sleep(self.response_delay)
        answer = self._routes.get(target, self._routes.get(url.path))
        if isinstance(answer, Hostile):
            await answer.handler(stream, outcome)
            return
        if answer is None:
            response = Response.not_found()
        elif isinstance(answer, Response):
            response = answer
        else:
            response = await call_app(answer, outcome)
        await respond(stream, response, limits=self.limits)

    def __repr__(self) -> str:
        return f"ScriptedCapsule({self.hostname!r}, {len(self._routes)} routes)"


# --- running capsules --------------------------------------------------------------------


@dataclass(frozen=True)
class RunningCapsule:
    capsule: ScriptedCapsule
    address: tuple[str, int]  # (ip, port) to connect to

    @property
    def hostname(self) -> str:
        return self.capsule.hostname

    @property
    def ip(self) -> str:
        return self.address[0]

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def base_url(self) -> str:
        return f"gemini://{self.hostname}" + ("" if self.port == 1965 else f":{self.port}")

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    @property
    def resolve_arg(self) -> str:
        """curl-style ``HOST:PORT:ADDRESS`` pin, as the crawler's ``--resolve`` takes it."""
        return f"{self.hostname}:{self.port}:{self.ip}"


@dataclass(frozen=True)
class RunningCapsules(Mapping[str, RunningCapsule]):
    by_host: dict[str, RunningCapsule] = field(default_factory=dict)

    def __getitem__(self, hostname: str) -> RunningCapsule:
        return self.by_host[hostname]

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_host)

    def __len__(self) -> int:
        return len(self.by_host)

    @property
    def resolve_args(self) -> list[str]:
        return [running.resolve_arg for running in self.by_host.values()]

    def url(self, hostname: str, path: str = "/") -> str:
        return self.by_host[hostname].url(path)


async def start_capsules(
    nursery: trio.Nursery, capsules: Iterable[ScriptedCapsule]
) -> RunningCapsules:
    """Start every capsule in ``nursery``; they run until the nursery is cancelled."""
    running: dict[str, RunningCapsule] = {}
    for capsule in capsules:
        if capsule.hostname in running:
            raise ValueError(f"two capsules named {capsule.hostname}")
        ip = capsule.address or allocate_address()
        port = await nursery.start(
            partial(
                serve_raw,
                capsule.handle,
                host=ip,
                port=capsule.port,
                ssl_context=capsule.ssl_context,
                limits=capsule.limits,
            )
        )
        running[capsule.hostname] = RunningCapsule(capsule, (ip, port))
    return RunningCapsules(running)


@contextlib.asynccontextmanager
async def open_capsules(capsules: Iterable[ScriptedCapsule]) -> AsyncIterator[RunningCapsules]:
    """Run capsules for the duration of an ``async with`` block."""
    async with trio.open_nursery() as nursery:
        yield await start_capsules(nursery, capsules)
        nursery.cancel_scope.cancel()


# --- scripted answers --------------------------------------------------------------------


def gemtext(text: str, *, lang: str | None = None) -> Response:
    return Response.gemtext(text, lang=lang)


def plain(text: str | bytes, mime: str = "text/plain") -> Response:
    return Response.success(text.encode("utf-8") if isinstance(text, str) else text, mime)


def non_utf8(text: str, *, encoding: str = "latin-1", declare: bool = True) -> Response:
    """Gemtext in another charset, with the charset declared in meta or (like many real
    servers) not, leaving the client to notice the bytes are not UTF-8."""
    meta = "text/gemini" + (f"; charset={encoding}" if declare else "")
    return Response.success(text.encode(encoding), meta)


def bom_body(text: str, mime: str = "text/gemini") -> Response:
    """A body that starts with a UTF-8 byte order mark, as some editors save files."""
    return Response.success(b"\xef\xbb\xbf" + text.encode("utf-8"), mime)


# --- hostile behaviours ------------------------------------------------------------------
# Each writes exactly the bytes its name promises; tests/test_gemini_server.py checks them
# on the wire. They ignore the ServerLimits, because misbehaving is their job.


def endless_body(mime: str = "text/gemini", line: bytes = b"All work and no play.\n") -> Hostile:
    """A 20 header, then the same line forever, until the client hangs up."""

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.send_all(f"20 {mime}\r\n".encode())
        chunk = line * max(1, 16384 // len(line))
        while True:
            await stream.send_all(chunk)

    return Hostile("endless_body", handler)


def slow_drip(
    interval: float,
    body: bytes = b"# Dripping\nOne byte at a time.\n",
    *,
    mime: str = "text/gemini",
    chunk_size: int = 1,
    drip_header: bool = False,
) -> Hostile:
    """The body ``chunk_size`` bytes at a time with ``interval`` seconds between pieces
    (the header too, with ``drip_header``), then a proper close_notify."""

    async def handler(stream: ServerStream, request: Request) -> None:
        header = f"20 {mime}\r\n".encode()
        if drip_header:
            body_stream = header + body
        else:
            await stream.send_all(header)
            body_stream = body
        for start in range(0, len(body_stream), chunk_size):
            if start:
                await trio.sleep(interval)
            await stream.send_all(body_stream[start : start + chunk_size])
        await stream.aclose()

    return Hostile("slow_drip", handler)


def huge_body(n_bytes: int, mime: str = "text/plain") -> Hostile:
    """Exactly ``n_bytes`` of body (a repeating printable pattern), then close_notify."""
    pattern = b"0123456789abcdefghijklmnopqrstuvwxyz\n" * 1800  # about 64 KiB

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.send_all(f"20 {mime}\r\n".encode())
        remaining = n_bytes
        while remaining > 0:
            piece = pattern[: min(remaining, len(pattern))]
            await stream.send_all(piece)
            remaining -= len(piece)
        await stream.aclose()

    return Hostile("huge_body", handler)


def header_without_crlf(
    body: bytes = b"# LF only\n", meta: str = "text/gemini", *, terminator: bytes = b"\n"
) -> Hostile:
    """A header ended by a bare LF (or by ``terminator``, e.g. ``b""`` for none at all)."""

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.send_all(f"20 {meta}".encode() + terminator + body)
        await stream.aclose()

    return Hostile("header_without_crlf", handler)


def garbage_header(data: bytes) -> Hostile:
    """``data`` verbatim in place of a Gemini header (an HTTP status line, binary junk...)."""

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.send_all(data)
        await stream.aclose()

    return Hostile("garbage_header", handler)


def no_close_notify(
    body: bytes = b"# Complete?\nNobody knows.\n", meta: str = "text/gemini"
) -> Hostile:
    """A correct response whose connection ends with a TCP close but no TLS close_notify."""

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.send_all(f"20 {meta}\r\n".encode() + body)
        await stream.transport_stream.aclose()

    return Hostile("no_close_notify", handler)


def stall_before_header(seconds: float, then: Response | None = None) -> Hostile:
    """Say nothing for ``seconds``, then send ``then`` (by default a small page)."""
    answer = then or Response.gemtext("# Finally\n")

    async def handler(stream: ServerStream, request: Request) -> None:
        await trio.sleep(seconds)
        await respond(stream, answer, limits=ServerLimits())

    return Hostile("stall_before_header", handler)


def hang_up() -> Hostile:
    """Read the request, then close the TCP connection without a byte of answer."""

    async def handler(stream: ServerStream, request: Request) -> None:
        await stream.transport_stream.aclose()

    return Hostile("hang_up", handler)


HOSTILE_BEHAVIOURS: dict[str, Callable[..., Hostile]] = {
    "endless_body": endless_body,
    "slow_drip": slow_drip,
    "huge_body": huge_body,
    "header_without_crlf": header_without_crlf,
    "garbage_header": garbage_header,
    "no_close_notify": no_close_notify,
    "stall_before_header": stall_before_header,
    "hang_up": hang_up,
}


# --- generated sites ---------------------------------------------------------------------

_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "ve", "zu", "an", "or", "el")


def synthetic_site(
    pages: int, *, links_per_page: int = 5, seed: int = 0, prefix: str = "/p/"
) -> dict[str, Response]:
    """A deterministic site: ``/`` links to page 0, page *i* links to page *i+1* (so every
    page is reachable) and to ``links_per_page - 1`` random others. Each page has a title
    and a paragraph of made-up words, so it is worth indexing."""
    rng = random.Random(seed)
    site = {"/": Response.gemtext(f"# Synthetic site\n=> {prefix}0 First page\n")}
    for number in range(pages):
        words = " ".join(
            "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(40)
        )
        targets = {(number + 1) % pages} | {
            rng.randrange(pages) for _ in range(max(0, links_per_page - 1))
        }
        links = "".join(f"=> {prefix}{target} Page {target}\n" for target in sorted(targets))
        site[f"{prefix}{number}"] = Response.gemtext(f"# Page {number}\n{words}\n{links}")
    return site


# --- another process ---------------------------------------------------------------------

_BYTES_ARGUMENTS = {"body", "data", "line", "terminator"}


def _answer_from_spec(entry: Mapping[str, Any], substitute: Callable[[str], str]) -> Route:
    """One route of a spec file; text may say ``{url:HOST}`` for another capsule's base URL."""
    if "hostile" in entry:
        arguments = {key: value for key, value in entry.items() if key != "hostile"}
        for key in _BYTES_ARGUMENTS & arguments.keys():
            arguments[key] = substitute(arguments[key]).encode("utf-8")
        return HOSTILE_BEHAVIOURS[entry["hostile"]](**arguments)
    if "gemtext" in entry:
        return Response.gemtext(substitute(entry["gemtext"]), lang=entry.get("lang"))
    status = int(entry["status"])
    body = entry.get("body")
    return Response(
        status,
        substitute(entry.get("meta", "")),
        None if body is None else substitute(body).encode("utf-8"),
    )


async def run_spec(
    spec: Mapping[str, Any],
    *,
    requests_log: Path | None = None,
    task_status: trio.TaskStatus[dict[str, Any]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the capsules a spec describes until cancelled.

    Spec (JSON)::

        {"capsules": [{"hostname": "alpha.test",          # required
                       "address": "127.1.9.9", "port": 0, "key_type": "ec",
                       "response_delay": 0.0,
                       "routes": {"/": {"gemtext": "# Home\\n=> {url:beta.test}/ Beta\\n"},
                                  "/robots.txt": {"status": 20, "meta": "text/plain",
                                                  "body": "User-agent: *\\n"},
                                  "/drip": {"hostile": "slow_drip", "interval": 0.5}},
                       "synthetic": {"pages": 100, "links_per_page": 5, "seed": 1}}]}

    Reports ``{"capsules": {host: {"address", "port", "url", "fingerprint"}}, "resolve":
    [...]}`` through ``task_status``. With ``requests_log`` every request is appended as a
    JSON line ``{"at", "host", "path"}`` and flushed at once, so the record survives a kill.
    """
    entries = list(spec["capsules"])
    capsules = [
        ScriptedCapsule(
            entry["hostname"],
            address=entry.get("address"),
            port=int(entry.get("port", 0)),
            key_type=entry.get("key_type", "ec"),
            response_delay=float(entry.get("response_delay", 0.0)),
        )
        for entry in entries
    ]
    with contextlib.ExitStack() as stack:
        if requests_log is not None:
            log_file = stack.enter_context(requests_log.open("a", encoding="utf-8"))

            def record(capsule: ScriptedCapsule, hit: Hit) -> None:
                entry = {"at": hit.at, "host": capsule.hostname, "path": hit.path}
                log_file.write(json.dumps(entry) + "\n")
                log_file.flush()

            for capsule in capsules:
                capsule.on_request = record
        async with trio.open_nursery() as nursery:
            running = await start_capsules(nursery, capsules)

            def substitute(text: str) -> str:
                for host, each in running.items():
                    text = text.replace("{url:" + host + "}", each.base_url)
                return text

            for entry, capsule in zip(entries, capsules, strict=True):
                if "synthetic" in entry:
                    capsule.routes(synthetic_site(**entry["synthetic"]))
                for path, answer in entry.get("routes", {}).items():
                    capsule.route(path, _answer_from_spec(answer, substitute))
            task_status.started(
                {
                    "capsules": {
                        host: {
                            "address": each.ip,
                            "port": each.port,
                            "url": each.url(),
                            "fingerprint": each.capsule.fingerprint,
                        }
                        for host, each in running.items()
                    },
                    "resolve": running.resolve_args,
                }
            )


async def _main_async(spec: Mapping[str, Any], requests_log: Path | None) -> None:
    async with trio.open_nursery() as nursery:
        ready = await nursery.start(partial(run_spec, spec, requests_log=requests_log))
        sys.stdout.write(json.dumps(ready) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, required=True, help="JSON file describing capsules")
    parser.add_argument("--requests-log", type=Path, help="append every request here (JSONL)")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec.read_text(encoding="utf-8"))
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_main_async, spec, args.requests_log)


@dataclass
class CapsuleProcess:
    process: subprocess.Popen[str]
    ready: dict[str, Any]

    def address(self, hostname: str) -> tuple[str, int]:
        info = self.ready["capsules"][hostname]
        return (info["address"], info["port"])

    def url(self, hostname: str, path: str = "/") -> str:
        return self.ready["capsules"][hostname]["url"].rstrip("/") + path

    @property
    def resolve_args(self) -> list[str]:
        return list(self.ready["resolve"])


@contextlib.contextmanager
def capsule_process(
    spec: Mapping[str, Any],
    directory: Path,
    *,
    requests_log: Path | None = None,
    ready_timeout: float = 20.0,
) -> Iterator[CapsuleProcess]:
    """Run :func:`main` in a child process for the duration of a ``with`` block."""
    spec_file = directory / "capsules.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    command = [sys.executable, "-m", "tests.gemini_server", "--spec", str(spec_file)]
    if requests_log is not None:
        command += ["--requests-log", str(requests_log)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        readable, _, _ = select.select([process.stdout], [], [], ready_timeout)
        line = process.stdout.readline() if readable else ""
        if not line:
            raise RuntimeError(f"capsule process did not start (exit code {process.poll()})")
        yield CapsuleProcess(process, json.loads(line))
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


if __name__ == "__main__":
    main()
