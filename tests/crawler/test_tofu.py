"""TOFU verdicts for every way a certificate can relate to the pinned one."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta, timezone

import pytest

from crawler.tofu import TofuVerdict, judge
from sextant.tls import certificate_facts, make_self_signed

NOW = datetime(2025, 6, 1, 12, 0, 0)


def facts_for(host, *, not_after):
    cert_pem, _ = make_self_signed(
        [host], not_before=not_after - timedelta(days=365), not_after=not_after
    )
    return certificate_facts(ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii")))


OLD = facts_for("capsule.test", not_after=NOW + timedelta(days=30))
NEW = facts_for("capsule.test", not_after=NOW + timedelta(days=400))


@pytest.mark.parametrize(
    ("known_fingerprint", "known_not_after", "kind", "is_event"),
    [
        (None, None, "first-seen", True),
        (OLD.fingerprint_sha256, OLD.not_after, "changed-before-expiry", True),
        (NEW.fingerprint_sha256, NEW.not_after, "same", False),
        (NEW.fingerprint_sha256.upper(), NEW.not_after, "same", False),
        (OLD.fingerprint_sha256, NOW - timedelta(seconds=1), "changed-after-expiry", True),
        (OLD.fingerprint_sha256, NOW, "changed-before-expiry", True),  # expires at, not before
        # Unknown expiry: no proof the old one ran out, so the cautious reading.
        (OLD.fingerprint_sha256, None, "changed-before-expiry", True),
    ],
)
def test_verdict_table(known_fingerprint, known_not_after, kind, is_event):
    verdict = judge(known_fingerprint, known_not_after, NEW, NOW)
    assert verdict.kind == kind
    assert verdict.is_event is is_event
    assert verdict.is_suspicious is (kind == "changed-before-expiry")
    assert verdict.fingerprint == NEW.fingerprint_sha256
    expected_previous = None if known_fingerprint is None else known_fingerprint.lower()
    assert verdict.previous_fingerprint == expected_previous


def test_aware_datetimes_are_read_as_utc():
    expiry = (NOW - timedelta(hours=1)).replace(tzinfo=UTC)
    # 12:00 at UTC+2 is 10:00 UTC, before the 11:00 UTC expiry: still a suspicious change.
    early = NOW.replace(tzinfo=timezone(timedelta(hours=2)))
    assert judge(OLD.fingerprint_sha256, expiry, NEW, early).kind == "changed-before-expiry"
    assert judge(OLD.fingerprint_sha256, expiry, NEW, NOW).kind == "changed-after-expiry"


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown TOFU verdict"):
        TofuVerdict("maybe", "00")
