"""Serve a :class:`bench.scale_space.ScaleSpace` over real TLS on loopback.

Every capsule listens on its own address (127.21.x.y), except that a pubnix's ``~user``
directories share their host and address as on a real pubnix, so the crawler's per-address
politeness sees what it would see out there. The server runs in its own processes; the
crawler reaches it through ``--resolve`` pins, as ``bench_crawl`` does.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import resource
from functools import partial
from multiprocessing.connection import Connection
from urllib.parse import unquote

import trio

from bench.scale_space import Capsule, ScaleSpace
from gemserve.server import Request, Response, ServerLimits, serve
from sextant.tls import make_self_signed, server_context_from_pem


def address_of(index: int) -> str:
    return f"127.21.{index // 250}.{index % 250 + 1}"


def answer(space: ScaleSpace, ports: dict[int, int], request: Request) -> Response:
    """What a capsule of the generated space says to one request."""
    capsule = space.by_host.get(request.url.host)
    if capsule is None:
        return Response.not_found("no such capsule")
    path = unquote(request.url.path) or "/"

    def origin(index: int) -> str:
        return f"gemini://{space.capsules[index].host}:{ports[index]}"

    if path == "/robots.txt":
        if capsule.robots:
            return Response.success(space.robots_txt(capsule).encode(), "text/plain")
        return Response.not_found()
    trapped = space.trap(capsule, path, request.url.query)
    if trapped is not None:
        return Response.gemtext(trapped)
    if capsule.kind == "gemlog" and path == "/gemlog/":
        return Response.gemtext(space.gemlog_index(capsule), lang=_lang(capsule))
    if capsule.kind == "gemlog" and path == "/atom.xml":
        body = space.atom_feed(capsule, origin(capsule.index)).encode()
        return Response.success(body, "application/atom+xml")
    number = space.number_of(capsule, path)
    if number is None:
        return Response.not_found()
    return Response.success(space.render(capsule, number, origin), space.meta(capsule, number))


def _lang(capsule: Capsule) -> str | None:
    return capsule.lang if capsule.declares_lang else None


async def _serve(pages: int, seed: int, share: int, shares: int, pipe: Connection) -> None:
    space = ScaleSpace(pages, seed)
    context = server_context_from_pem(*make_self_signed(["bench.example"]))
    limits = ServerLimits(max_connections=1024)
    ports: dict[int, int] = {}

    async def dispatch(request: Request) -> Response:
        return answer(space, ports, request)

    async with trio.open_nursery() as nursery:
        for capsule in space.capsules[share::shares]:
            ports[capsule.index] = await nursery.start(
                partial(
                    serve,
                    dispatch,
                    host=address_of(capsule.index),
                    port=0,
                    ssl_context=context,
                    limits=limits,
                )
            )
        pipe.send(dict(ports))
        ports.update(pipe.recv())  # every process's ports, for links across capsules


def _serve_process(pages: int, seed: int, share: int, shares: int, pipe: Connection) -> None:
    # One listening socket per capsule: 4,200 at full size, over a common default of 1,024.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_serve, pages, seed, share, shares, pipe)


class SpaceServer:
    """The generated space served by ``processes`` processes, capsules split between them."""

    def __init__(self, pages: int, seed: int = 21, processes: int = 1) -> None:
        self.space = ScaleSpace(pages, seed)
        self.processes: list[multiprocessing.Process] = []
        pipes = []
        for share in range(processes):
            parent, child = multiprocessing.Pipe()
            process = multiprocessing.Process(
                target=_serve_process, args=(pages, seed, share, processes, child), daemon=True
            )
            process.start()
            self.processes.append(process)
            pipes.append(parent)
        self.ports: dict[int, int] = {}
        for pipe in pipes:
            if not pipe.poll(120):
                self.close()
                raise RuntimeError("the generated space did not start")
            self.ports.update(pipe.recv())
        for pipe in pipes:
            pipe.send(self.ports)

    def origin(self, index: int) -> str:
        return f"gemini://{self.space.capsules[index].host}:{self.ports[index]}"

    def pins(self) -> list[str]:
        return [
            f"{capsule.host}:{self.ports[capsule.index]}:{address_of(capsule.index)}"
            for capsule in self.space.capsules
        ]

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]

    def close(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.join(10)
