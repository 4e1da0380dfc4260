"""The politeness scheduler and rules, on trio's virtual clock (exact and instant).

End-to-end spacing over real TLS is checked in test_crawl.py; here every rule is pinned
down with exact times.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import trio

from crawler.politeness import PolitenessRules
from crawler.scheduler import Scheduler


@dataclass(frozen=True)
class Item:
    capsule_id: int
    name: str


async def run_workers(scheduler, workers, *, work=0.0, log=None, until_empty=True):
    """Workers that take, 'fetch' for ``work`` seconds, release; log (time, name)."""
    log = [] if log is None else log

    async def worker():
        while True:
            taken = await scheduler.take()
            if taken is None:
                return
            slot, item = taken
            log.append((trio.current_time(), item.name))
            await trio.sleep(work)
            scheduler.release(slot)
            if until_empty and scheduler.queued == 0 and scheduler.busy == 0:
                scheduler.close()

    async with trio.open_nursery() as nursery:
        for _ in range(workers):
            nursery.start_soon(worker)
    return log


async def test_one_capsule_is_asked_one_request_at_a_time_with_the_delay(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    slot = scheduler.slot(1, "a.test", 1965)
    for name in "abc":
        scheduler.add(slot, Item(1, name))
    start = trio.current_time()
    log = await run_workers(scheduler, 5, work=0.5)
    assert [name for _, name in log] == ["a", "b", "c"]
    # Each request starts a full delay after the previous one ended.
    assert [round(t - start, 6) for t, _ in log] == [0.0, 1.5, 3.0]


async def test_capsules_on_different_addresses_run_in_parallel(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    for key in range(4):
        slot = scheduler.slot(key, f"h{key}.test", 1965)
        slot.address = f"127.0.0.{key + 1}"
        scheduler.add(slot, Item(key, f"h{key}"))
    start = trio.current_time()
    log = await run_workers(scheduler, 4, work=0.5)
    assert {round(t - start, 6) for t, _ in log} == {0.0}


async def test_capsules_sharing_an_address_are_spaced_like_one(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    for key in range(3):
        slot = scheduler.slot(key, f"user{key}.pubnix.test", 1965)
        slot.address = "127.0.0.9"
        scheduler.add(slot, Item(key, f"u{key}"))
    start = trio.current_time()
    log = await run_workers(scheduler, 3, work=0.25)
    assert sorted(round(t - start, 6) for t, _ in log) == [0.0, 1.25, 2.5]


async def test_address_learned_after_taking_is_waited_for(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    first = scheduler.slot(1, "known.test", 1965)
    first.address = "127.0.0.5"
    second = scheduler.slot(2, "new.test", 1965)  # address not known yet
    scheduler.add(first, Item(1, "known"))
    scheduler.add(second, Item(2, "new"))
    started: dict[str, float] = {}

    async def known():
        slot, _ = await scheduler.take()
        started["known"] = trio.current_time()
        await trio.sleep(0.5)
        scheduler.release(slot)

    async def new():
        await trio.sleep(0.1)
        slot, _ = await scheduler.take()
        await scheduler.acquire_address(slot, "127.0.0.5")  # resolved: the same server
        started["new"] = trio.current_time()
        scheduler.release(slot)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(known)
        nursery.start_soon(new)
    assert started["new"] - started["known"] == pytest.approx(1.5)


async def test_pause_requeue_drop_and_close(autojump_clock):
    scheduler = Scheduler(delay=0.5)
    slot = scheduler.slot(7, "slow.test", 1965)
    scheduler.add(slot, Item(7, "first"))
    scheduler.add(slot, Item(7, "second"))
    taken_slot, item = await scheduler.take()
    start = trio.current_time()
    # 44 SLOW DOWN 3: the same page again first, after three seconds.
    scheduler.release(taken_slot, pause=3.0, requeue=item)
    taken_slot, again = await scheduler.take()
    assert again.name == "first"
    assert trio.current_time() - start == pytest.approx(3.0)
    assert [i.name for i in scheduler.drop(7)] == ["second"]
    assert scheduler.queued == 0
    scheduler.release(taken_slot)
    scheduler.close()
    assert await scheduler.take() is None


async def test_release_without_request_does_not_restart_the_delay(autojump_clock):
    scheduler = Scheduler(delay=5.0)
    slot = scheduler.slot(1, "a.test", 1965)
    scheduler.add(slot, Item(1, "excluded-by-rule"))
    scheduler.add(slot, Item(1, "next"))
    taken, _ = await scheduler.take()
    start = trio.current_time()
    scheduler.release(taken, requested=False)
    await scheduler.take()
    assert trio.current_time() == start


async def test_statistics_and_saturation(autojump_clock):
    scheduler = Scheduler(delay=2.0)
    busy = scheduler.slot(1, "busy.test", 1965)
    busy.address = "127.0.0.1"
    for n in range(3):
        scheduler.add(busy, Item(1, f"b{n}"))
    neighbour = scheduler.slot(2, "neighbour.test", 1965)
    neighbour.address = "127.0.0.1"
    scheduler.add(neighbour, Item(2, "n0"))
    lone = scheduler.slot(3, "lone.test", 1965)
    scheduler.add(lone, Item(3, "l0"))
    assert scheduler.saturated(per_capsule=3, per_address=10) == {1}
    assert scheduler.saturated(per_capsule=10, per_address=4) == {1, 2}
    slot, _ = await scheduler.take()
    scheduler.release(slot)
    stats = {s.host: s for s in scheduler.statistics()}
    assert stats[slot.host].requests == 1
    assert stats[slot.host].ready_in == pytest.approx(2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats[slot.host].requests = 5  # type: ignore[misc]


def test_rules_numbers():
    rules = PolitenessRules()
    assert rules.capsule_delay(1.0, None) == 1.0
    assert rules.capsule_delay(1.0, 10.0) == 10.0
    assert rules.capsule_delay(1.0, 10_000.0) == rules.max_crawl_delay
    # A 44 is obeyed once, as asked: the capsule's delay does not stay raised, the page
    # that answered it backs off on its own (asked, then twice as long each time).
    assert [rules.slow_down_backoff(5.0, n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert rules.slow_down_backoff(600.0, 10**6) == rules.retry_cap
    assert [rules.retry_delay(n) for n in (1, 2, 3)] == [300.0, 600.0, 1200.0]
    assert rules.retry_delay(50) == rules.retry_cap
    assert rules.failure_pause(1.0, 0) == 1.0
    assert rules.failure_pause(0.0, 3) == 8.0  # a zero delay still backs off
    assert rules.failure_pause(1.0, 40) == rules.failure_pause_cap
    assert rules.park_duration(4) is None
    assert rules.park_duration(5) == 3600.0
    assert rules.park_duration(6) == 7200.0
    assert rules.park_duration(99) == rules.park_max


async def test_prune_forgets_only_idle_capsules(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    done = scheduler.slot(1, "done.test", 1965)
    waiting = scheduler.slot(2, "waiting.test", 1965)
    scheduler.add(waiting, Item(2, "w"))
    scheduler.add(done, Item(1, "d"))
    slot, _ = await scheduler.take()
    scheduler.release(slot)
    scheduler.prune()
    assert scheduler.get_slot(slot.key) is not None  # its delay is still running
    await trio.sleep(1.0)
    other, _ = await scheduler.take()
    scheduler.release(other, requested=False)
    await trio.sleep(1.0)
    scheduler.prune()
    assert scheduler.get_slot(1) is None
    assert scheduler.get_slot(2) is None


async def test_a_page_waiting_its_own_back_off_does_not_hold_up_its_capsule(autojump_clock):
    scheduler = Scheduler(delay=1.0)
    slot = scheduler.slot(1, "busy.test", 1965)
    for name in ("cgi", "a", "b"):
        scheduler.add(slot, Item(1, name))
    taken, cgi = await scheduler.take()
    start = trio.current_time()
    # 44 2: the capsule waits 2 s, the page itself 4 s (its second 44 in a row).
    scheduler.release(taken, pause=2.0)
    scheduler.add_later(taken, cgi, 4.0)
    assert scheduler.queued == scheduler.queued_for(1) == 3
    log = await run_workers(scheduler, 2)
    assert [(round(t - start, 6), name) for t, name in log] == [
        (2.0, "a"),
        (3.0, "b"),
        (4.0, "cgi"),
    ]


async def test_a_page_waiting_its_back_off_is_dropped_and_drained_with_its_capsule(
    autojump_clock,
):
    scheduler = Scheduler(delay=1.0)
    slot = scheduler.slot(1, "busy.test", 1965)
    scheduler.add(slot, Item(1, "a"))
    scheduler.add_later(slot, Item(1, "cgi"), 30.0)
    other = scheduler.slot(2, "other.test", 1965)
    scheduler.add_later(other, Item(2, "later"), 5.0)
    scheduler.prune()
    assert scheduler.get_slot(2) is not None  # its waiting item keeps it
    assert sorted(item.name for item in scheduler.drop(1)) == ["a", "cgi"]
    assert scheduler.queued == 1
    assert [item.name for item in scheduler.drain()] == ["later"]
    assert scheduler.queued == 0
    await trio.sleep(60.0)
    scheduler.close()
    assert await scheduler.take() is None
