"""The motion-planner defender: an IDM/MOBIL ego whose parameters (`IdmParams`, a bounded box) are
tuned by the cross-entropy method (CEM) against the round's attacker scenarios mixed with normal
traffic.

The objective of a parameter vector is the mean defender return J (`scenario.defender_return`)
over a fixed set of episodes: every round scenario on its own seed plus normal-traffic episodes
(attack=None). J rewards progress (speed) and charges a crash the defender is at fault for, so
"always brake" scores 0 per episode and loses to driving on; normal traffic in the mix keeps a
planner from buying safety under attack with a crawl everywhere else.

Why CEM in the unit box: the parameters have different units (seconds, metres, m/s^2), so each is
searched as its fraction of the box, the sampling width is a share of the box, and a sample that
leaves it is clipped back (the box is the feasibility limit, never crossed). Every candidate of
every generation meets the same episodes (common random numbers), so differences between
candidates are differences of the parameters, not of the traffic; the incumbent (best mean J seen,
the start included) is what `tune_cem` returns. Elites are ranked by J, ties by mean speed: J's
progress term is flat below its speed range (every crawl scores exactly 0), and without the
tie-break a population stuck on that plateau would pick its elites arbitrarily and never leave.
Everything is drawn from one `numpy.random.Generator(seed)`, so a seed fixes the run (given a
deterministic `run_episodes`).

J is fault-gated: a crash the attacker is blamed for costs the defender nothing. A planner can
exploit that (on the toy world, driving faster turns late cut-ins into the entrant's fault);
`charge_any_crash=True` scores every crash as the defender's for a planner that must avoid them all.

May import: numpy, pydantic, `environments.adv0.sim.scenario`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from environments.adv0.sim.scenario import EpisodeResult, IdmParams, ScenarioParams, defender_return

if TYPE_CHECKING:  # highway-env loads with it; the planner itself never needs it
    from environments.adv0.sim.closed_loop import ClosedLoopDraw

Job = tuple[ScenarioParams | None, int]  # (attack or None for normal traffic, episode seed)
RunEpisodes = Callable[[IdmParams, list[Job]], list[EpisodeResult]]
# (candidates, jobs, charge_any_crash) -> (P, 2): each candidate's mean J and mean speed over the jobs.
# A world that runs a whole population at once (the toy world's `population_scores`) gives one.
ScorePopulation = Callable[[list[IdmParams], list[Job], bool], np.ndarray]
MIN_SIGMA = 0.05  # of the box: keeps CEM from collapsing on one point before the last generation
SIGMA_KEEP = 0.5  # share of the old width kept each generation: a few elites' spread underestimates it


class GenerationRecord(BaseModel):
    """One CEM generation: what it scored and what it cost."""

    generation: int
    population: int
    episodes: int  # episodes run in this generation (population x jobs)
    mean_j: float  # mean objective over the population
    best_j: float  # best candidate of this generation
    elite_j: float  # mean objective of the elites
    incumbent_j: float  # best objective seen so far (the start included)
    start_j: float  # the start's objective (scored once, before generation 0, not in cpu_s)
    incumbent: dict[str, float]  # its parameters
    sigma: float  # mean sampling width after this generation, as a share of the box
    cpu_s: float  # CPU-seconds of this process (and its finished children) in this generation
    wall_s: float


def episode_jobs(scenarios: Sequence[ScenarioParams | Job], normal: int | None = None, seed: int = 0) -> list[Job]:
    """The episodes every candidate is scored on: each scenario on its own seed (a bare
    `ScenarioParams` gets seed `seed + i`) plus `normal` normal-traffic episodes (default: as many
    as there are scenarios) on seeds after them."""
    jobs: list[Job] = []
    for i, item in enumerate(scenarios):
        if isinstance(item, ScenarioParams):
            jobs.append((item, seed + i))
        elif isinstance(item, tuple) and len(item) == 2 and (isinstance(item[0], (ScenarioParams, type(None)))
                                                              or callable(getattr(item[0], "attacker", None))):
            jobs.append((item[0], int(item[1])))  # the latter: a `closed_loop.ClosedLoopDraw` (the loop's world plays it)
        else:
            raise ValueError(f"scenarios[{i}]={item!r}: give a ScenarioParams or an (attack, seed) pair")
    normal = len(jobs) if normal is None else normal
    if normal < 0:
        raise ValueError(f"normal={normal}: the number of normal-traffic episodes must be >= 0")
    jobs += [(None, seed + len(scenarios) + k) for k in range(normal)]
    if not jobs:
        raise ValueError("no episodes to score: give at least one scenario or normal > 0")
    return jobs


def episode_return(result: EpisodeResult, charge_any_crash: bool = False) -> float:
    """J of one episode: the world's fault-gated `reward`, or with `charge_any_crash` J as if every
    crash were the defender's (a planner may not buy speed with crashes it is not blamed for)."""
    if not charge_any_crash or not result.crashed:
        return result.reward
    return defender_return(True, result.mean_speed, result.distance_m, result.duration_s)


def scores(run_episodes: RunEpisodes, params: IdmParams, jobs: list[Job], charge_any_crash: bool = False
           ) -> tuple[float, float]:
    """(mean defender return J, mean speed) of `params` over `jobs`."""
    results = run_episodes(params, jobs)
    if len(results) != len(jobs):
        raise ValueError(f"run_episodes returned {len(results)} results for {len(jobs)} episodes")
    return (float(np.mean([episode_return(r, charge_any_crash) for r in results])),
            float(np.mean([r.mean_speed for r in results])))


