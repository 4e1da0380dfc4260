"""`sextant serve` as a user runs it: a process that prints how to reach it and its fingerprint."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import trio
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from sextant.cli import cli
from sextant.tls import certificate_facts, make_self_signed
from tests.search_capsule.client import check
from tests.wire_client import exchange


def start_serve(data_dir: Path, *args: str) -> tuple[subprocess.Popen[str], int, str]:
    command = [sys.executable, "-m", "sextant", "--data-dir", str(data_dir), "serve"]
    process = subprocess.Popen(
        [*command, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output = read_until(process, "SHA-256 fingerprint")
    port = int(re.search(r"listening on 127\.0\.0\.1 port (\d+)", output).group(1))
    fingerprint = re.search(r"SHA-256 fingerprint: ([0-9a-f]{64})", output).group(1)
    return process, port, fingerprint


def read_until(process: subprocess.Popen[str], text: str) -> str:
    """What the process printed up to the first line holding ``text``."""
    assert process.stdout is not None
    output = ""
    while text not in output:
        line = process.stdout.readline()
        assert line, f"serve exited ({process.wait()}) before {text!r}:\n{output}"
        output += line
    return output


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    remaining, _ = process.communicate(timeout=20)
    assert process.returncode == 130, remaining
    return remaining


def fingerprint_of(path: Path) -> str:
    der = x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(Encoding.DER)
    return certificate_facts(der).fingerprint_sha256


def fetch(port: int, url: str, sni: str = "localhost", timeout: float = 5.0):
    line = url.encode() + b"\r\n"
    return trio.run(lambda: exchange(("127.0.0.1", port), line, sni=sni, timeout=timeout))


def test_serve_generates_a_certificate_once_and_reuses_it(tmp_path):
    process, port, printed = start_serve(tmp_path)
    try:
        cert_file = tmp_path / "certs" / "localhost.crt"
        assert printed == fingerprint_of(cert_file)
        wire = fetch(port, f"gemini://localhost:{port}/")
        assert check(wire).status == 20
        assert certificate_facts(wire.peer_certificate).fingerprint_sha256 == printed
        assert check(fetch(port, f"gemini://127.0.0.1:{port}/about")).status == 20
        assert check(fetch(port, f"gemini://elsewhere.example:{port}/")).status == 53
    finally:
        assert "search capsule stopped" in stop(process)
    again, _, reprinted = start_serve(tmp_path)
    stop(again)
    assert reprinted == printed


def test_serve_with_the_operators_certificate(tmp_path):
    cert_pem, key_pem = make_self_signed(["search.example"], key_type="rsa")
    (tmp_path / "c.pem").write_bytes(cert_pem)
    (tmp_path / "k.pem").write_bytes(key_pem)
    # One process: serve runs the capsule itself instead of supervising children.
    args = ["--processes", "1", "--hostname", "search.example", "--cert", str(tmp_path / "c.pem")]
    process, port, printed = start_serve(tmp_path / "data", *args, "--key", str(tmp_path / "k.pem"))
    try:
        assert printed == fingerprint_of(tmp_path / "c.pem")
        reply = check(fetch(port, f"gemini://search.example:{port}/", sni="search.example"))
        assert reply.status == 20
    finally:
        assert "search capsule stopped" in stop(process)
    assert not (tmp_path / "data" / "certs").exists()
    assert not children_of(process.pid)


def test_serve_refuses_unusable_settings_with_one_line(tmp_path):
    runner = CliRunner()
    cert_pem, _key_pem = make_self_signed(["a.example"])
    other_cert, _ = make_self_signed(["b.example"])
    (tmp_path / "c.pem").write_bytes(cert_pem)
    (tmp_path / "other.pem").write_bytes(other_cert)
    base = ["--data-dir", str(tmp_path / "d"), "serve"]
    result = runner.invoke(cli, [*base, "--cert", str(tmp_path / "c.pem")])
    assert result.exit_code == 1
    assert "Error: give both --cert and --key" in result.output
    result = runner.invoke(
        cli, [*base, "--cert", str(tmp_path / "c.pem"), "--key", str(tmp_path / "other.pem")]
    )
    assert result.exit_code == 1
    assert "Error: cannot" in result.output
    result = runner.invoke(cli, [*base, "--cert", str(tmp_path / "missing.pem")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_serve_reports_a_busy_port(tmp_path):
    process, port, _ = start_serve(tmp_path)
    try:
        result = CliRunner().invoke(
            cli, ["--data-dir", str(tmp_path), "serve", "--port", str(port)]
        )
        assert result.exit_code == 1, result.output
        assert f"Error: cannot listen on 127.0.0.1 port {port}" in result.output
    finally:
        stop(process)


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def wait_for_children(pid: int, count: int, gone: int | None = None) -> set[int]:
    """The ``count`` child processes of ``pid`` (once ``gone`` is no longer one of them)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = children_of(pid)
        if len(found) == count and gone not in found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{pid} has children {children_of(pid)}, not {count}")


def test_processes_share_the_port_and_a_dead_one_is_replaced(tmp_path):
    process, port, _ = start_serve(tmp_path, "--processes", "2")
    try:
        workers = wait_for_children(process.pid, 2)
        # A stopped process accepts nothing: the other one answers every request, even when
        # it was stopped halfway through its own start (it once held the store's first-use
        # lock then, and its sibling never started: sextant.store.migrate). On a loaded
        # machine the other may still be opening its index, hence the generous timeout.
        paused, other = sorted(workers)
        os.kill(paused, signal.SIGSTOP)
        try:
            for _ in range(6):
                reply = fetch(port, f"gemini://localhost:{port}/about", timeout=30.0)
                assert check(reply).status == 20
        finally:
            os.kill(paused, signal.SIGCONT)
        # A killed process is replaced; the survivor keeps answering meanwhile.
        os.kill(paused, signal.SIGKILL)
        assert check(fetch(port, f"gemini://localhost:{port}/")).status == 20
        replaced = wait_for_children(process.pid, 2, gone=paused)
        assert other in replaced
        os.kill(other, signal.SIGSTOP)  # only the replacement (perhaps starting) answers
        try:
            reply = fetch(port, f"gemini://localhost:{port}/about", timeout=30.0)
            assert check(reply).status == 20
        finally:
            os.kill(other, signal.SIGCONT)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    assert process.returncode == 0, output
    assert "ended with signal SIGKILL" in output
    assert not children_of(process.pid)


def test_ctrl_c_to_the_process_group_stops_every_process(tmp_path):
    process, _, _ = start_serve(tmp_path, "--processes", "2")
    workers = wait_for_children(process.pid, 2)
    for pid in (process.pid, *workers):  # what a terminal does on Ctrl-C
        os.kill(pid, signal.SIGINT)
    remaining, _ = process.communicate(timeout=20)
    assert process.returncode == 130, remaining
    assert "search capsule stopped" in remaining
    assert "Traceback" not in remaining
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_serve_prepares_the_listings_as_it_starts(tmp_path):
    """The production start path warms the shared listings (search_capsule.handlers.listings
    .warm) and says so under --verbose; the first visitor then finds them computed."""
    process, port, _ = start_serve(tmp_path, "--processes", "1", "--verbose")
    watchdog = threading.Timer(30, process.kill)  # a line that never comes fails, not hangs
    watchdog.start()
    try:
        assert "could not prepare" not in read_until(process, "listings ready in")
        assert check(fetch(port, f"gemini://localhost:{port}/")).status == 20
    finally:
        watchdog.cancel()
        stop(process)
