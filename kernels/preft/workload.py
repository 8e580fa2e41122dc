"""The adapter benchmark's request draw: which adapter each request uses, and when it arrives.

- Every one of the A adapters is used: the first A draws are a permutation of all adapters (each
  once), the remaining `requests - A` follow the popularity law; the whole order is then shuffled,
  so the "each once" block is spread over the run. Hence `requests >= 2 * A` (the benchmark's rule:
  every adapter at least once and as many requests again drawn by popularity).
- Popularity `uniform` (each adapter 1/A) or `zipf` (adapter k with weight 1 / (k + 1) ** s,
  adapter 0 the most popular; s = `zipf_s`).
- Arrival `t0` (every request at time 0: offline) or `poisson` (exponential gaps with mean
  1 / `rate` seconds, the first request at its first gap).

Everything is a pure function of `seed` (numpy's PCG64 generator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POPULARITY = ("uniform", "zipf")
ARRIVALS = ("t0", "poisson")


@dataclass(frozen=True)
class Workload:
    adapters: list[int]     # adapter index of request i, 0 <= index < A
    arrivals: list[float]   # seconds after the start, non-decreasing

    def distinct(self) -> int:
        return len(set(self.adapters))


def popularity_weights(count: int, popularity: str, zipf_s: float = 1.1) -> np.ndarray:
    """Probabilities of the A adapters under the popularity law (sum 1)."""
    if popularity == "uniform":
        return np.full(count, 1.0 / count)
    if popularity == "zipf":
        w = 1.0 / np.arange(1, count + 1, dtype=np.float64) ** zipf_s
        return np.asarray(w / w.sum())
    raise ValueError(f"--popularity {popularity!r}: use one of {POPULARITY}")


def draw_workload(count: int, requests: int, *, popularity: str = "uniform", zipf_s: float = 1.1,
                  arrival: str = "t0", rate: float | None = None, seed: int = 0) -> Workload:
    """`requests` requests over `count` adapters, every adapter used at least once (see the module doc)."""
    if count < 1:
        raise ValueError(f"adapter count {count}: must be at least 1")
    if requests < 2 * count:
        raise ValueError(f"--requests {requests} with {count} adapters: every adapter must be used, so give at "
                         f"least 2 x A = {2 * count} requests (e.g. --requests {2 * count})")
    if popularity not in POPULARITY:
        raise ValueError(f"--popularity {popularity!r}: use one of {POPULARITY}")
    if popularity == "zipf" and not zipf_s > 0:
        raise ValueError(f"--zipf-s {zipf_s}: must be > 0")
    if arrival not in ARRIVALS:
        raise ValueError(f"--arrival {arrival!r}: use one of {ARRIVALS}")
    if arrival == "poisson" and (rate is None or not rate > 0):
        raise ValueError(f"--arrival poisson needs --rate > 0 (requests per second), got {rate}")
    gen = np.random.default_rng(seed)
    each_once = gen.permutation(count)
    extra = gen.choice(count, size=requests - count, p=popularity_weights(count, popularity, zipf_s))
    order = np.concatenate([each_once, extra])
    gen.shuffle(order)
    if arrival == "t0":
        times = np.zeros(requests)
    else:
        times = np.cumsum(gen.exponential(1.0 / float(rate), size=requests))  # type: ignore[arg-type]
    return Workload(adapters=[int(a) for a in order], arrivals=[float(t) for t in times])
