"""A small, known Geminispace written straight into a store, for the capsule's tests.

Four capsules: two linked to each other, one with an internationalized name, and one the
crawler never reached. Every figure the pages show can be worked out from this file.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from sextant.store.models import (
    Capsule,
    CertificateEvent,
    Link,
    Page,
    Run,
    SeedRequest,
    UserRobots,
)

NOW = datetime(2026, 7, 1, 12, 0, 0)
ALPHA = "gemini://alpha.example/"
ALPHA_ABOUT = "gemini://alpha.example/about.gmi"
ALPHA_LOG = "gemini://alpha.example/log/"
ALPHA_PRIVATE = "gemini://alpha.example/private/notes.gmi"
BETA = "gemini://beta.example:1966/"
BETA_FEED = "gemini://beta.example:1966/atom.xml"
BUECHER = "gemini://xn--bcher-kva.example/"
ROBOTS = "User-agent: indexer\nDisallow: /private/\n\nUser-agent: *\nCrawl-delay: 3\n"
FINGERPRINT = "ab" * 32
OLD_FINGERPRINT = "cd" * 32


def capsule(host: str, port: int = 1965, display: str | None = None, **facts) -> Capsule:
    return Capsule(
        host=host,
        port=port,
        display_host=display or host,
        first_seen_at=facts.pop("first_seen_at", NOW - timedelta(days=10)),
        **facts,
    )


def page(url: str, owner: Capsule, **facts) -> Page:
    defaults = {
        "scope": owner.host if owner.port == 1965 else f"{owner.host}:{owner.port}",
        "state": "ok",
        "status": 20,
        "mime": "text/gemini",
        "charset": "utf-8",
        "lang": "en",
        "size": 2048,
        "discovered_at": NOW - timedelta(days=5),
        "updated_at": NOW - timedelta(days=5),
        "fetched_at": NOW - timedelta(days=1),
    }
    defaults.update(facts)
    return Page(url=url, capsule=owner, **defaults)


def link(source: Page, target: Page | None, url: str, label: str, *, cross: bool) -> Link:
    scheme = url.split(":", 1)[0]
    return Link(
        source_id=source.id,
        target_id=target.id if target else None,
        target_url=url,
        target_scheme=scheme,
        label=label,
        cross_capsule=cross,
        first_seen_at=NOW - timedelta(days=4),
    )


def populate(engine: Engine) -> None:
    with Session(engine) as session:
        alpha = capsule(
            "alpha.example",
            first_seen_at=NOW - timedelta(days=30),
            last_attempt_at=NOW - timedelta(hours=2),
            last_success_at=NOW - timedelta(hours=2),
            robots_txt=ROBOTS,
            robots_status=20,
            robots_fetched_at=NOW - timedelta(hours=3),
            tls_fingerprint=FINGERPRINT,
            tls_not_before=NOW - timedelta(days=100),
            tls_not_after=NOW + timedelta(days=900),
            tls_self_signed=True,
            tls_key_type="EC P-256",
            tls_version="TLSv1.3",
            tls_names="alpha.example",
            tls_first_seen_at=NOW - timedelta(days=20),
        )
        beta = capsule(
            "beta.example",
            1966,
            first_seen_at=NOW - timedelta(days=2),
            last_success_at=NOW - timedelta(hours=5),
            robots_status=51,
            tls_fingerprint="ef" * 32,
            tls_not_after=NOW - timedelta(days=3),  # expired
            tls_self_signed=False,
            tls_key_type="RSA 2048",
            tls_version="TLSv1.2",
        )
        buecher = capsule(
            "xn--bcher-kva.example",
            display="bücher.example",
            first_seen_at=NOW - timedelta(days=1),
            last_success_at=NOW - timedelta(hours=1),
        )
        gamma = capsule("gamma.example", consecutive_failures=4)
        session.add_all([alpha, beta, buecher, gamma])
        session.flush()
        session.add_all(
            [
                UserRobots(
                    capsule_id=alpha.id,
                    user_name="ann",
                    status=20,
                    text="User-agent: *\nDisallow: /drafts/\nCrawl-delay: 5\n",
                    fetched_at=NOW - timedelta(hours=1),
                ),
                UserRobots(
                    capsule_id=alpha.id,
                    user_name="bob",
                    status=51,
                    text=None,
                    fetched_at=NOW - timedelta(hours=1),
                ),
            ]
        )

        alpha_home = page(
            ALPHA,
            alpha,
            title="Alpha's capsule",
            size=1500,
            body="# Alpha's capsule\nWelcome! Solar panels on the roof power this small "
            "server.\n=> about.gmi About\n=> gemini://beta.example:1966/ my friend beta\n",
        )
        alpha_about = page(
            ALPHA_ABOUT,
            alpha,
            title="About alpha",
            size=900,
            body="# About alpha\nA hobbyist writes here about amateur radio and gardening.\n",
        )
        alpha_log = page(
            ALPHA_LOG,
            alpha,
            title="Alpha's gemlog",
            feed_kind="gemsub",
            discovered_at=NOW - timedelta(days=1),
            body="# Alpha's gemlog\n=> 2026-06-01-radio.gmi 2026-06-01 Antenna repairs\n",
        )
        alpha_private = page(ALPHA_PRIVATE, alpha, state="disallowed", status=None, fetched_at=None)
        beta_home = page(
            BETA,
            beta,
            title="Beta station",
            lang="fr",
            size=5000,
            body="# Beta station\nUne station météo solaire, avec des relevés quotidiens.\n"
            "=> gemini://alpha.example/ Alpha, a fine capsule\n",
        )
        beta_feed = page(
            BETA_FEED,
            beta,
            title="Beta news",
            mime="application/atom+xml",
            feed_kind="atom",
            discovered_at=NOW - timedelta(hours=12),
            body='<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"></feed>',
        )
        buecher_home = page(
            BUECHER,
            buecher,
            title="Bücherstube",
            lang="de",
            body="# Bücherstube\nAlte Bücher über Gärten, Kartoffeln und Leuchttürme.\n",
        )
        gamma_home = page(
            "gemini://gamma.example/",
            gamma,
            state="error",
            status=None,
            error_kind="connect-failed",
            fetched_at=NOW - timedelta(hours=6),
        )
        gone = page("gemini://alpha.example/old.gmi", alpha, state="gone", status=51, title=None)
        session.add_all(
            [
                alpha_home,
                alpha_about,
                alpha_log,
                alpha_private,
                beta_home,
                beta_feed,
                buecher_home,
                gamma_home,
                gone,
            ]
        )
        session.flush()
        session.add_all(
            [
                link(beta_home, alpha_home, ALPHA, "Alpha, a fine capsule", cross=True),
                link(beta_home, alpha_home, ALPHA, "again", cross=True),  # once per page
                link(beta_feed, alpha_home, ALPHA, "", cross=True),
                link(buecher_home, alpha_home, ALPHA, "Alpha auf Englisch", cross=True),
                link(alpha_about, alpha_home, ALPHA, "home", cross=False),
                link(alpha_home, alpha_about, ALPHA_ABOUT, "about", cross=False),
                link(alpha_home, beta_home, BETA, "my friend beta", cross=True),
                link(alpha_home, None, "https://example.org/", "the web", cross=True),
                link(alpha_home, None, "gopher://hole.example/", "a gopher hole", cross=True),
            ]
        )
        session.add_all(
            [
                CertificateEvent(
                    capsule_id=alpha.id,
                    seen_at=NOW - timedelta(days=20),
                    kind="first-seen",
                    new_fingerprint=OLD_FINGERPRINT,
                ),
                CertificateEvent(
                    capsule_id=alpha.id,
                    seen_at=NOW - timedelta(days=7),
                    kind="changed-before-expiry",
                    old_fingerprint=OLD_FINGERPRINT,
                    new_fingerprint=FINGERPRINT,
                    new_not_after=NOW + timedelta(days=900),
                ),
                Run(
                    kind="crawl",
                    started_at=NOW - timedelta(hours=3),
                    finished_at=NOW - timedelta(hours=2),
                    stats=json.dumps({"pages": 9}),
                ),
                Run(kind="index", started_at=NOW - timedelta(hours=1), finished_at=NOW),
                SeedRequest(
                    url="gemini://queued.example/",
                    source="capsule",
                    requested_at=NOW - timedelta(hours=1),
                ),
            ]
        )
        session.commit()


NOTES_HOST = "notes.example"
NOTES_WORD = "lighthouse"


def add_notes(engine: Engine, count: int) -> list[str]:
    """``count`` pages on one more capsule, all matching :data:`NOTES_WORD`, for paging."""
    with Session(engine) as session:
        notes = capsule(NOTES_HOST, last_success_at=NOW - timedelta(hours=1))
        session.add(notes)
        urls = []
        for n in range(count):
            url = f"gemini://{NOTES_HOST}/{n:03d}.gmi"
            urls.append(url)
            session.add(
                page(
                    url,
                    notes,
                    title=f"Lighthouse note {n}",
                    body=f"# Lighthouse note {n}\nThe {NOTES_WORD} keeper wrote entry {n}.\n",
                )
            )
        session.commit()
    return urls
