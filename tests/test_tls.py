"""Certificates and contexts, checked by parsing real certificates and doing real handshakes."""

from __future__ import annotations

import hashlib
import ssl
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sextant.tls import (
    certificate_facts,
    client_context,
    ensure_certificate,
    make_self_signed,
    server_context,
    server_context_from_pem,
)


def der_of(cert_pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))


@pytest.mark.parametrize(
    ("key_type", "described"), [("ec", "EC P-256"), ("rsa", "RSA 2048"), ("ed25519", "Ed25519")]
)
def test_self_signed_certificate_facts(key_type, described):
    cert_pem, key_pem = make_self_signed(["alpha.test", "www.alpha.test"], key_type=key_type)
    der = der_of(cert_pem)
    facts = certificate_facts(der)
    assert facts.fingerprint_sha256 == hashlib.sha256(der).hexdigest()
    assert facts.key_type == described
    assert facts.self_signed is True
    assert facts.subject_cn == "alpha.test"
    assert facts.names == ("alpha.test", "www.alpha.test")
    now = datetime.now(UTC).replace(tzinfo=None)
    assert facts.not_before.tzinfo is None
    assert facts.is_valid_at(now)
    assert facts.not_after - now > timedelta(days=365)
    serialization.load_pem_private_key(key_pem, password=None)  # the key is usable PEM


def test_ip_addresses_become_ip_sans_and_idn_becomes_punycode():
    cert_pem, _ = make_self_signed(["127.0.0.2", "::1", "bücher.test"])
    facts = certificate_facts(der_of(cert_pem))
    assert facts.names == ("bücher.test".encode("idna").decode(), "127.0.0.2", "::1")
    assert facts.subject_cn == "127.0.0.2"
    cert = x509.load_pem_x509_certificate(cert_pem)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.2", "::1"]


def test_expired_certificate_keeps_the_requested_dates():
    start = datetime(2020, 1, 1, 12, 0, 0)
    end = datetime(2021, 1, 1, 12, 0, 0, tzinfo=UTC)
    facts = certificate_facts(
        der_of(make_self_signed(["old.test"], not_before=start, not_after=end)[0])
    )
    assert facts.not_before == start
    assert facts.not_after == end.replace(tzinfo=None)
    assert not facts.is_valid_at(datetime(2024, 1, 1))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key_type": "dsa"},
        {"not_before": datetime(2022, 1, 1), "not_after": datetime(2021, 1, 1)},
    ],
)
def test_impossible_certificate_requests_are_refused(kwargs):
    with pytest.raises(ValueError, match=r"key type|not_after"):
        make_self_signed(["x.test"], **kwargs)
    with pytest.raises(ValueError, match="at least one"):
        make_self_signed([])