def objective(run_episodes: RunEpisodes, params: IdmParams, jobs: list[Job], charge_any_crash: bool = False) -> float:
    """Mean defender return J of `params` over `jobs`."""
    return scores(run_episodes, params, jobs, charge_any_crash)[0]


def population_scorer(run_episodes: RunEpisodes) -> ScorePopulation:
    """`ScorePopulation` from a `run_episodes`: one candidate after another."""
    def score(candidates: list[IdmParams], jobs: list[Job], charge_any_crash: bool) -> np.ndarray:
        return np.array([scores(run_episodes, p, jobs, charge_any_crash) for p in candidates], dtype=float)

    return score


def _check(generations: int, population: int, elite_frac: float) -> int:
    if generations < 1:
        raise ValueError(f"generations={generations}: need at least 1")
    if population < 2:
        raise ValueError(f"population={population}: need at least 2 candidates per generation")
    if not 0.0 < elite_frac <= 1.0:
        raise ValueError(f"elite_frac={elite_frac}: use a fraction in (0, 1], e.g. 0.25")
    return max(1, math.ceil(elite_frac * population))


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (a world that runs episodes in
    worker processes is counted once they finish)."""
    t = time.process_time()
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        t += usage.ru_utime + usage.ru_stime
    except ImportError:  # not on POSIX
        pass
    return t


def tune_cem(run_episodes: RunEpisodes | ScorePopulation, scenarios: Sequence[ScenarioParams | Job], start: IdmParams,
             generations: int, population: int, elite_frac: float, seed: int, *,
             normal: int | None = None, init_sigma: float = 0.25, charge_any_crash: bool = False,
             batched: bool = False) -> tuple[IdmParams, list[GenerationRecord]]:
    """CEM over `IdmParams`' box, started at `start`. Returns the incumbent (the best mean J seen,
    `start` included) and one `GenerationRecord` per generation. `run_episodes` plays a candidate's
    episodes, or with `batched=True` it is a `ScorePopulation` that scores a whole generation at once.
    `normal`: normal-traffic episodes in the mix (default: one per scenario); `init_sigma`: the first
    sampling width, a share of the box."""
    n_elite = _check(generations, population, elite_frac)
    score: ScorePopulation = run_episodes if batched else population_scorer(run_episodes)  # type: ignore[assignment,arg-type]
    jobs = episode_jobs(scenarios, normal, seed)
    lo, hi = IdmParams.bounds()

    def to_params(u: np.ndarray) -> IdmParams:
        return IdmParams.from_vector(lo + np.clip(u, 0.0, 1.0) * (hi - lo))

    rng = np.random.default_rng(seed)
    mu = (start.vector() - lo) / (hi - lo)
    sigma = np.full_like(mu, init_sigma)
    best, best_score = start, tuple(map(float, score([start], jobs, charge_any_crash)[0]))
    start_j = best_score[0]
    history: list[GenerationRecord] = []
    for gen in range(generations):
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        samples = np.clip(mu + sigma * rng.standard_normal((population, mu.size)), 0.0, 1.0)
        candidates = [to_params(u) for u in samples]
        scored = score(candidates, jobs, charge_any_crash)
        j = scored[:, 0]
        order = np.lexsort((-scored[:, 1], -j))[:n_elite]  # J first; equal J (a plateau): faster first
        elites = samples[order]
        mu = elites.mean(axis=0)
        sigma = np.maximum(SIGMA_KEEP * sigma + (1 - SIGMA_KEEP) * elites.std(axis=0), MIN_SIGMA)
        if tuple(scored[order[0]]) > best_score:
            best, best_score = candidates[order[0]], tuple(map(float, scored[order[0]]))
        history.append(GenerationRecord(
            generation=gen, population=population, episodes=population * len(jobs), mean_j=float(j.mean()),
            best_j=float(j[order[0]]), elite_j=float(j[order].mean()), incumbent_j=best_score[0],
            start_j=start_j, incumbent=best.model_dump(), sigma=float(sigma.mean()), cpu_s=cpu_seconds() - cpu0,
            wall_s=time.perf_counter() - wall0))
    return best, history


def planner_episode(world: Any, family: str, params: IdmParams, attack: ScenarioParams | ClosedLoopDraw | None, seed: int,
                    frames: bool = False) -> EpisodeResult:
    """One episode with the IDM/MOBIL ego of `params` driving itself in `world` (a module with
    `start_episode`)."""
    episode = world.start_episode(family, seed, attack, planner=params, frames=frames)
    try:
        while not episode.done:
            episode.step(None)
        result: EpisodeResult = episode.result().model_copy(update={"defender": "idm"})  # world: Any
        return result
    finally:
        episode.close()


def world_runner(world: Any, family: str = "highway") -> RunEpisodes:
    """`run_episodes` for `tune_cem` over a world module's `start_episode`, one episode after another."""
    def run_episodes(params: IdmParams, jobs: list[Job]) -> list[EpisodeResult]:
        return [planner_episode(world, family, params, attack, seed) for attack, seed in jobs]

    return run_episodes
