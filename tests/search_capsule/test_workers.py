"""The worker threads that run searches and store queries off the event loop."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from search_capsule.workers import Overloaded, WorkerThreads
from tests.search_capsule.gate import Gate


@pytest.fixture
def workers() -> Iterator[WorkerThreads]:
    made = WorkerThreads(1, max_waiting=2, name="test-worker")
    yield made
    made.close()


async def test_results_come_back_from_another_thread(workers):
    assert await workers.run(threading.get_ident) != threading.get_ident()
    assert await workers.run(lambda: threading.current_thread().name) == "test-worker-0"
    assert await workers.run(pow, 2, 10) == 1024


async def test_exceptions_reach_the_caller_and_the_thread_goes_on(workers):
    with pytest.raises(ZeroDivisionError):
        await workers.run(divmod, 1, 0)
    assert await workers.run(divmod, 7, 2) == (3, 1)


async def test_jobs_run_one_after_another_in_submission_order(workers):
    gate = Gate()
    ran: list[str] = []  # in the thread, as the jobs run
    answers: dict[str, str] = {}

    def job(value: str) -> str:
        ran.append(gate(value))
        return value.upper()

    async def submit(value: str) -> None:
        answers[value] = await workers.run(job, value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(submit, "first")
        await gate.started()
        for value in ("second", "third"):
            nursery.start_soon(submit, value)
            await trio.testing.wait_all_tasks_blocked()
        assert (workers.busy, workers.waiting) == (1, 2)
        gate.open()
    assert ran == ["first", "second", "third"]
    assert answers == {"first": "FIRST", "second": "SECOND", "third": "THIRD"}
    assert (workers.busy, workers.waiting) == (0, 0)


async def test_a_full_waiting_room_refuses_at_once(workers):
    gate = Gate()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workers.run, gate, "running")
        await gate.started()
        nursery.start_soon(workers.run, gate, "waiting 1")
        nursery.start_soon(workers.run, gate, "waiting 2")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(Overloaded):
            await workers.run(gate, "one too many")
        gate.open()
    assert await workers.run(str.upper, "room again") == "ROOM AGAIN"


async def test_a_cancelled_waiting_job_never_runs_and_frees_its_place(workers):
    gate = Gate()
    ran: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workers.run, gate, "running")
        await gate.started()
        with trio.move_on_after(0.05) as scope:
            await workers.run(ran.append, "cancelled")
        assert scope.cancelled_caught
        assert workers.waiting == 0
        gate.open()
    assert await workers.run(ran.append, "later") is None
    assert ran == ["later"]


async def test_a_running_job_is_waited_for_when_cancelled(workers):
    gate = Gate()
    done: list[str] = []
    finished = trio.Event()
    scope = trio.CancelScope()

    async def run_then_record() -> None:
        with scope:
            done.append(await workers.run(gate, "finished"))
        finished.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_then_record)
        await gate.started()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert not finished.is_set()  # still waiting for the thread, which is still busy
        assert workers.busy == 1
        gate.open()
    assert done == ["finished"]


async def test_close_stops_the_threads(workers):
    await workers.run(str, 1)
    threads = [t for t in threading.enumerate() if t.name.startswith("test-worker")]
    assert len(threads) == 1
    workers.close()
    assert not any(t.is_alive() for t in threads)


def test_at_least_one_thread():
    with pytest.raises(ValueError, match="at least one"):
        WorkerThreads(0, max_waiting=1, name="none")
