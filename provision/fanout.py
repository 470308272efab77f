"""Run one function per item on a bounded pool of threads (hosts in parallel, at most ``forks``).

Generic, so ``probe`` and the setup engine share it: results come back in input order, a
callback sees each as it finishes, and an exception in one item never stops the others (it
becomes that item's result through ``on_error``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def fan_out(
    items: Iterable[T],
    work: Callable[[T], R],
    forks: int,
    on_done: Callable[[T, R], None] | None = None,
    on_error: Callable[[T, BaseException], R] | None = None,
) -> list[R]:
    """Call ``work(item)`` for every item, at most ``forks`` at once; results in input order.

    When ``work`` raises, ``on_error(item, error)`` supplies that item's result (without it the
    error propagates after every other item has finished).
    """
    if forks < 1:
        raise ValueError("forks must be at least 1")
    items = list(items)
    if not items:
        return []
    results: dict[int, R] = {}
    first_error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=min(forks, len(items)), thread_name_prefix="fanout") as pool:
        futures = {pool.submit(work, item): index for index, item in enumerate(items)}
        for future in as_completed(futures):
            index = futures[future]
            try:
                result = future.result()
            except Exception as error:  # noqa: BLE001 - one item's failure never stops the others
                if on_error is None:
                    first_error = first_error or error
                    continue
                result = on_error(items[index], error)
            results[index] = result
            if on_done:
                on_done(items[index], result)
    if first_error is not None:
        raise first_error
    return [results[i] for i in range(len(items))]
