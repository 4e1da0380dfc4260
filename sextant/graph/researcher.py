"""What robots.txt lets a statistical study of Geminispace look at.

The companion spec names the virtual agent ``researcher`` for "statistical study of
Geminispace": the census and the link-graph statistics and exports answer to it, and, as
everywhere (see :mod:`sextant.robots`), to ``sextant`` and ``*`` too; every group among
them must allow a page for it to be studied.

Judged only from the robots.txt files the store keeps (the capsule's own and pubnix users'),
never by asking the network: however old, a stored file is its author's last known wish.
A capsule whose file is unknown or unreadable has no rules to obey.

A capsule where some group addressing us closes everything (``Disallow: /`` with no Allow)
is left out whole: its own facts (its certificate, its being counted) and all its pages.
Elsewhere each page is judged by its path, so an Allow line still opens what it opens.

Cost: each stored file is parsed once per call, and only the pages of capsules that have
rules for us are read, by id and URL; most capsules have none and cost one row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy
from sqlalchemy import select
from sqlalchemy.orm import Session

from sextant.graph.rows import CHUNK, AnySelect, chunks
from sextant.robots import (
    RESEARCHER_AGENTS,
    RobotsPolicy,
    allowed_in_user_directory,
    parse_robots_response,
    pubnix_user,
)
from sextant.store.batches import IN_BATCH, in_batches
from sextant.store.models import Capsule, Page, UserRobots

#: Ids per ``IN (...)`` list (the store's one bound, sextant/store/batches.py).
ID_BATCH = IN_BATCH
#: robots.txt files held at once while reading them (each may be up to MAX_ROBOTS_CHARS).
FILE_BATCH = 100


@dataclass(frozen=True, slots=True, eq=False)
class LeftOut:
    """What a study leaves out at its authors' request; both arrays int64, ascending."""

    capsule_ids: numpy.ndarray  # capsules closed as a whole
    page_ids: numpy.ndarray  # every page left out, those of closed capsules included

    @property
    def capsules(self) -> int:
        return int(self.capsule_ids.size)

    @property
    def pages(self) -> int:
        return int(self.page_ids.size)

    @classmethod
    def nothing(cls) -> LeftOut:
        empty = numpy.empty(0, dtype=numpy.int64)
        return cls(empty, empty)


def left_out(session: Session) -> LeftOut:
    """Which capsules and pages in the store robots.txt keeps from the researcher."""
    closed: list[int] = []
    policies: dict[int, RobotsPolicy] = {}
    capsules = select(Capsule.id, Capsule.robots_status, Capsule.robots_txt).where(
        Capsule.robots_status.is_not(None)
    )
    for capsule_id, status, text in _rows(session, capsules, FILE_BATCH):
        policy = _policy(status, text)
        if policy is None:
            continue
        if policy.closed(RESEARCHER_AGENTS):
            closed.append(capsule_id)
        else:
            policies[capsule_id] = policy
    closed_set = set(closed)
    users: dict[tuple[int, str], RobotsPolicy] = {}
    files = select(UserRobots.capsule_id, UserRobots.user_name, UserRobots.status, UserRobots.text)
    for capsule_id, user, status, text in _rows(
        session, files.where(UserRobots.status.is_not(None)), FILE_BATCH
    ):
        policy = None if capsule_id in closed_set else _policy(status, text)
        if policy is not None:
            users[(capsule_id, user)] = policy

    pages: list[int] = []
    judged = sorted(set(policies) | {capsule_id for capsule_id, _ in users})
    for batch in batches(judged):
        rows = select(Page.id, Page.capsule_id, Page.url).where(Page.capsule_id.in_(batch))
        for page_id, capsule_id, url in _rows(session, rows):
            path = _path_of(url)
            policy = policies.get(capsule_id)
            if policy is not None and not policy.allowed(path, RESEARCHER_AGENTS):
                pages.append(page_id)
                continue
            user = pubnix_user(path)
            own = users.get((capsule_id, user)) if user is not None else None
            if (
                own is not None
                and user is not None
                and not allowed_in_user_directory(own, user, path, RESEARCHER_AGENTS)
            ):
                pages.append(page_id)
    for batch in batches(closed):
        pages.extend(
            page_id
            for (page_id,) in _rows(session, select(Page.id).where(Page.capsule_id.in_(batch)))
        )
    return LeftOut(
        capsule_ids=numpy.unique(numpy.asarray(closed, dtype=numpy.int64)),
        page_ids=numpy.unique(numpy.asarray(pages, dtype=numpy.int64)),
    )


def batches(ids: Sequence[int] | numpy.ndarray) -> Iterator[list[int]]:
    """``ids`` in lists short enough for one ``IN (...)`` each, as Python ints (numpy's
    int64 does not bind as a parameter)."""
    values: list[int] = ids.tolist() if isinstance(ids, numpy.ndarray) else list(ids)
    for batch in in_batches(values, ID_BATCH):
        yield list(batch)


def _policy(status: int, text: str | None) -> RobotsPolicy | None:
    """The stored file's policy when it has any rule for us; None when nothing applies."""
    policy = parse_robots_response(status, text)
    if policy is None or not policy.rules_for(RESEARCHER_AGENTS):
        return None
    return policy


def _path_of(url: str) -> str:
    """Path and query of a stored URL. Stored URLs are canonical (``scheme://authority/…``,
    no fragment), so a split is enough, and ten times cheaper than parsing them again."""
    rest = url.partition("://")[2]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    path = rest[cut:]
    return path if path.startswith("/") else "/" + path


def _rows(session: Session, statement: AnySelect, size: int = CHUNK) -> Iterator[Any]:
    for chunk in chunks(session, statement, size):
        yield from chunk
