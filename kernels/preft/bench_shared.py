"""What both adapter-serving benchmarks share: the slot and host-cache defaults, the latency
percentile columns, and the shape of the result document (adapters_bench.json). `bench.py` (the local engine, and the rows and files of both) dispatches to
`bench_vllm.py` for `--engine vllm`, so the pieces both use live here, below both (no import cycle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from pydantic import JsonValue

if TYPE_CHECKING:
    from preft.engine import Request

# The result document's parts are TypedDicts: adapters_bench.json is the document dumped as built
# (key order included), so they stay plain dicts.


class Draw(TypedDict):
    """How requests pick adapters and arrive (`workload.draw_workload`'s options)."""

    popularity: str
    zipf_s: float
    arrival: str
    rate: float | None


class Placement(TypedDict):
    """Where and in what precision the local engine runs, and on what model."""

    device: str
    dtype: str
    model_shape: str | None
    prefill_loras: int | None


class BenchConfig(Draw, Placement):
    """The run's settings as the document records them."""

    engine: str
    adapters: list[int]
    modes: list[str]
    rank: int
    requests: int
    prompt_len: int
    gen_len: int
    max_loras: int | None
    max_loras_default: str
    max_num_seqs: int
    max_cpu_loras: int | None
    max_cpu_loras_default: str
    slot_rule: str
    seed: int
    lora_backend: str
    token_range: list[int]
    requests_per_A: str
    warmup_requests: int
    model: NotRequired[str]  # --engine vllm: the base model's path or hub id


# One (adapter count, mode) row: flat JSON values, and its columns differ by engine (`bench.CSV_COLUMNS`
# names them all), so a row is a JSON object rather than a fixed type.
BenchRow = dict[str, JsonValue]


class Ratios(TypedDict):
    """preft's output tokens/s over all-token and over base per adapter count (keys str(A)); the
    `_cpu` ones per CPU second of the process."""

    preft_over_all_token: dict[str, float]
    preft_over_base: dict[str, float]
    preft_over_all_token_cpu: dict[str, float]
    preft_over_base_cpu: dict[str, float]


class BenchResult(Ratios):
    """adapters_bench.json."""

    config: BenchConfig
    environment: dict[str, str | int | None]
    memory: dict[str, str]  # how peak memory was measured
    rows: list[BenchRow]


def number(value: JsonValue) -> float:
    """A row's numeric cell (an int stays an int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not a number")
    return value


def ratios(rows: list[BenchRow]) -> Ratios:
    """`Ratios` of the rows; a count without both modes (or with a zero rate) has none."""

    def over(metric: str, other: str) -> dict[str, float]:
        rate = {(r["adapters"], r["mode"]): r.get(metric) for r in rows}
        out: dict[str, float] = {}
        for count in dict.fromkeys(r["adapters"] for r in rows):
            preft, then = rate.get((count, "preft")), rate.get((count, other))
            if preft is not None and then:
                out[str(count)] = round(number(preft) / number(then), 4)
        return out

    return {"preft_over_all_token": over("output_tok_s", "all-token"), "preft_over_base": over("output_tok_s", "base"),
            "preft_over_all_token_cpu": over("output_tok_cpu_s", "all-token"),
            "preft_over_base_cpu": over("output_tok_cpu_s", "base")}

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
