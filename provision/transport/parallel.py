"""Bounded fan-out: run ``work(item)`` for every item, at most ``forks`` at once, on every core.

One Python process runs Python code on one core at a time, so above a few hundred items the
items are split over worker processes (about one per core), each with its own thread pool;
``forks`` stays the total number of items in flight, spread over the workers. Each worker sends
every result back as soon as it is done; the calling process receives them in completion order,
calls ``on_done`` (a progress bar, saving) itself, and returns them in input order, exactly as
the single-process path does. Workers are forked, so ``work`` and the items need not be
picklable; each result must be (it crosses a pipe).

The API (``on_done(item, result)``, ``on_error(item,
error)``) plus ``workers``, so the setup engine can switch to it unchanged.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

PROCESS_THRESHOLD = 200  # fewer items: one process (starting workers costs more than it saves)
ITEMS_PER_WORKER = 100  # auto mode: no worker gets fewer items than this
# Auto mode: worker processes only on a controller with this many cores. On 2 cores the second
# process competes with the first (and with ssh, the agent, the shell) for the same two: probe of 256
# hosts took 1.25x the bare paramiko fan-out's wall time with 2 processes, 1.11x with one (issue 28).
MIN_CORES = 4


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
    each with at least :data:`ITEMS_PER_WORKER` items, on a controller of :data:`MIN_CORES` cores
    or more.

    >>> worker_count(50, 64), worker_count(4096, 64, workers=3)
    (1, 3)
    """
    cores = controller_cores()
    if workers:
        wanted = workers
    elif items < PROCESS_THRESHOLD or cores < MIN_CORES:
        wanted = 1
    else:
        wanted = min(cores, items // ITEMS_PER_WORKER)
    if "fork" not in multiprocessing.get_all_start_methods():
        wanted = 1
    return max(1, min(wanted, forks, items))


def fan_out(
    items: Iterable[T],
    work: Callable[[T], R],
    forks: int,
    on_done: Callable[[T, R], None] | None = None,
    on_error: Callable[[T, BaseException], R] | None = None,
    workers: int | None = None,
) -> list[R]:
    """Call ``work(item)`` for every item, at most ``forks`` at once over :func:`worker_count`
    processes; results in input order; ``on_done(item, result)`` runs in this process as each
    finishes. When ``work`` raises, ``on_error(item, error)`` supplies that item's result (an error
    from a worker process, or a worker that died with the item unfinished, is a
    :class:`WorkerError` when the original cannot cross the pipe); without ``on_error`` the first
    error is raised after every other item has finished."""
    if forks < 1:
        raise ValueError("forks must be at least 1")
    items = list(items)
    if not items:
        return []
    processes = worker_count(len(items), forks, workers)
    collect = _Collector(items, on_done, on_error)
    if processes == 1:
        _threads(items, work, forks, collect)
    else:
        _processes(items, work, forks, processes, collect)
    return collect.finish()


class _Collector:
    """Results by index, the callbacks, the first unhandled error."""

    def __init__(self, items: list, on_done, on_error) -> None:
        self.items, self.on_done, self.on_error = items, on_done, on_error
        self.results: dict[int, object] = {}
        self.first_error: BaseException | None = None

    def done(self, index: int, result) -> None:
        self.results[index] = result
        if self.on_done:
            self.on_done(self.items[index], result)

    def failed(self, index: int, error: BaseException) -> None:
        if self.on_error is None:
            self.first_error = self.first_error or error
            return
        self.done(index, self.on_error(self.items[index], error))

    def finish(self) -> list:
        if self.first_error is not None:
            raise self.first_error
        return [self.results[i] for i in range(len(self.items))]


def _threads(items: list[T], work: Callable[[T], R], forks: int, collect: _Collector) -> None:
    with ThreadPoolExecutor(max_workers=min(forks, len(items)), thread_name_prefix="fan-out") as pool:
        futures = {pool.submit(work, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception as error:  # noqa: BLE001 - one item's failure never stops the others
                collect.failed(futures[future], error)
                continue
            collect.done(futures[future], result)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (k < total % parts) for k in range(parts)]


def _sendable_error(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - unpicklable: its text crosses instead
        return WorkerError(f"{type(error).__name__}: {error}")


def _worker(
    sender: multiprocessing.connection.Connection, share: list[tuple[int, T]], work: Callable[[T], R], forks: int
) -> None:
    """A worker process: its share of the items over ``forks`` threads, each result sent as it is done."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends the workers
    lock = threading.Lock()

    def one(index: int, item: T) -> None:
        try:
            message = (index, True, work(item))
        except Exception as error:  # noqa: BLE001 - the parent hands it to on_error
            message = (index, False, _sendable_error(error))
        with lock:
            try:
                sender.send(message)
            except Exception:  # noqa: BLE001 - an unpicklable result
                sender.send(
                    (
                        index,
                        False,
                        WorkerError(f"result of item {index} cannot be sent back: {traceback.format_exc(limit=-1).strip()}"),
                    )
                )

    with ThreadPoolExecutor(max_workers=min(forks, len(share)), thread_name_prefix="fan-out") as pool:
        for index, item in share:
            pool.submit(one, index, item)
    sender.close()


def _processes(items: list[T], work: Callable[[T], R], forks: int, processes: int, collect: _Collector) -> None:
    context = multiprocessing.get_context("fork")
    sys.stdout.flush()
    sys.stderr.flush()
    started: list[multiprocessing.Process] = []
    receivers: dict[multiprocessing.connection.Connection, multiprocessing.Process] = {}
    finished: set[int] = set()
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
                finished.add(index)
                if ok:
                    collect.done(index, value)
                else:
                    collect.failed(index, value)
        codes = sorted({w.exitcode for w in started if w.exitcode})
        for index in range(len(items)):
            if index not in finished:  # its worker died (killed, out of memory): this item only fails
                collect.failed(index, WorkerError(f"the worker process ended (exit code {codes}) before finishing this item"))
    finally:
        for worker in started:
            if worker.is_alive():
                worker.terminate()
            worker.join()
        for receiver in receivers:
            receiver.close()
