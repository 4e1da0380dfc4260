"""AV-98, the client from the original Gemini article, browses the capsule.

A real third-party client, run as its own process in download mode, proves what our own
test client cannot: that the capsule's TLS, headers, prompts, redirects and gemtext work
for software we did not write. AV-98 keeps its TOFU database under ``$HOME``, so each run
gets a fresh home directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.search_capsule import space
from tests.search_capsule.conftest import NOTES

AV98 = shutil.which("av98", path=str(Path(sys.executable).parent))
pytestmark = pytest.mark.skipif(AV98 is None, reason="av-98 is not installed (pip install av-98)")


async def av98_download(url: str, home: Path, *, typed: str = "") -> str:
    """Fetch ``url`` the way `av98 --dl URL -o FILE` does, answering any prompt with ``typed``."""
    await trio.Path(home).mkdir(exist_ok=True)
    output = home / "page.gmi"
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), NO_COLOR="1")
    assert AV98 is not None
    with trio.fail_after(30):
        completed = await trio.run_process(
            [AV98, "--dl", url, "-o", str(output)],
            stdin=(typed + "\n").encode("utf-8") if typed else b"",
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    log = completed.stdout.decode("utf-8", "replace") + completed.stderr.decode("utf-8", "replace")
    assert completed.returncode == 0, log
    assert f"response to {output}" in log, log
    return await trio.Path(output).read_text(encoding="utf-8")


async def test_av98_reads_the_start_page(capsule, tmp_path):
    page = await av98_download(capsule.client.url("/"), tmp_path / "home")
    assert page.startswith("# Sextant — search Geminispace\n")
    assert "=> /search Search" in page


async def test_av98_answers_the_search_prompt(capsule, tmp_path):
    page = await av98_download(capsule.client.url("/search"), tmp_path / "a", typed="lighthouse")
    assert f"{NOTES} results · page 1 of 3" in page
    assert "=> /search/2?lighthouse Next page (2)" in page
    # Non-ASCII input travels as percent-encoded UTF-8 and comes back decoded.
    page = await av98_download(capsule.client.url("/search"), tmp_path / "b", typed="Bücher")
    assert "# Search: “Bücher”" in page
    assert space.BUECHER in page


async def test_av98_follows_our_canonical_redirects(capsule, tmp_path):
    page = await av98_download(capsule.client.url("/about/"), tmp_path / "c")
    assert page.startswith("# About this search capsule\n")
    page = await av98_download(capsule.client.url("/search/1?solar"), tmp_path / "d")
    assert "=> gemini://alpha.example/ Alpha's capsule" in page


async def test_av98_reads_plain_text(capsule, tmp_path):
    robots = await av98_download(capsule.client.url("/robots.txt"), tmp_path / "e")
    assert "Disallow: /search" in robots.splitlines()


def test_av98_is_the_real_client():
    assert AV98 is not None
    version = subprocess.run([AV98, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("AV-98 ")
