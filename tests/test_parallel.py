"""Bounded fan-out over threads and worker processes (provision.transport.parallel), with local work functions."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from provision.transport import parallel
from provision.transport.parallel import WorkerError, fan_out, worker_count


def square_and_where(item: int) -> tuple[int, int, int]:
    return item, item * item, os.getpid()


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_in_input_order_whatever_the_workers(workers):
    seen = []
    results = fan_out(
        range(25),
        square_and_where,
        forks=5,
        workers=workers,
        on_done=lambda item, result: seen.append((item, result, os.getpid())),
    )
    assert [(i, sq) for i, sq, _ in results] == [(i, i * i) for i in range(25)]
    # on_done once per item, in this process
    assert sorted(seen) == sorted((i, r, os.getpid()) for i, r in enumerate(results))
    pids = {pid for _, _, pid in results}
    if workers == 1:
        assert pids == {os.getpid()}
    else:
        assert len(pids) == workers and os.getpid() not in pids


def test_forks_is_the_total_in_flight_over_every_process():
    running = multiprocessing.Value("i", 0)  # shared with the forked workers
    peak = multiprocessing.Value("i", 0)

    def work(item):
        with running.get_lock():
            running.value += 1
            peak.value = max(peak.value, running.value)
        time.sleep(0.05)
        with running.get_lock():
            running.value -= 1
        return item

    assert fan_out(list(range(24)), work, forks=4, workers=2) == list(range(24))
    assert 2 <= peak.value <= 4


def fails_on_3(item):
    if item == 3:
        raise ValueError("bad item 3")
    return item


@pytest.mark.parametrize("workers", [1, 2])
def test_work_error_raised_after_the_others_finished(workers):
    done = []
    with pytest.raises(ValueError, match="bad item 3"):
        fan_out(range(6), fails_on_3, forks=2, workers=workers, on_done=lambda item, _r: done.append(item))
    assert sorted(done) == [0, 1, 2, 4, 5]


@pytest.mark.parametrize("workers", [1, 2])
def test_on_error_gives_the_failed_item_its_result(workers):
    results = fan_out(range(6), fails_on_3, forks=2, workers=workers, on_error=lambda item, error: f"{item}: {error}")
    assert results == [0, 1, 2, "3: bad item 3", 4, 5]


def test_unpicklable_error_crosses_as_its_text():
    class Local(Exception):
        pass

    def work(item):
        raise Local(f"local {item}")

    results = fan_out(range(2), work, forks=2, workers=2, on_error=lambda item, error: (type(error).__name__, str(error)))
    assert results == [("WorkerError", "Local: local 0"), ("WorkerError", "Local: local 1")]


def test_a_worker_that_dies_costs_only_its_unfinished_items():
    def work(item):
        if item == 5:
            os._exit(9)  # as if killed (out of memory)
        return item

    # Items 1, 3, 5, 7 are worker 1's (interleaved); it dies at 5, after 1 and 3 at most.
    results = fan_out(range(8), work, forks=2, workers=2, on_error=lambda item, error: str(error))
    assert results[0::2] == [0, 2, 4, 6]
    assert "exit code [9]" in results[5] and "before finishing" in results[5]
    with pytest.raises(WorkerError, match=r"exit code \[9\].*before finishing"):
        fan_out(range(8), work, forks=2, workers=2)


def test_unpicklable_result_named():
    with pytest.raises(WorkerError, match="cannot be sent back"):
        fan_out(range(4), lambda item: lambda: item, forks=2, workers=2)


def test_worker_count(monkeypatch):
    monkeypatch.setattr(parallel, "controller_cores", lambda: 8)
    assert worker_count(10, 64) == 1  # few items: one process
    assert worker_count(parallel.PROCESS_THRESHOLD, 64) == 2  # at least ITEMS_PER_WORKER each
    assert worker_count(4096, 64) == 8  # one per core
    assert worker_count(4096, 3) == 3  # never more processes than items in flight
    assert worker_count(5, 64, workers=4) == 4 and worker_count(2, 64, workers=4) == 2  # explicit, bounded by items
    monkeypatch.setattr(parallel, "controller_cores", lambda: 1)
    assert worker_count(4096, 64) == 1
    monkeypatch.setattr(parallel, "controller_cores", lambda: 2)  # 2 cores: a second process only competes
    assert worker_count(4096, 64) == 1 and worker_count(4096, 64, workers=2) == 2


def test_empty_and_bad_forks():
    assert fan_out([], square_and_where, forks=4) == []
    with pytest.raises(ValueError):
        fan_out([1], square_and_where, forks=0)
