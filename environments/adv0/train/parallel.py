"""Planner episodes in parallel for the claim checks (issue 41, item 3): processes on this machine,
or a Ray cluster beyond it, with the same results as a serial run for the same seeds.

An IDM/MOBIL planner episode is a pure function of (family, seed, attack, planner parameters): the
world rebuilds everything on `reset(seed=...)`, and no generator is shared between episodes. So
the episodes of a check can be spread over workers in any order and put back in job order; the
results are those of the serial loop, field for field (`tests/environments/adv0/test_parallel.py`).

`configure(workers=N, ray_address=ADDR)` sets how (`harness adv0 check --workers N [--ray-address
ADDR]`); the default is one process per core. `workers=1` is the serial loop. With a Ray address
(or `ray_address="local"`, a local cluster) the same chunks go to `ray.util.multiprocessing.Pool`,
Ray's drop-in for a process pool, one CPU per worker. The toy world runs its episodes vectorised
and the DQN and LLM defenders hold models: those stay in-process (`defender_episodes`).

May import: the standard library, `environments.adv0` (planner, scenario), `harness.processes`, and
`ray` and psutil inside functions only.
"""

from __future__ import annotations

import atexit
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from environments.adv0.sim.scenario import EpisodeResult, IdmParams, ScenarioParams

Job = tuple[ScenarioParams | None, int]  # (attack or None, seed), as loop.Job


@dataclass(frozen=True)
class Workers:
    """How episodes are spread: `n` workers; `ray_address` None = processes here, else a Ray
    cluster ("local" starts one)."""

    n: int
    ray_address: str | None = None

    def label(self) -> str:
        if self.n == 1:
            return "serial (1 process)"
        return f"{self.n} Ray workers at {self.ray_address}" if self.ray_address else f"{self.n} processes"


_config = Workers(n=os.cpu_count() or 1)
_pools: dict[Workers, Any] = {}
_started_ray = False  # this module started the Ray connection (and so ends it)


def configure(workers: int | None = None, ray_address: str | None = None) -> Workers:
    """Set the workers every later call uses (None: one per core here)."""
    global _config
    if workers is not None and workers < 1:
        raise ValueError(f"--workers {workers}: give 1 (serial) or more")
    _config = Workers(n=workers or os.cpu_count() or 1, ray_address=ray_address)
    return _config


def current() -> Workers:
    return _config


def _pool(w: Workers) -> Any:
    if w not in _pools:
        if w.ray_address is None:
            _pools[w] = ProcessPoolExecutor(max_workers=w.n)
        else:
            import ray
            from ray.util.multiprocessing import Pool

            global _started_ray
            if not ray.is_initialized():
                _started_ray = True
                ray.init(
                    address=None if w.ray_address == "local" else w.ray_address,
                    num_cpus=w.n if w.ray_address == "local" else None,
                    include_dashboard=False,
                    log_to_driver=False,
                )
            _pools[w] = Pool(processes=w.n)
    return _pools[w]


@atexit.register
def shutdown() -> None:
    """Close every pool this process started (and the Ray connection, if it started one)."""
    global _started_ray
    for pool in _pools.values():
        if isinstance(pool, ProcessPoolExecutor):
            pool.shutdown(cancel_futures=True)
        else:
            pool.terminate()
    _pools.clear()
    if _started_ray:
        import psutil
        import ray

        from harness.processes import kill_trees

        # The local cluster's processes are this process's descendants; after `ray.shutdown()` its
        # pool actors can outlive the raylet, re-parented to init (seen with Ray 2.60): end them.
        started = psutil.Process().children(recursive=True)
        ray.shutdown()
        kill_trees(p for p in started if p.is_running())
        _started_ray = False


def _one(args: tuple[str, IdmParams, ScenarioParams | None, int]) -> EpisodeResult:
    from environments.adv0.sim import highway
    from environments.adv0.train.planner import planner_episode

    family, params, attack, seed = args
    return planner_episode(highway, family, params, attack, seed)


def planner_episodes(
    family: str, params: IdmParams, jobs: Sequence[Job], workers: Workers | None = None
) -> list[EpisodeResult]:
    """highway-env episodes of the IDM/MOBIL planner `params`, one per job, in job order."""
    w = workers or _config
    args = [(family, params, attack, seed) for attack, seed in jobs]
    if w.n == 1 or len(args) <= 1:
        return [_one(a) for a in args]
    chunk = max(1, math.ceil(len(args) / (4 * w.n)))  # a few chunks per worker: balance without much pickling
    return list(_pool(w).map(_one, args, chunksize=chunk))  # both pools keep the order of `args`


def defender_episodes(
    defender: Any, jobs: Sequence[Job], family: str | None = None, workers: Workers | None = None
) -> list[EpisodeResult]:
    """`defender.run(jobs, family)`, spread over workers where the defender is the highway-env
    IDM/MOBIL planner (the loop's `IdmDefender`); any other defender runs in-process."""
    fam = family or defender.cfg.family
    if getattr(defender, "name", None) == "idm" and fam != "toy":
        return planner_episodes(fam, defender.params, jobs, workers)
    return list(defender.run(list(jobs), family))


def rollout_for(
    defender: Any, workers: Workers | None = None
) -> Callable[[Sequence[int], Sequence[Any]], list[EpisodeResult]]:
    """An attacker's `rollout(seeds, draws)` against `defender`, spread like `defender_episodes`."""
    return lambda seeds, draws: defender_episodes(defender, list(zip(draws, seeds)), workers=workers)
