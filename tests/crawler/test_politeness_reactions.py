"""The reactions of a capsule's politeness state (rules 3-6), without a crawl around them.

The crawl tests show the rule end to end; these pin each reaction's answer at its bounds,
so the rule can be read and checked in crawler/politeness.py alone.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio

from crawler.politeness import HostSlot, PolitenessRules
from sextant.store import utcnow


def slot(rules: PolitenessRules | None = None) -> HostSlot:
    return HostSlot(1, "capsule.test", 1965, base_delay=1.0, rules=rules or PolitenessRules())


def test_connection_failures_park_the_capsule_only_from_the_threshold_on():
    capsule = slot(PolitenessRules(park_after=3, park_base=100.0))
    assert capsule.on_connect_failure() is None
    assert capsule.on_connect_failure() is None
    assert capsule.deferred_until is None
    before = utcnow()
    parked = capsule.on_connect_failure()
    assert parked is not None
    assert capsule.deferred_until == parked
    assert before + timedelta(seconds=99) < parked <= utcnow() + timedelta(seconds=100)
    # Each further failure doubles the parking.
    longer = capsule.on_connect_failure()
    assert longer is not None
    assert longer - parked > timedelta(seconds=90)
    assert capsule.failure_pause == capsule.rules.failure_pause(capsule.delay, 4)
    # An answer ends the streak: the next failure starts counting again.
    capsule.on_answer(page=False)
    assert capsule.failures == 0
    assert capsule.on_connect_failure() is None


def test_a_robots_answer_keeps_the_streak_of_44s_a_page_answer_ends_it():
    capsule = slot()
    capsule.on_slow_down(10, "5", attempts=1)
    capsule.on_answer(page=False)
    assert capsule.slow_down_pages == {10}
    capsule.on_answer(page=True)
    assert capsule.slow_down_pages == set()


def test_only_several_different_pages_answering_44_defer_the_capsule():
    capsule = slot(PolitenessRules(slow_downs_before_deferral=3, slow_down_deferral=3600.0))
    first = capsule.on_slow_down(10, "5", attempts=1)
    assert (first.wait, first.backoff, first.defer_for) == (5.0, 5.0, None)
    # The same page again is one page, however often it says 44; its own wait doubles.
    again = capsule.on_slow_down(10, "5", attempts=2)
    assert (again.backoff, again.defer_for) == (10.0, None)
    assert capsule.on_slow_down(11, "5", attempts=1).defer_for is None
    third = capsule.on_slow_down(12, "5", attempts=1)
    assert third.defer_for == 3600.0
    assert capsule.slow_down_pages == set()  # the deferral starts a new count


def test_a_44_asking_more_than_can_be_held_defers_for_what_it_asks():
    capsule = slot(PolitenessRules(max_hold=60.0, slow_down_cap=600.0))
    assert capsule.on_slow_down(10, "61", attempts=1).defer_for == 61.0
    # Never less than the capsule's delay, never more than the cap.
    assert capsule.on_slow_down(11, "0", attempts=1).wait == capsule.delay
    assert capsule.on_slow_down(12, "100000", attempts=1).wait == 600.0


def test_a_deferral_is_never_shortened():
    capsule = slot()
    later = utcnow() + timedelta(hours=2)
    assert capsule.defer(later) == later
    assert capsule.defer(later - timedelta(hours=1)) == later
    assert capsule.deferred_until == later


def test_an_unreadable_robots_txt_keeps_a_parking_already_decided():
    capsule = slot()
    parked = utcnow() + timedelta(hours=1)
    capsule.defer(parked)
    assert capsule.defer_unreadable_robots(10_000.0) == parked
    fresh = slot(PolitenessRules(retry_base=300.0))
    until = fresh.defer_unreadable_robots(None)  # no wait asked: rule 4's first back-off
    assert utcnow() + timedelta(seconds=290) < until <= utcnow() + timedelta(seconds=300)


async def test_only_a_wait_beyond_max_hold_sends_the_rows_back(autojump_clock):
    capsule = slot(PolitenessRules(max_hold=60.0))
    capsule.next_allowed = trio.current_time() + 60.0
    assert capsule.too_long_to_hold() is None
    capsule.next_allowed = trio.current_time() + 61.0
    until = capsule.too_long_to_hold()
    assert until is not None
    assert until == pytest.approx(utcnow() + timedelta(seconds=61), abs=timedelta(seconds=5))


async def test_spacing_from_the_store_defers_a_capsule_asked_too_recently(autojump_clock):
    capsule = slot(PolitenessRules(max_hold=60.0))
    capsule.raise_crawl_delay(120.0)
    now = utcnow()
    capsule.space_from(now - timedelta(seconds=100), now)
    assert capsule.next_allowed == pytest.approx(trio.current_time() + 20.0)
    assert capsule.deferred_until is None  # 20 s is held in memory
    capsule.raise_crawl_delay(200.0)
    capsule.space_from(now - timedelta(seconds=100), now)
    assert capsule.deferred_until == now + timedelta(seconds=100)
