"""What both adapter-serving benchmarks share: the slot and host-cache defaults and the latency
percentile columns. `bench.py` (the local engine, and the rows and files of both) dispatches to
`bench_vllm.py` for `--engine vllm`, so the pieces both use live here, below both (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from preft.engine import Request

DEFAULT_MAX_LORAS_CAP = 8
DEFAULT_MAX_CPU_LORAS = 64


def slots_for(count: int, max_loras: int | None) -> int:
    """Resident adapter slots for A = `count` adapters: `max_loras`, else min(A, 8)."""
    return max_loras if max_loras is not None else min(count, DEFAULT_MAX_LORAS_CAP)


def host_cache_for(distinct: int, max_cpu_loras: int | None) -> int:
    """Adapters the host cache holds: `max_cpu_loras`, else min(distinct adapters used, 64)."""
    return max_cpu_loras if max_cpu_loras is not None else min(distinct, DEFAULT_MAX_CPU_LORAS)


def percentiles(values: list[float], prefix: str) -> dict[str, float | None]:
    """`{prefix}_p50_ms`, `_p90_ms`, `_p99_ms` of latencies in seconds (numpy's linear
    interpolation), None for each when there are none."""
    import numpy as np

    if not values:
        return {f"{prefix}_p{q}_ms": None for q in (50, 90, 99)}
    arr = np.asarray(values) * 1000.0
    return {f"{prefix}_p{q}_ms": round(float(np.percentile(arr, q)), 3) for q in (50, 90, 99)}


def ttft_tpot(r: Request) -> tuple[float, float | None]:
    """A finished request's time to its first token, and per output token after it (None: one token)."""
    assert r.first_token_at is not None and r.finished_at is not None, f"request {r.id} has not finished"
    tpot = (r.finished_at - r.first_token_at) / (len(r.output_ids) - 1) if len(r.output_ids) > 1 else None
    return r.first_token_at - r.arrival, tpot
