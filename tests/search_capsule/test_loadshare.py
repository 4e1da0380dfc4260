"""Spreading connections over server processes: the shared counts, and two real processes."""

from __future__ import annotations

import copy
import multiprocessing
import os
import signal
import socket
import ssl
import time
from collections import Counter
from functools import partial

import pytest
import trio

from gemserve.server import ServerStream, bind_sockets, serve_raw
from search_capsule.loadshare import LoadShare
from search_capsule.processes import Supervisor
from sextant.tls import client_context, make_self_signed, server_context_from_pem

HOST = "127.0.0.1"


def test_counts_are_per_slot_and_only_a_busier_process_waits():
    share = LoadShare(3)
    sibling = copy.copy(share)  # the same shared counts, as the process in slot 1 sees them
    share.join(0)
    share.opened()
    assert not share.busier_than_a_sibling()  # no sibling has started: nobody to wait for
    sibling.join(1)
    assert share.busier_than_a_sibling()
    assert [share.count(slot) for slot in range(2)] == [1, 0]
    share.closed()
    assert not share.busier_than_a_sibling()
    share.opened()
    share.leave(1)  # the sibling died: its slot is empty until a replacement joins
    assert not share.busier_than_a_sibling()
    with pytest.raises(ValueError, match="outside"):
        share.join(3)
    with pytest.raises(ValueError, match="at least one"):
        LoadShare(0)


def test_the_counts_are_shared_with_forked_children():
    share = LoadShare(2)
    share.join(0)
    assert share.count(1) > 1000  # empty until the child joins

    def child() -> None:
        share.join(1)
        for _ in range(3):
            share.opened()

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join()
    assert process.exitcode == 0
    assert share.count(1) == 3
    assert not share.busier_than_a_sibling()  # we have none open, the child has three


async def test_a_busier_process_waits_at_most_max_defer(autojump_clock):
    share = LoadShare(2, max_defer=0.2, poll_interval=0.005)
    copy.copy(share).join(1)  # a sibling with no connections
    share.join(0)
    share.opened()
    started = trio.current_time()
    await share.wait_turn()
    # Virtual time: max_defer, give or take the last poll.
    assert 0.2 <= trio.current_time() - started <= 0.2 + share.poll_interval + 1e-9


async def test_a_busier_process_goes_on_once_the_sibling_catches_up(autojump_clock):
    share = LoadShare(2, max_defer=5.0, poll_interval=0.005)
    sibling = copy.copy(share)  # the same shared counts, as the process in slot 0 sees them
    sibling.join(0)
    share.join(1)
    share.opened()
    share.opened()

    async def sibling_accepts() -> None:
        await trio.sleep(0.1)
        sibling.opened()
        sibling.opened()

    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sibling_accepts)
        await share.wait_turn()
    # Virtual time: at the first poll after the sibling's accepts, long before max_defer.
    waited = trio.current_time() - started
    assert 0.1 - 1e-9 <= waited <= 0.1 + share.poll_interval + 1e-9


# --- two real server processes on one port ---------------------------------------------------


async def _hold(stream: ServerStream) -> None:
    """Say which process answered, then keep the connection (and its count) open."""
    await stream.send_all(f"{os.getpid()}\n".encode())
    await trio.sleep(60)


def _serve_holding(context: ssl.SSLContext, sockets: list[socket.socket], share: LoadShare) -> None:
    trio.run(
        partial(
            serve_raw, _hold, host=HOST, port=0, ssl_context=context, sockets=sockets, share=share
        )
    )


def _supervise(sockets: list[socket.socket], share: LoadShare, context: ssl.SSLContext) -> None:
    Supervisor(partial(_serve_holding, context), sockets, 2, share).run()


def _answering_pid(port: int, context: ssl.SSLContext, kept: list[ssl.SSLSocket]) -> int:
    tcp = socket.create_connection((HOST, port), timeout=10)
    stream = context.wrap_socket(tcp, server_hostname="localhost")
    kept.append(stream)
    line = b""
    while not line.endswith(b"\n"):
        chunk = stream.recv(64)
        assert chunk, "the server closed the connection"
        line += chunk
    return int(line)


def test_connections_go_to_the_process_with_fewer_open():
    """One client after another, each holding its connection open: a process never gets a
    second connection more than its sibling. Left to the kernel, the process woken first
    (often the same one) takes them."""
    sockets = bind_sockets(HOST, 0)
    port = sockets[0].getsockname()[1]
    share = LoadShare(2, max_defer=3.0)  # generous: a loaded test machine wakes slowly
    context = server_context_from_pem(*make_self_signed(["localhost"]))
    supervisor = multiprocessing.get_context("fork").Process(
        target=_supervise, args=(sockets, share, context)
    )
    supervisor.start()
    kept: list[ssl.SSLSocket] = []
    try:
        answered: Counter[int] = Counter()
        for _ in range(10):
            answered[_answering_pid(port, client_context(), kept)] += 1
            counts = [*answered.values(), 0, 0][:2]
            assert max(counts) - min(counts) <= 1, answered
            time.sleep(0.02)  # the count is published right after accepting
        assert sorted(answered.values()) == [5, 5]
    finally:
        for stream in kept:
            stream.close()
        os.kill(supervisor.pid, signal.SIGTERM)
        supervisor.join(20)
        for listening in sockets:
            listening.close()
