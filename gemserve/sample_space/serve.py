"""Serve the sample space: one capsule per loopback address, all on one port.

Capsules link to each other with absolute URLs on the default port, so every
capsule listens on the same port at its own address (127.0.0.10, .11, …) and
the crawler is pointed at them with ``--resolve HOST:PORT:ADDRESS`` pins.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import partial

import trio

from gemserve.sample_space.space import CAPSULES
from gemserve.server import serve
from sextant.tls import make_self_signed, server_context_from_pem


@dataclass(frozen=True, slots=True)
class RunningCapsule:
    host: str
    address: str
    port: int

    @property
    def pin(self) -> str:
        """The crawler's ``--resolve`` argument for this capsule."""
        return f"{self.host}:{self.port}:{self.address}"

    @property
    def url(self) -> str:
        return (
            f"gemini://{self.host}/" if self.port == 1965 else f"gemini://{self.host}:{self.port}/"
        )


def addresses(base_address: str) -> list[str]:
    base = ipaddress.IPv4Address(base_address)
    if not base.is_loopback:
        raise ValueError(f"{base_address} is not a loopback address; use 127.x.y.z")
    return [str(base + offset) for offset in range(len(CAPSULES))]


async def serve_space(
    *,
    base_address: str = "127.0.0.10",
    port: int = 1965,
    task_status: trio.TaskStatus[list[RunningCapsule]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve every sample capsule until cancelled; report where they listen once all do."""
    running: list[RunningCapsule] = []
    async with trio.open_nursery() as nursery:
        for capsule, address in zip(CAPSULES, addresses(base_address), strict=True):
            cert, key = make_self_signed([capsule.host])
            bound = await nursery.start(
                partial(
                    serve,
                    capsule.handle,
                    host=address,
                    port=port,
                    ssl_context=server_context_from_pem(cert, key),
                    hostnames=[capsule.host],
                )
            )
            running.append(RunningCapsule(capsule.host, address, bound))
        task_status.started(running)
