"""Bounded fan-out: run ``work(item)`` for every item, at most ``forks`` at once, on every core.

One Python process runs Python code on one core at a time, so above a few hundred items the
items are split over worker processes (about one per core), each with its own thread pool;
``forks`` stays the total number of items in flight, spread over the workers. Each worker sends
every result back as soon as it is done; the calling process receives them in completion order,
calls ``on_done`` (a progress bar, saving) itself, and returns them in input order, exactly as
the single-process path does. Workers are forked, so ``work`` and the items need not be
picklable; each result must be (it crosses a pipe).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

PROCESS_THRESHOLD = 200  # fewer items: one process (starting workers costs more than it saves)
ITEMS_PER_WORKER = 100  # auto mode: no worker gets fewer items than this


class WorkerError(RuntimeError):
    """A work function raised in a worker process, or a worker died before finishing its items."""


def controller_cores() -> int:
    """The cores this process may run on (its affinity mask, as taskset or a batch system sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(items: int, forks: int, workers: int | None = None) -> int:
    """How many processes to use: ``workers`` if given (0 or None: automatic), never more than
    ``forks`` or ``items``; automatically one per core from :data:`PROCESS_THRESHOLD` items on,
    each with at least :data:`ITEMS_PER_WORKER` items."""
    if workers:
        wanted = workers
    elif items < PROCESS_THRESHOLD:
        wanted = 1
    else:
        wanted = min(controller_cores(), items // ITEMS_PER_WORKER)
    if "fork" not in multiprocessing.get_all_start_methods():
        wanted = 1
    return max(1, min(wanted, forks, items))


def fan_out(
    items: Sequence[T],
    work: Callable[[T], R],
    forks: int,
    workers: int | None = None,
    on_done: Callable[[R], None] | None = None,
) -> list[R]:
    """``[work(item) for item in items]`` with at most ``forks`` running at once, over
    :func:`worker_count` processes; ``on_done(result)`` is called in this process as each one
    finishes. An exception from ``work`` is raised here (from a worker: as :class:`WorkerError`)."""
    if forks < 1:
        raise ValueError("forks must be at least 1")
    items = list(items)
    if not items:
        return []
    processes = worker_count(len(items), forks, workers)
    if processes == 1:
        return _threads(items, work, forks, on_done)
    return _processes(items, work, forks, processes, on_done)


def _threads(items: list[T], work: Callable[[T], R], forks: int, on_done: Callable[[R], None] | None) -> list[R]:
    results: list = [None] * len(items)
    with ThreadPoolExecutor(max_workers=min(forks, len(items)), thread_name_prefix="fan-out") as pool:
        futures = {pool.submit(work, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            results[futures[future]] = result = future.result()
            if on_done:
                on_done(result)
    return results


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (k < total % parts) for k in range(parts)]


def _worker(sender: multiprocessing.connection.Connection, share: list[tuple[int, T]], work: Callable[[T], R], forks: int) -> None:
    """A worker process: its share of the items over ``forks`` threads, each result sent as it is done."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends the workers
    lock = threading.Lock()

    def one(index: int, item: T) -> None:
        try:
            message = (index, True, work(item))
        except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
            message = (index, False, traceback.format_exc(limit=-3).strip())
        with lock:
            try:
                sender.send(message)
            except Exception:  # noqa: BLE001 - an unpicklable result
                sender.send((index, False, f"result of item {index} cannot be sent back: {traceback.format_exc(limit=-1).strip()}"))

    with ThreadPoolExecutor(max_workers=min(forks, len(share)), thread_name_prefix="fan-out") as pool:
        for index, item in share:
            pool.submit(one, index, item)
    sender.close()


def _processes(items: list[T], work: Callable[[T], R], forks: int, processes: int,
               on_done: Callable[[R], None] | None) -> list[R]:
    context = multiprocessing.get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()
    results: list = [None] * len(items)
    done = [False] * len(items)
    started: list[multiprocessing.Process] = []
    receivers: dict[multiprocessing.connection.Connection, multiprocessing.Process] = {}
    try:
        for number, threads in enumerate(_split(forks, processes)):
            receiver, sender = context.Pipe(duplex=False)
            share = [(index, items[index]) for index in range(number, len(items), processes)]  # interleaved
            worker = context.Process(target=_worker, args=(sender, share, work, threads), name=f"fan-out-{number}", daemon=True)
            worker.start()
            started.append(worker)
            sender.close()
            receivers[receiver] = worker
        while receivers:
            for receiver in multiprocessing.connection.wait(list(receivers)):
                try:
                    index, ok, value = receiver.recv()
                except EOFError:  # that worker has finished (or died: checked below)
                    receivers.pop(receiver).join()
                    receiver.close()
                    continue
                if not ok:
                    raise WorkerError(value)
                results[index], done[index] = value, True
                if on_done:
                    on_done(value)
        missing = done.count(False)
        if missing:
            codes = sorted({w.exitcode for w in started if w.exitcode})
            raise WorkerError(f"a worker process ended (exit code {codes}) before finishing {missing} of {len(items)} items")
        return results
    finally:
        for worker in started:
            if worker.is_alive():
                worker.terminate()
            worker.join()
        for receiver in receivers:
            receiver.close()
