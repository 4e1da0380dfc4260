"""The add-seed form refuses what would aim the crawler at the machine it runs on.

Seeds are only checked and stored: nothing here connects anywhere but to the capsule.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from search_capsule.seeds import validate_seed
from search_capsule.services import CapsuleLimits
from sextant.errors import InvalidURL
from tests.search_capsule.conftest import UNTHROTTLED, start_capsule


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        # every spelling of loopback and private addresses inet_aton accepts
        ("gemini://127.1/", "127.1 (that is 127.0.0.1) is not a public address: a loopback"),
        ("gemini://0x7f.0.0.1/", "(that is 127.0.0.1) is not a public address"),
        ("gemini://0177.0.0.1/", "(that is 127.0.0.1) is not a public address"),
        ("gemini://2130706433/", "(that is 127.0.0.1) is not a public address"),
        ("gemini://10.1/", "(that is 10.0.0.1) is not a public address: a private"),
        ("gemini://192.168.1/", "(that is 192.168.0.1) is not a public address"),
        ("gemini://169.254.43518/", "(that is 169.254.169.254) is not a public address"),
        ("gemini://100.64.0.1/", "carrier-grade NAT"),
        ("gemini://0.0.0.0/", "unspecified"),
        ("gemini://255.255.255.255/", "broadcast"),
        ("gemini://224.0.0.1/", "multicast"),
        ("gemini://192.0.2.1/", "documentation"),
        ("gemini://198.18.0.1/", "benchmarking"),
        ("gemini://[::]/", "unspecified"),
        ("gemini://[fd00::1]/", "unique local"),
        ("gemini://[fe80::1]/", "link-local"),
        ("gemini://[fec0::1]/", "site-local"),
        ("gemini://[ff02::1]/", "multicast"),
        ("gemini://[::ffff:127.0.0.1]/", "IPv4-mapped form of 127.0.0.1"),
        ("gemini://[64:ff9b::a00:1]/", "NAT64 form of 10.0.0.1"),
        ("gemini://[2002:c0a8:101::1]/", "6to4 form of 192.168.1.1"),
        ("gemini://[2001:0:4136:e378:8000:63bf:3f57:fefe]/", "Teredo form of 192.168.1.1"),
        # local names, with or without a root dot
        ("gemini://localhost./", "local name"),
        ("gemini://router.home.arpa/", "local name"),
        ("gemini://nas.lan/", "local name"),
        # names that are no valid host
        ("gemini://-bad-.org/", "starts or ends with a hyphen"),
        ("gemini://bad-.example.org/", "starts or ends with a hyphen"),
        ("gemini://1.2.3.4.5/", "looks like an IP address"),
        ("gemini://256.1.1.1/", "looks like an IP address"),
        ("gemini://example.0x10/", "looks like an IP address"),
        # another port than Gemini's
        ("gemini://example.org:22/", "port 22 is not accepted here; seeds must use port 1965"),
        ("gemini://93.184.216.34:6379/", "port 6379"),
    ],
)
def test_seed_validation_refuses_with_a_reason(typed, reason):
    with pytest.raises(InvalidURL) as refused:
        validate_seed(typed)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("gemini://my_capsule.example.org/", "gemini://my_capsule.example.org/"),
        ("gemini://a-b.example/", "gemini://a-b.example/"),
        ("gemini://1.2.3.4/", "gemini://1.2.3.4/"),
        ("gemini://[2001:4860::8888]/", "gemini://[2001:4860::8888]/"),
        ("gemini://example.org:1965/", "gemini://example.org/"),
    ],
)
def test_seed_validation_accepts_public_capsules(typed, canonical):
    assert validate_seed(typed) == canonical


def test_operator_allowed_ports_are_accepted():
    assert validate_seed("example.org:1966", ports={1965, 1966}) == "gemini://example.org:1966/"
    with pytest.raises(InvalidURL, match="seeds must use port 1965, 1966"):
        validate_seed("example.org:22", ports={1965, 1966})


async def test_the_form_refuses_loopback_spellings_and_other_ports(
    nursery, full_settings, tls_context
):
    running = await start_capsule(nursery, full_settings, tls_context)
    try:
        for typed, reason in [
            ("gemini://127.1/", "not a public address"),
            ("0x7f.0.0.1", "not a public address"),
            ("gemini://169.254.43518/", "link-local"),
            ("gemini://-bad-.org/", "hyphen"),
            ("gemini://example.org:6379/", "port 6379 is not accepted here"),
        ]:
            reply = await running.client.get("/add-seed?" + quote(typed))
            assert reply.status == 20, typed
            assert reason in reply.text, (typed, reply.text)
            assert "queued" not in reply.text
    finally:
        running.app.close()


async def test_the_operator_can_allow_another_port(nursery, full_settings, tls_context):
    limits = CapsuleLimits(
        rate_per_client=UNTHROTTLED.rate_per_client, seed_ports=frozenset({1965, 1966})
    )
    running = await start_capsule(nursery, full_settings, tls_context, limits=limits)
    try:
        reply = await running.client.get("/add-seed?" + quote("gemini://other.example:1966/"))
        assert "Thank you! The URL is queued." in reply.text
    finally:
        running.app.close()
