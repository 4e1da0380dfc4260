"""The public-address rule, on the pure functions only: nothing here opens a socket."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from sextant.addresses import classify, numeric_host, refusal

NUMERIC_FORMS = [
    # every spelling of loopback the C library accepts
    ("127.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("0x7f.0.0.1", "127.0.0.1"),
    ("0X7F.1", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("0177.1", "127.0.0.1"),
    ("00000177.0.0.01", "127.0.0.1"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("017700000001", "127.0.0.1"),
    ("127.0x1", "127.0.0.1"),
    # private and link-local, shortened
    ("10.1", "10.0.0.1"),
    ("10.0x10203", "10.1.2.3"),
    ("192.168.1", "192.168.0.1"),
    ("169.254.43518", "169.254.169.254"),
    ("0xa9fea9fe", "169.254.169.254"),
    ("0", "0.0.0.0"),
    ("0x0.0.0", "0.0.0.0"),
    ("00000000000000000000177.1", "127.0.0.1"),
    ("0x000000000007f.1", "127.0.0.1"),
    ("4294967295", "255.255.255.255"),
    ("1.2.3.4", "1.2.3.4"),
    # IPv6, bracketed or not
    ("::1", "::1"),
    ("[::1]", "::1"),
    ("::ffff:127.0.0.1", "::ffff:7f00:1"),
]

NOT_NUMERIC = [
    "example.org",
    "localhost",
    "1.2.3.4.5",  # five parts
    "256.1.1.1",  # a leading part over 255
    "1.2.3.256",
    "1.2.65536",  # the last part over two bytes
    "1.16777216",
    "4294967296",  # over 32 bits
    "08.1.1.1",  # 8 in an octal part
    "0x1g.1",
    "1..2",
    "0x",  # a bare 0x is no number (glibc 2.36, musl)
    "0x.0x.0x.0x",
    "1.0x",
    "",
    "1.2.3.4.",  # the URL parser drops a root dot first; inet_aton refuses it
    "١٢٧.0.0.1",  # Arabic-Indic digits: str.isdigit() says yes, inet_aton says no
    "[zz]",
    "9" * 300,
]


@pytest.mark.parametrize(("host", "address"), NUMERIC_FORMS)
def test_numeric_host_reads_what_the_resolver_reads(host, address):
    assert numeric_host(host) == ipaddress.ip_address(address)
    if ":" not in host:
        # The C library's own reading (a pure function: no packet is sent).
        assert socket.inet_aton(host) == ipaddress.IPv4Address(address).packed


@pytest.mark.parametrize("host", NOT_NUMERIC)
def test_numeric_host_refuses_what_the_resolver_would_look_up(host):
    assert numeric_host(host) is None
    if host.isascii() and ":" not in host and "[" not in host and len(host) < 100:
        with pytest.raises(OSError, match="illegal IP address"):
            socket.inet_aton(host)


REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.0.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.255", "carrier-grade NAT"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "this network"),
    ("255.255.255.255", "broadcast"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("192.0.0.8", "IETF protocol"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("192.88.99.1", "6to4 relay"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("::7f00:1", "reserved"),  # IPv4-compatible (deprecated)
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("febf::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("100::1", "discard-only"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2001:10::1", "ORCHID"),
    ("5f00::1", "segment-routing"),
    # IPv6 forms that deliver to a private IPv4 address
    ("::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1, a loopback"),
    ("::ffff:10.0.0.1", "IPv4-mapped form of 10.0.0.1, a private"),
    ("::ffff:169.254.169.254", "IPv4-mapped form of 169.254.169.254, a link-local"),
    ("64:ff9b::7f00:1", "NAT64 form of 127.0.0.1"),
    ("64:ff9b::a00:1", "NAT64 form of 10.0.0.1"),
    ("2002:7f00:1::1", "6to4 form of 127.0.0.1"),
    ("2002:c0a8:101::1", "6to4 form of 192.168.1.1"),
    # Teredo: server 65.54.227.120 (public), client 192.168.1.1 obfuscated
    ("2001:0:4136:e378:8000:63bf:3f57:fefe", "Teredo form of 192.168.1.1"),
    # Teredo with a private server part
    ("2001:0:a00:1:8000:63bf:a247:27dd", "Teredo form of 10.0.0.1"),
    ("not an address", "not an IP address"),
    ("127.1", "not an IP address"),  # only literals: numeric_host reads the short forms
]

PUBLIC = [
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",  # just below CGNAT
    "100.128.0.0",  # just above
    "172.15.255.255",
    "172.32.0.0",
    "169.253.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "2001:4860:4860::8888",
    "2a00:1450:4001::1",
    "::ffff:93.184.216.34",
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
    "2001:0:4136:e378:8000:63bf:a247:27dd",  # Teredo of 93.184.216.34 via a public server
]


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_non_public_addresses_are_refused_with_the_reason(address, reason):
    why = refusal(address)
    assert why is not None
    assert reason in why


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address):
    assert refusal(address) is None


@pytest.mark.parametrize(("host", "address"), NUMERIC_FORMS)
def test_every_numeric_spelling_of_a_private_address_is_judged_by_its_value(host, address):
    parsed = numeric_host(host)
    assert parsed is not None
    if address != "1.2.3.4":
        assert classify(parsed) is not None
    assert classify(parsed) == refusal(address)
