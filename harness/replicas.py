"""Least-loaded routing over model replicas: several endpoints serving the same model.

`--base-url URL1,URL2,...` (or `--role-base-url judge=URL1,URL2`) names replicas of one model;
each request goes to the replica with the fewest requests in flight, ties broken round-robin, so a
slow or busy replica gets fewer requests and a fast one more. A replica that fails to connect is
left out for `down_s` seconds (the call's retry, in `harness.calls`, then lands on another one);
when every replica is down, the one that comes back soonest is tried rather than failing the call.
A replica known to be gone for good (a Ray actor that died: `harness/providers/ray_replicas.py`)
is left out for the rest of the run (`mark_down(i, math.inf)`). The in-flight count is returned on
every exit path (answer, error, cancellation).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Generic, TypeVar

from harness.errors import HarnessError

T = TypeVar("T")


def split_urls(base_url: str | None) -> list[str]:
    """The replicas named by a base URL: one URL, or several separated by commas."""
    if base_url is None:
        return []
    urls = [u.strip() for u in base_url.split(",")]
    if not all(urls):
        raise HarnessError(f"--base-url {base_url!r} has an empty entry: write URL1,URL2 with no empty item")
    return urls


class LeastLoaded(Generic[T]):
    """Routes each use to the replica with the fewest uses in flight (ties: round-robin)."""

    def __init__(self, replicas: Sequence[T], down_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        if not replicas:
            raise ValueError("LeastLoaded needs at least one replica")
        self.replicas = list(replicas)
        self.in_flight = [0] * len(replicas)
        self.served = [0] * len(replicas)  # uses started per replica, for reports and tests
        self.down_until = [0.0] * len(replicas)
        self.down_s = down_s
        self._clock = clock
        self._next = 0  # round-robin cursor: where the search for a least-loaded replica starts

    def pick(self) -> int:
        """The index of the replica the next request should go to."""
        now = self._clock()
        n = len(self.replicas)
        order = [(self._next + k) % n for k in range(n)]
        up = [i for i in order if self.down_until[i] <= now]
        if not up:  # all down: the one back soonest
            return min(order, key=lambda i: self.down_until[i])
        best = min(up, key=lambda i: self.in_flight[i])  # min keeps the first of equals: round-robin
        self._next = (best + 1) % n
        return best

    @contextmanager
    def use(self) -> Iterator[tuple[int, T]]:
        """Hold one request on the least-loaded replica for the duration of the block."""
        i = self.pick()
        self.in_flight[i] += 1
        self.served[i] += 1
        try:
            yield i, self.replicas[i]
        finally:
            self.in_flight[i] -= 1

    def mark_down(self, i: int, for_s: float | None = None) -> None:
        """Leave replica `i` out for `for_s` seconds (default `down_s`: it failed to connect;
        `math.inf`: it is gone for good)."""
        self.down_until[i] = self._clock() + (self.down_s if for_s is None else for_s)

    @property
    def all_gone(self) -> bool:
        """Every replica is left out for good: no call can be served."""
        return all(math.isinf(t) for t in self.down_until)
