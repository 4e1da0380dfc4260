"""A capsule that writes terminal commands into everything it controls, and a friendly one.

Its title, body, link labels, robots.txt, charset and certificate names carry what a
terminal obeys rather than shows: ESC[2J (clear the screen), an OSC 8 hyperlink whose
target is not what it shows, BEL, the 8-bit CSI U+009B and the bidi override U+202E (with
an isolate pair). The tests check that every output built from this store is free of them:
the CLI commands and the search capsule's pages. A store of its own, so the ranking and
statistics tests of the shared fixture spaces see none of it.
"""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.search_capsule.space import NOW, capsule, link, page

WORD = "sourdough"
HOSTILE = (
    "clear\x1b[2J osc\x1b]8;;http://x.example/\x1b\\click\x1b]8;;\x1b\\ bell\x07 "
    "csi\x9b31m flip\u202eevil\u2066isolated\u2069 tail"
)
EVIL = "gemini://evil.example/"
EVIL_HOST = "evil.example"
FRIEND = "gemini://friend.example/"
ROBOTS = f"User-agent: *\nDisallow: /private/\n# {HOSTILE}\nCrawl-delay: 2\n"

# What must never reach a terminal or a Gemini client from the store: C0 controls but
# newline (tab would be fine in a block, but no output here has one of its own), DEL, C1
# controls, and the bidi embeddings, overrides and isolates.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def unsafe_characters(text: str) -> list[str]:
    """The offending characters, as code points, for a readable assertion message."""
    return [f"U+{ord(c):04X}" for c in UNSAFE.findall(text)]


def populate(engine: Engine) -> None:
    with Session(engine) as session:
        evil = capsule(
            EVIL_HOST,
            last_success_at=NOW - timedelta(hours=1),
            robots_txt=ROBOTS,
            robots_status=20,
            robots_fetched_at=NOW - timedelta(hours=2),
            tls_fingerprint="ee" * 32,
            tls_not_after=NOW + timedelta(days=300),
            tls_self_signed=True,
            tls_key_type="EC P-256",
            tls_version="TLSv1.3",
            tls_names=f"evil.example {HOSTILE}",
        )
        friend = capsule("friend.example", last_success_at=NOW - timedelta(hours=1))
        session.add_all([evil, friend])
        session.flush()
        evil_home = page(
            EVIL,
            evil,
            title=f"Sourdough {HOSTILE}",
            charset=f"utf-8\u202e{HOSTILE[:12]}",
            feed_kind="gemsub",
            discovered_at=NOW - timedelta(hours=3),
            body=f"# Sourdough\nMy {WORD} starter: {HOSTILE} and more {WORD}.\n"
            f"=> {FRIEND} {HOSTILE}\n",
        )
        friend_home = page(
            FRIEND,
            friend,
            title="Friendly bakery",
            body=f"# Friendly bakery\nWe bake bread.\n=> {EVIL} {HOSTILE}\n",
        )
        session.add_all([evil_home, friend_home])
        session.flush()
        session.add_all(
            [
                link(evil_home, friend_home, FRIEND, HOSTILE, cross=True),
                link(friend_home, evil_home, EVIL, HOSTILE, cross=True),
            ]
        )
        session.commit()
