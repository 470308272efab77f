"""The bounded fan-out: order kept, bound respected, one failure never stops the others."""

import threading
import time

import pytest

from provision.fanout import fan_out


def test_results_in_input_order_and_bounded():
    running, peak, lock = [0], [0], threading.Lock()

    def work(n):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02 * (5 - n % 5))
        with lock:
            running[0] -= 1
        return n * n

    seen = []
    assert fan_out(range(10), work, 3, on_done=lambda item, result: seen.append(item)) == [n * n for n in range(10)]
    assert peak[0] <= 3 and sorted(seen) == list(range(10))


def test_one_failure_does_not_stop_the_others():
    done = []

    def work(n):
        if n == 2:
            raise RuntimeError("boom")
        done.append(n)
        return n

    assert fan_out(range(5), work, 2, on_error=lambda item, error: f"{item}: {error}") == [0, 1, "2: boom", 3, 4]
    done.clear()
    with pytest.raises(RuntimeError):
        fan_out(range(5), work, 2)
    assert sorted(done) == [0, 1, 3, 4]


def test_bad_forks():
    with pytest.raises(ValueError):
        fan_out([1], lambda x: x, 0)
    assert fan_out([], lambda x: x, 1) == []
