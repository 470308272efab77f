"""The command on the paramiko channel (provision.transport.channel): the watchdog, without SSH.
The channel itself runs against real sshd in test_channel_cluster.py."""

from __future__ import annotations

import threading
import time

from provision.transport.channel import _Watchdog


class FakeTransport:
    """Records close(); stands in for a paramiko Transport in the watchdog's bookkeeping only."""

    def __init__(self):
        self.closed = threading.Event()

    def close(self):
        self.closed.set()


def test_watchdog_closes_only_what_outlives_its_deadline():
    watchdog = _Watchdog()
    late, early, unwatched = FakeTransport(), FakeTransport(), FakeTransport()
    now = time.monotonic()
    watchdog.watch(now + 0.1, late)
    token = watchdog.watch(now + 0.05, early)
    watchdog.unwatch(token)  # finished in time
    watchdog.unwatch(watchdog.watch(now + 0.01, unwatched))
    assert late.closed.wait(5)
    time.sleep(0.1)
    assert not early.closed.is_set() and not unwatched.closed.is_set()


def test_watchdog_later_deadline_first_then_earlier_one():
    watchdog = _Watchdog()
    slow, fast = FakeTransport(), FakeTransport()
    watchdog.watch(time.monotonic() + 30, slow)
    watchdog.watch(time.monotonic() + 0.05, fast)  # wakes the thread sleeping on the 30 s deadline
    assert fast.closed.wait(5) and not slow.closed.is_set()
