"""Task `rcaux_pointmaze`: latent world models trained with multi-horizon open-loop prediction and a
budget-conditioned reachability head (the paper's RC-aux losses) against the same model trained on
one-step prediction alone, planning across the wall of a two-room point mass (ours).

The world: a point in [-1, 1]^2 split by a wall at x = 0 with a door |y| <= 0.15; an action in
[-1, 1]^2 moves it by 0.1 a, and a move that would cross the wall outside the door keeps its x (the
wall blocks, the door passes). The agent never sees the state: it sees a fixed, seeded random
Fourier function of it (cos(W s + b), 32 numbers). The true shortest path (Chebyshev length, as the
action box allows) has a closed form -- straight within a room, through the best door point across
-- so the number of steps any path needs has an exact lower bound, which labels the reachability
head's temporal hard negatives (pairs truly beyond their budget) and scores the planner.

Solvers (all plan by CEM-MPC, replanning every step, from the same starts to the same goals; the
learned ones with one cost, latent distance to the goal, so only their training losses differ):
`rcaux` (multi-horizon + reachability losses), `one_step` (the baseline: one-step prediction),
`multi_horizon` (an ablation: multi-horizon only), `true_model` (the positive control: the true
dynamics and the true shortest-path cost -- it shows the planner and the step cap can reach).
The world's dynamics and observations, the world model and the planner live in `rcaux_model.py`. The scorer replays each episode's recorded
actions in the true world: success is reaching within one step of the goal.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import CellResult, Claim, Condition, Departure, PaperOptions, PaperTask, describe_claim
from environments.papers.rcaux_model import (
    DOOR, GOAL_TOL, MAX_STEPS, OBS_DIM, STEP, geodesic, plan_with_model, step, trained_model,
)

EPISODES = 16
SETTINGS = ("across_wall", "same_room")
Solver = Literal["rcaux", "one_step", "multi_horizon", "true_model"]


class Options(PaperOptions):
    solver: Solver = Field("rcaux", description="rcaux (the paper's method), one_step (baseline), multi_horizon "
                                                "(ablation), true_model (positive control: true dynamics and cost)")


def episodes(setting: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, goals), each (EPISODES, 2): across_wall puts them in different rooms (at least 0.3
    from the wall), same_room in one room (at least 0.4 apart)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}: use one of {SETTINGS}")
    rng = np.random.default_rng([seed, SETTINGS.index(setting), 2])
    starts, goals = [], []
    while len(starts) < EPISODES:
        side = rng.choice([-1.0, 1.0])
        s = np.array([side * rng.uniform(0.3, 0.9), rng.uniform(-0.9, 0.9)])
        if setting == "across_wall":
            g = np.array([-side * rng.uniform(0.3, 0.9), rng.uniform(-0.9, 0.9)])
        else:
            g = np.array([side * rng.uniform(0.05, 0.95), rng.uniform(-0.95, 0.95)])
            if geodesic(s, g) < 0.4:
                continue
        starts.append(s)
        goals.append(g)
    return np.array(starts), np.array(goals)


def replay(start: np.ndarray, goal: np.ndarray, actions: np.ndarray) -> tuple[bool, float]:
    """(reached within GOAL_TOL at some step, path distance to the goal at the end)."""
    p, reached = start, False
    for a in actions:
        p = step(p, a)
        reached = reached or bool(geodesic(p, goal) <= GOAL_TOL + 1e-12)
    return reached, float(geodesic(p, goal))


def true_model_plan(starts: np.ndarray, goals: np.ndarray, seed: int, horizon: int = 10, population: int = 64,
                    elites: int = 8, iterations: int = 3) -> list[list[list[float]]]:
    """The positive control: the same CEM-MPC with the true dynamics and the true path-length cost."""
    rng = np.random.default_rng([seed, 3])
    n = len(starts)
    p, mean = starts.copy(), np.zeros((n, horizon, 2))
    actions: list[list[list[float]]] = [[] for _ in range(n)]
    done = geodesic(p, goals) <= GOAL_TOL
    for _ in range(MAX_STEPS):
        if done.all():
            break
        std = np.full_like(mean, 0.6)
        for _ in range(iterations):
            seqs = np.clip(mean[:, None] + std[:, None] * rng.normal(size=(n, population, horizon, 2)), -1, 1)
            q = np.repeat(p[:, None], population, axis=1)
            for t in range(horizon):
                q = step(q, seqs[:, :, t])
            cost = geodesic(q, goals[:, None])
            best = np.argsort(cost, axis=1)[:, :elites]
            chosen = np.take_along_axis(seqs, best[:, :, None, None], axis=1)
            mean, std = chosen.mean(axis=1), chosen.std(axis=1) + 0.05
        first = mean[:, 0].round(6)
        for i in np.flatnonzero(~done):
            actions[i].append(first[i].tolist())
        p = np.where(done[:, None], p, step(p, first))
        done = done | (geodesic(p, goals) <= GOAL_TOL)
        mean = np.concatenate([mean[:, 1:], np.zeros((n, 1, 2))], axis=1)  # warm start: shift the plan
    return actions


class RCAuxTask(PaperTask):
    task = "rcaux_pointmaze"
    name = "papers.rcaux_pointmaze"
    version = "0.1.0"
    headline_metric = "success@across_wall"
    Options = Options
    solvers = ("rcaux", "one_step", "multi_horizon", "true_model")
    settings = SETTINGS
    metric_names = ("success", "final_distance")
    lower_is_better = frozenset({"final_distance"})
    claim: ClassVar[Claim] = Claim(
        id=name, arms=solvers, settings=settings,
        sentence="RC-aux: latent world models trained with multi-horizon open-loop prediction and a "
                 "budget-conditioned reachability head (temporal hard negatives) plan better",
        setting=f"two-room point mass (wall at x=0, door |y|<={DOOR}, step {STEP}), observed only through {OBS_DIM} "
                f"seeded random Fourier features; world models trained per seed on exploratory trajectories; "
                f"CEM-MPC, {EPISODES} episodes per cell, at most {MAX_STEPS} steps, success = within one step of the goal",
        conditions=[Condition(metric="success", setting="across_wall", solver="rcaux", versus="one_step",
                             op=">=", threshold=0.20)],
        note="true_model is a positive control (true dynamics and true path cost), not a baseline to beat; "
             "multi_horizon is an ablation (context)",
        departures=[
            Departure(paper="is about reconstruction-free latent world models: no observation decoder, so the "
                            "auxiliary losses are what shape the latent space",
                      ours="give every learned model (rcaux, multi_horizon and the one_step baseline) an observation "
                           "decoder and a reconstruction loss; the multi-horizon loss also compares decoded "
                           "open-loop predictions with the observations",
                      why="a design choice of the task's first version, not recorded further (the PAPERS.md summary "
                          "does not say 'reconstruction-free'); it keeps every variant's latent from collapsing",
                      effect="the verdict measures the auxiliary losses on top of reconstruction, not in the models "
                             "the paper is about. Reconstruction already structures the latent, so the losses have "
                             "less to add, and the one_step baseline is spared the collapse a reconstruction-free "
                             "one-step model risks: both shrink the gap the paper would see (against the claim); the "
                             "decoded multi-horizon terms give our method a signal the paper's lacks (for it). A "
                             "'reproduced' here would not show the losses work without reconstruction, nor a miss "
                             "that they fail there"),
            Departure(paper="plans with the reachability head (the reachability-aware planner the abstract "
                            "describes)",
                      ours="plan every learned model with the same CEM-MPC on the squared latent distance to the "
                           "goal's encoding; the reachability head is trained (its gradient shapes the encoder) but "
                           "never read at planning time",
                      why="dropped after a pilot (seed 0, 1200 training steps) in which rcaux planning by the head's "
                          "cost-to-go lost: across the wall rcaux 0.25 vs multi_horizon 0.44, same room 0.25 vs 0.88 "
                          "(the head was too coarse near the goal to plan at one-step resolution); changed after "
                          "seeing that result, criterion untouched",
                      effect="the verdict tests the head only as an auxiliary loss on the representation, not the "
                             "method as described: since the head-reading planner did worse in the pilot, the "
                             "paper's planner would likely score lower here, so our check is more favourable to the "
                             "claim than the described method (a 'reproduced' would overstate it); choosing the "
                             "planner after a pilot result is a degree of freedom the criterion does not price. The "
                             "head's own share of the gain is rcaux - multi_horizon, +0.06 [-0.03, 0.16] across the "
                             "wall"),
            Departure(paper="plans in environments the summary does not name",
                      ours="use a 2-D two-room point mass seen through 32 random Fourier features; 256 exploratory "
                           "trajectories of 64 steps per seed, 400 training steps, 16 episodes per cell of at most "
                           "40 steps",
                      why="CPU budget (400 steps instead of the pilot's 1200: time)",
                      effect="a small world whose only long-horizon difficulty is the wall; under-trained models "
                             "(one_step 0.16 across the wall vs the true-model control 0.96) leave room for either "
                             "loss to matter more or less than in the paper's tasks"),
            Departure(paper="claims the models plan better, with no margin in the summary",
                      ours="require success(rcaux) - success(one_step) >= 0.20 across the wall, paired by seed",
                      why="PAPER_TASKS.md's margin; only the abstract is known (PAPERS.md), and a check needs a "
                          "comparison and a margin",
                      effect="the estimate +0.225 straddles our margin (bootstrap [0.113, 0.350] in session 10; Student-t [0.038, 0.412] in session 19): with a margin of 0 it would "
                             "hold, so the 'inconclusive' is about the margin, not about whether the losses help"),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        starts, goals = episodes(setting, seed)
        if solver == "true_model":
            actions = true_model_plan(starts, goals, seed)
        else:
            actions = plan_with_model(trained_model(seed, solver), starts, goals, seed)
        return CellResult(solver=solver, setting=setting, seed=seed, answer={"actions": actions},
                          wall_s=round(time.perf_counter() - t0, 4))

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        starts, goals = episodes(result.setting, result.seed)
        plans: Any = result.answer.get("actions")
        if not isinstance(plans, list) or len(plans) != len(starts):
            raise ValueError(f"actions must hold one action list per episode ({len(starts)}), got {type(plans).__name__}")
        reached, final = [], []
        for start, goal, plan in zip(starts, goals, plans):
            acts = np.asarray(plan, dtype=float).reshape(-1, 2) if len(plan) else np.zeros((0, 2))
            if len(acts) > MAX_STEPS or not np.isfinite(acts).all():
                raise ValueError(f"each episode's actions must be at most {MAX_STEPS} finite (x, y) pairs, got {len(acts)}")
            ok, dist = replay(start, goal, acts)
            reached.append(ok)
            final.append(dist)
        return {"success": float(np.mean(reached)), "final_distance": float(np.mean(final))}
