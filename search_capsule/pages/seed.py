"""Answers to a visitor who suggested a seed URL."""

from __future__ import annotations

from search_capsule import paths
from search_capsule.pages.lines import document, heading, link, text
from search_capsule.seeds import MAX_PENDING, SeedOutcome, SeedResult

_MESSAGES = {
    SeedOutcome.QUEUED: (
        "Thank you! The URL is queued.",
        "The next crawl will visit it, respecting its robots.txt, and follow its links; "
        "its pages become searchable after the indexer's next run.",
    ),
    SeedOutcome.ALREADY_QUEUED: (
        "This URL is already waiting for the next crawl.",
        "Nothing more to do: it will be visited soon.",
    ),
    SeedOutcome.ALREADY_KNOWN: (
        "The crawler already knows this page.",
        "It is visited again on a schedule that follows how often it changes.",
    ),
    SeedOutcome.INBOX_FULL: (
        "The queue of suggestions is full right now.",
        f"{MAX_PENDING:,} suggestions wait for the next crawl; please try again after it.",
    ),
}


def seed_added(result: SeedResult) -> str:
    title, explanation = _MESSAGES[result.outcome]
    return document(
        [
            heading("Suggest a capsule"),
            "",
            text(title),
            link(result.url),
            text(explanation),
            "",
            link(paths.with_query(paths.CAPSULE, result.url), "What the crawler knows about it"),
            link(paths.ADD_SEED, "Suggest another URL"),
            link(paths.HOME, "Home"),
        ]
    )
