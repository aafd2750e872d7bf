"""Lanes: independent streams of work (a transport's cases, say) run side by side, one thread
each, their items handed to the calling thread in one fixed order, lane after lane, so that a
run's rows come in the same order however the lanes are timed."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

Lane = Callable[[], Iterable[T]]


class _Failed:
    """What a lane raised, in the place of its next item."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def in_order(lanes: Sequence[Lane[T]], *, at_once: int = 0) -> Iterator[T]:
    """The items of ``lanes``, lane after lane and each lane's in its own order, while the lanes
    run side by side (at most ``at_once`` at a time; 0: all). An item is yielded as soon as it
    and every item before it are known, so a run that stops keeps a prefix of its items.

    An exception a lane raises is raised here, once the items before it are yielded. Closing the
    iterator (or an exception in the consumer) stops every lane after the item it has in hand,
    and returns once their threads have ended."""
    done: queue.Queue[tuple[int, T | _Failed] | int] = queue.Queue()
    stop = threading.Event()

    def run(index: int) -> None:
        try:
            for item in lanes[index]():
                done.put((index, item))
                if stop.is_set():
                    return
        except BaseException as exc:  # handed to the calling thread, which raises it
            done.put((index, _Failed(exc)))
        finally:
            done.put(index)  # this lane is over

    def start(index: int) -> threading.Thread:
        thread = threading.Thread(target=run, args=(index,), daemon=True)
        thread.start()
        return thread

    limit = at_once or len(lanes)
    threads = [start(index) for index in range(min(limit, len(lanes)))]
    held: list[list[T | _Failed]] = [[] for _ in lanes]
    over = [False] * len(lanes)
    try:
        for current in range(len(lanes)):
            while True:
                while held[current]:
                    item = held[current].pop(0)
                    if isinstance(item, _Failed):
                        raise item.error
                    yield item
                if over[current]:
                    break
                got = done.get()
                if isinstance(got, int):
                    over[got] = True
                    if len(threads) < len(lanes):  # a lane ended: the next one may start
                        threads.append(start(len(threads)))
                else:
                    held[got[0]].append(got[1])
    finally:
        stop.set()
        for thread in threads:
            thread.join()