def _certificate(subject: str, issuer: str, signing_key, public_key) -> bytes:
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .sign(signing_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def test_certificates_not_signed_by_their_own_key_are_not_self_signed():
    own, other = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    by_ca = certificate_facts(_certificate("a.test", "Some CA", other, own.public_key()))
    assert by_ca.self_signed is False
    # Same issuer and subject text, but the signature is someone else's: still not self-signed.
    forged = certificate_facts(_certificate("a.test", "a.test", other, own.public_key()))
    assert forged.self_signed is False
    assert forged.names == ()
    genuine = certificate_facts(_certificate("a.test", "a.test", own, own.public_key()))
    assert genuine.self_signed is True


def test_garbage_is_not_a_certificate():
    with pytest.raises(ValueError):  # noqa: PT011 - cryptography's message varies by version
        certificate_facts(b"\x30\x03\x02\x01\x00 not a certificate")


def test_ensure_certificate_creates_once_and_reuses(tmp_path):
    cert_file, key_file = ensure_certificate(tmp_path / "certs", "Capsule.Test")
    assert cert_file.name == "capsule.test.crt"
    assert key_file.stat().st_mode & 0o777 == 0o600
    first = cert_file.read_bytes()
    again = ensure_certificate(tmp_path / "certs", "capsule.test")
    assert again == (cert_file, key_file)
    assert cert_file.read_bytes() == first
    assert certificate_facts(der_of(first)).names == ("capsule.test",)
    server_context(cert_file, key_file)  # the pair loads, so key and cert match


def test_ensure_certificate_replaces_an_expired_one(tmp_path):
    cert_pem, key_pem = make_self_signed(
        ["capsule.test"], not_before=datetime(2019, 1, 1), not_after=datetime(2020, 1, 1)
    )
    (tmp_path / "capsule.test.crt").write_bytes(cert_pem)
    (tmp_path / "capsule.test.key").write_bytes(key_pem)
    cert_file, _ = ensure_certificate(tmp_path, "capsule.test")
    facts = certificate_facts(der_of(cert_file.read_bytes()))
    assert facts.is_valid_at(datetime.now(UTC).replace(tzinfo=None))


def test_contexts_require_tls_1_2_and_the_client_trusts_on_first_use():
    server = server_context_from_pem(*make_self_signed(["x.test"]))
    client = client_context()
    assert server.minimum_version == client.minimum_version == ssl.TLSVersion.TLSv1_2
    assert client.verify_mode == ssl.CERT_NONE
    assert client.check_hostname is False


async def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, sni: str):
    """Connect over loopback and return (peer certificate DER, negotiated TLS version)."""

    async def handler(stream: trio.SSLStream) -> None:
        try:
            await stream.do_handshake()
        except trio.BrokenResourceError:
            return  # the refused handshake; the client side reports it
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_ssl_over_tcp, handler, 0, server_ctx, host="127.0.0.1")
        )
        port = listeners[0].transport_listener.socket.getsockname()[1]
        try:
            tcp = await trio.open_tcp_stream("127.0.0.1", port)
            stream = trio.SSLStream(tcp, client_ctx, server_hostname=sni)
            try:
                await stream.do_handshake()
                der = stream.getpeercert(binary_form=True)
                version = stream.version()
            finally:
                await trio.aclose_forcefully(stream)
        finally:
            nursery.cancel_scope.cancel()
    return der, version


@pytest.mark.parametrize("key_type", ["ec", "rsa", "ed25519"])
async def test_handshake_with_each_key_type_and_an_expired_certificate(key_type):
    # An expired certificate must still complete the handshake: TOFU needs to see it to judge it.
    cert_pem, key_pem = make_self_signed(
        ["alpha.test"],
        key_type=key_type,
        not_before=datetime(2019, 1, 1),
        not_after=datetime(2020, 1, 1),
    )
    der, version = await _handshake(
        server_context_from_pem(cert_pem, key_pem), client_context(), "alpha.test"
    )
    assert der == der_of(cert_pem)
    assert version == "TLSv1.3"


async def test_tls_1_2_only_client_is_served():
    client = client_context()
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    cert_pem, key_pem = make_self_signed(["alpha.test"])
    _, version = await _handshake(server_context_from_pem(cert_pem, key_pem), client, "alpha.test")
    assert version == "TLSv1.2"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
async def test_tls_1_1_client_is_refused():
    def old_client() -> ssl.SSLContext:
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE
        client.set_ciphers("DEFAULT:@SECLEVEL=0")
        client.minimum_version = ssl.TLSVersion.TLSv1
        client.maximum_version = ssl.TLSVersion.TLSv1_1
        return client

    pems = make_self_signed(["x.test"], key_type="rsa")
    # Control: a server that allows TLS 1.1 talks to this client, so the refusal below is ours.
    lenient = server_context_from_pem(*pems)
    lenient.set_ciphers("DEFAULT:@SECLEVEL=0")
    lenient.minimum_version = ssl.TLSVersion.TLSv1
    _, version = await _handshake(lenient, old_client(), "x.test")
    assert version == "TLSv1.1"
    with pytest.RaisesGroup(trio.BrokenResourceError):
        await _handshake(server_context_from_pem(*pems), old_client(), "x.test")
