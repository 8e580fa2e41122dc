"""Task `bai_posterior_tracking`: best-arm identification by posterior tracking (the paper's
method: sample an instance from the posterior, draw the next arm at random from its oracle
allocation, stop by a GLR test; no forced exploration) against an ablation that C-tracks the summed
sampled allocations instead, Track-and-Stop (forced exploration), T3C and uniform sampling, on a
4-armed Bernoulli bandit (ours).

A cell is (instance, seed): `runs` independent runs of one sampling rule, advanced in lockstep,
each stopped by the GLR test at every delta at once. The solver records each run's stopping time
and recommendation per delta; the scorer recomputes the error rate and the sample-complexity ratio
E[tau] / (T*(mu) log(1/delta)) from those and the instance alone. The numerics live in
`bai_model.py`.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.bai_model import SAMPLING_RULES, oracle, run_bandit
from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim

INSTANCES = {"four_arms": (0.7, 0.5, 0.4, 0.3)}
DELTAS = (0.1, 0.01, 0.001)
TAGS = tuple(f"d{d:.0e}".replace("e-0", "e-") for d in DELTAS)  # d1e-1, d1e-2, d1e-3
HORIZON = 20_000
Solver = Literal["posterior_tracking", "posterior_c_tracking", "track_and_stop", "t3c", "uniform"]


class Options(PaperOptions):
    solver: Solver = Field(
        "posterior_tracking",
        description="posterior_tracking (the paper's method: an arm drawn from the sampled instance's "
        "oracle allocation), posterior_c_tracking (ablation: C-tracking of the "
        "summed sampled allocations), track_and_stop, t3c, uniform (baselines)",
    )
    runs: int = Field(100, ge=1, le=2000, description="independent bandit runs per (instance, seed) cell")


def instance(setting: str) -> np.ndarray:
    return np.array(INSTANCES[setting])


def characteristic_time(mu: np.ndarray) -> float:
    """T*(mu), solved to round-off (the scorer's reference, not the solvers' per-step call)."""
    return float(oracle(mu, outer=40, inner=4)[1][0])


class BAITrackingTask(PaperTask[Options]):
    task = "bai_posterior_tracking"
    name = "papers.bai_posterior_tracking"
    version = "0.2.0"
    headline_metric = "ratio_d1e-3@four_arms"
    Options = Options
    solvers = SAMPLING_RULES
    settings = tuple(INSTANCES)
    metric_names = (
        tuple(f"ratio_{t}" for t in TAGS[::-1])
        + tuple(f"error_{t}" for t in TAGS)
        + ("log_ratio_d1e-3", "ratio_drop", "truncated")
    )
    lower_is_better = frozenset(n for n in metric_names if n.startswith(("ratio_d", "error_", "log_ratio")))
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        sentence="posterior tracking (sample an instance from the posterior, play its oracle allocation, stop by "
        "a GLR test) is delta-correct and asymptotically optimal with no forced exploration",
        setting="Bernoulli arms mu = (.7, .5, .4, .3) (T* = 57.8); per cell 100 runs (option `runs`) of each "
        "sampling rule on shared reward stacks; GLR stopping with beta(t, delta) = log((1 + log t) / "
        "delta) at delta = .1, .01, .001 on the same sample path; Beta(1, 1) posterior; the next arm drawn "
        "from the sampled instance's oracle allocation (the method), C-tracking of the summed sampled "
        "oracle weights (ablation), D-tracking with forced exploration (Track-and-Stop), T3C with "
        "beta = 1/2, round robin",
        conditions=[
            Condition(metric=f"error_{t}", setting="four_arms", solver="posterior_tracking", op="<=", threshold=d)
            for t, d in zip(TAGS, DELTAS)
        ]
        + [
            Condition(metric="ratio_drop", setting="four_arms", solver="posterior_tracking", op=">=", threshold=0.0),
            Condition(
                metric="log_ratio_d1e-3",
                setting="four_arms",
                solver="posterior_tracking",
                versus="track_and_stop",
                op="<=",
                threshold=math.log(1.1),
            ),
        ],
        note="ratio = E[tau] / (T* log(1/delta)); ratio_drop = ratio at .1 minus ratio at .001 (falls toward 1); "
        "log_ratio(PT) - log_ratio(TaS) <= log 1.1 is 'within 10% of Track-and-Stop at delta = .001'",
        departures=[
            Departure(
                paper="proves delta-correctness and asymptotic optimality for general instances",
                ours="checks one 4-armed Bernoulli instance at delta = .1, .01, .001 with 100 runs per cell",
                why="a finite check of an asymptotic theorem on this machine's budget",
                effect="asymptotic optimality is read from the ratio's fall toward 1 and a 10% margin to "
                "Track-and-Stop at delta = .001 (ours); far from the asymptote the method may lose "
                "without the theorem being wrong",
            ),
            Departure(
                paper="states its GLR threshold for the theory",
                ours="uses beta(t, delta) = log((1 + log t) / delta), a common practical threshold",
                why="the theoretical thresholds are very conservative at these deltas",
                effect="error rates are measured, not guaranteed; a violation would still be a real miss",
            ),
            Departure(
                paper="compares with its own baselines",
                ours="compares with Track-and-Stop (D-tracking, forced exploration), T3C and uniform sampling",
                why="the standard baselines of the literature, available without the paper's code",
                effect="a stronger or weaker baseline set changes the 10% condition only",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        tau, rec = run_bandit(instance(setting), DELTAS, int(self.options.runs), seed, solver, HORIZON)
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            wall_s=round(time.perf_counter() - t0, 4),
            answer={"deltas": list(DELTAS), "tau": tau.tolist(), "recommended": rec.tolist()},
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        mu = instance(result.setting)
        tau, rec = np.asarray(result.answer["tau"]), np.asarray(result.answer["recommended"])
        runs = int(self.options.runs)
        if tau.shape != (runs, len(DELTAS)) or rec.shape != tau.shape or (tau < len(mu)).any():
            raise ValueError(
                f"answer must hold {runs} runs x {len(DELTAS)} deltas of stop times >= {len(mu)}; "
                f"got tau {tau.shape}, recommended {rec.shape}"
            )
        t_star = characteristic_time(mu)
        ratios = tau.mean(axis=0) / (t_star * np.log(1 / np.asarray(DELTAS)))
        errors = (rec != int(mu.argmax())).mean(axis=0)
        scores: dict[str, float | None] = {f"ratio_{t}": float(r) for t, r in zip(TAGS, ratios)}
        scores.update({f"error_{t}": float(e) for t, e in zip(TAGS, errors)})
        scores.update(
            {
                "log_ratio_d1e-3": float(np.log(ratios[-1])),
                "ratio_drop": float(ratios[0] - ratios[-1]),
                "truncated": float((tau >= HORIZON).mean()),
            }
        )
        return scores
