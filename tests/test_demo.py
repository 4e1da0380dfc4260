"""End to end: `sextant demo` crawls, indexes and serves the sample space, and the
search capsule answers known queries over real TLS; Ctrl-C stops every process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import trio

from tests import wire_client

SPACE_ADDRESS = "127.0.4.10"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_line(process: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"demo exited ({process.poll()}):\n{''.join(lines)}")
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"no {needle!r} within {timeout} s:\n{''.join(lines)}")


def search(port: int, query: str) -> wire_client.WireReply:
    url = f"gemini://localhost:{port}/search?{quote(query)}"
    return trio.run(lambda: wire_client.request(("127.0.0.1", port), url, sni="localhost"))


@pytest.mark.slow
def test_demo_crawls_indexes_and_serves_the_sample_space(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "sextant", "--data-dir", str(tmp_path), "demo"]
    command += ["--port", str(port), "--space-address", SPACE_ADDRESS]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_for_line(process, "search capsule up", timeout=180)

        solar = search(port, "solar powered capsule")
        assert solar.status == 20
        first_result = next(
            line for line in solar.body.decode().splitlines() if line.startswith("=> gemini://")
        )
        assert "gemlog.example/posts/2026-06-30-solar-server.gmi" in first_result

        soup = search(port, "Kartoffelsuppe").body.decode()
        assert "gemini://rezepte.example/kartoffelsuppe.gmi" in soup

        # robots.txt keeps the indexer out of search.example/private/.
        secret = search(port, "periwinkle").body.decode()
        assert "search.example/private" not in secret

        # The Latin-1 page without a declared charset was decoded, not mangled.
        poem = search(port, "neiges").body.decode()
        assert "gemini://poemes.example/ancien.gmi" in poem
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    # Every child is gone: the capsule and the sample space no longer listen.
    for address in (("127.0.0.1", port), (SPACE_ADDRESS, 1965)):
        with pytest.raises(ConnectionRefusedError), socket.create_connection(address, timeout=1):
            pass
