"""Task `rcaux_pointmaze`: reconstruction-free latent world models trained with multi-horizon
open-loop prediction and a budget-conditioned reachability head (the paper's RC-aux losses), planning
with the reachability-aware planner, against the same model trained on one-step prediction alone,
planning across the wall of a two-room point mass (ours); both from scratch and as a continuation of
a one-step model.

The world: a point in [-1, 1]^2 split by a wall at x = 0 with a door |y| <= 0.15; an action in
[-1, 1]^2 moves it by 0.1 a, and a move that would cross the wall outside the door keeps its x (the
wall blocks, the door passes). The agent never sees the state: it sees a fixed, seeded random
Fourier function of it (cos(W s + b), 32 numbers). The true shortest path (Chebyshev length, as the
action box allows) has a closed form -- straight within a room, through the best door point across
-- so the number of steps any path needs has an exact lower bound, which labels the reachability
head's temporal hard negatives (pairs truly beyond their budget) and scores the planner.

Every learned model is trained in latent space only, with an anti-collapse regulariser (no decoder).
Solvers (all plan by CEM-MPC, replanning every step, from the same starts to the same goals):
`rcaux` (the paper's method: multi-horizon + reachability losses, and the reachability-aware planner:
latent distance plus the head's steps to go), `rcaux_plain_planner` (the same model, the plain
latent-distance planner), `one_step` (the baseline: one-step prediction, plain planner),
`multi_horizon` (an ablation: multi-horizon only, plain planner), `true_model` (the positive control:
the true dynamics and the true shortest-path cost -- it shows the planner and the step cap can reach).
Settings (all across the wall, the same episodes): `scratch` (each model trained from scratch) and
`continued` (each continues a one-step model for the second half of the same step budget), seen
through the Fourier features; `pixels_scratch` and `pixels_continued`, the same two regimes seen
through a rendered 16 x 16 grayscale image of the maze (wall, door, agent) with a small conv encoder
(`rcaux_pixels.py`), the goal given to the planner as the same kind of image.
The world's dynamics and observations, the world model and the planners live in `rcaux_model.py`.
The scorer replays each episode's recorded actions in the true world: success is reaching within one
step of the goal.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from environments.papers.base import (
    CellResult,
    Claim,
    Condition,
    Departure,
    PaperOptions,
    PaperTask,
    SeedPlan,
    describe_claim,
)
from environments.papers.rcaux_model import (
    DOOR,
    GOAL_TOL,
    MAX_STEPS,
    OBS_DIM,
    OBSERVATIONS,
    REACH_WEIGHT,
    REGIMES,
    SIGREG_WEIGHT,
    STEP,
    TRAIN_STEPS,
    geodesic,
    plan_with_model,
    step,
    trained_model,
)
from environments.papers.rcaux_pixels import IMAGE

EPISODES = 16
# (observation, training regime) per setting; the episodes are shared by all, so settings pair by seed
SETTING_PARTS = {
    "scratch": ("fourier", "scratch"),
    "continued": ("fourier", "continued"),
    "pixels_scratch": ("pixels", "scratch"),
    "pixels_continued": ("pixels", "continued"),
}
SETTINGS = tuple(SETTING_PARTS)
assert {o for o, _ in SETTING_PARTS.values()} == set(OBSERVATIONS)
assert {r for _, r in SETTING_PARTS.values()} == set(REGIMES)
# The seed plan (amended 2026-12-07 after the 5-seed look of the Fourier settings: criteria_log.toml):
# stop at the first look that decides, Bonferroni over the three looks. At the 5-seed look's spreads a
# condition sitting 0.05 from its margin decides at about 40-50 seeds, hence the last look.
LOOKS = (5, 20, 50)
Solver = Literal["rcaux", "rcaux_plain_planner", "one_step", "multi_horizon", "true_model"]
# the solver's world-model variant and its planner's reachability weight
ARMS = {
    "rcaux": ("rcaux", REACH_WEIGHT),
    "rcaux_plain_planner": ("rcaux", 0.0),
    "one_step": ("one_step", 0.0),
    "multi_horizon": ("multi_horizon", 0.0),
}


class Options(PaperOptions):
    solver: Solver = Field(
        "rcaux",
        description="rcaux (the paper's method: RC-aux losses + reachability-aware "
        "planner), rcaux_plain_planner (its model, plain planner), one_step "
        "(baseline), multi_horizon (ablation), true_model (positive control)",
    )
    scale: int = Field(
        1,
        ge=1,
        le=64,
        description="multiplies the exploration data, training steps and episodes (1: the registered check's size)",
    )


def setting_parts(setting: str) -> tuple[str, str]:
    """(observation, training regime) of a setting name."""
    if setting not in SETTING_PARTS:
        raise ValueError(f"unknown setting {setting!r}: use one of {SETTINGS}")
    return SETTING_PARTS[setting]


def episodes(setting: str, seed: int, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(starts, goals), each (n or EPISODES, 2), in different rooms (at least 0.3 from the wall); the
    same in every setting (only the observation and the training differ), so the settings pair by seed."""
    setting_parts(setting)
    rng = np.random.default_rng([seed, 0, 2])
    starts: list[np.ndarray] = []
    goals: list[np.ndarray] = []
    while len(starts) < (n or EPISODES):
        side = rng.choice([-1.0, 1.0])
        starts.append(np.array([side * rng.uniform(0.3, 0.9), rng.uniform(-0.9, 0.9)]))
        goals.append(np.array([-side * rng.uniform(0.3, 0.9), rng.uniform(-0.9, 0.9)]))
    return np.array(starts), np.array(goals)


def replay(start: np.ndarray, goal: np.ndarray, actions: np.ndarray) -> tuple[bool, float]:
    """(reached within GOAL_TOL at some step, path distance to the goal at the end)."""
    p, reached = start, False
    for a in actions:
        p = step(p, a)
        reached = reached or bool(geodesic(p, goal) <= GOAL_TOL + 1e-12)
    return reached, float(geodesic(p, goal))


def true_model_plan(
    starts: np.ndarray,
    goals: np.ndarray,
    seed: int,
    horizon: int = 10,
    population: int = 64,
    elites: int = 8,
    iterations: int = 3,
) -> list[list[list[float]]]:
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


class RCAuxTask(PaperTask[Options]):
    task = "rcaux_pointmaze"
    name = "papers.rcaux_pointmaze"
    version = "0.3.0"
    headline_metric = "success@scratch"
    Options = Options
    solvers = ("rcaux", "rcaux_plain_planner", "one_step", "multi_horizon", "true_model")
    settings = SETTINGS
    metric_names = ("success", "final_distance")
    lower_is_better = frozenset({"final_distance"})
    claim: ClassVar[Claim] = Claim(
        id=name,
        arms=solvers,
        settings=settings,
        plan=SeedPlan(looks=LOOKS),
        sentence="RC-aux: a reconstruction-free latent world model trained with multi-horizon open-loop prediction "
        "and a budget-conditioned reachability head (temporal hard negatives), planning with a "
        "reachability-aware planner, plans better, both continuing a one-step model and trained from scratch",
        setting=f"two-room point mass (wall at x=0, door |y|<={DOOR}, step {STEP}), observed only through {OBS_DIM} "
        f"seeded random Fourier features (MLP encoder) or, in the pixels_ settings, a rendered {IMAGE}x{IMAGE} "
        f"grayscale image of the maze (conv encoder; the goal given as an image too); reconstruction-free world models (latent prediction + a "
        f"SIGReg-style anti-collapse term, weight {SIGREG_WEIGHT}; no decoder) trained {TRAIN_STEPS} steps per "
        f"seed on exploratory trajectories, from scratch or continuing a one-step model after "
        f"{TRAIN_STEPS // 2}; CEM-MPC (reachability-aware: + {REACH_WEIGHT} x the head's steps to go), "
        f"{EPISODES} across-the-wall episodes per cell, at most {MAX_STEPS} steps, success = within one step "
        f"of the goal",
        conditions=[
            c
            for s in SETTINGS
            for c in (
                Condition(metric="success", setting=s, solver="rcaux", versus="one_step", op=">=", threshold=0.20),
                Condition(
                    metric="success",
                    setting=s,
                    solver="rcaux_plain_planner",
                    versus="one_step",
                    op=">=",
                    threshold=0.20,
                ),
            )
        ],
        note="true_model is a positive control (true dynamics and true path cost), not a baseline to beat; "
        "multi_horizon is an ablation (context); rcaux - rcaux_plain_planner is the planner's own share",
        departures=[
            Departure(
                paper="trains LeWM-style reconstruction-free latent world models (its anti-collapse mechanism "
                "is not in the summary)",
                ours="train every learned model (rcaux, multi_horizon, one_step) in latent space only, "
                "against collapse a SIGReg-style regulariser (Epps-Pulley distance of 16 random 1-D "
                "projections of the latents from N(0, 1), weight 1, no stop-gradient); no decoder",
                why="the summary names no regulariser; SIGReg is the LeJEPA/LeWM family's, and its weight "
                "is ours, fixed before any check run",
                effect="another regulariser or weight shapes the latent differently, and the plain planner's "
                "latent distance depends on that shape: the verdict is about this regulariser",
            ),
            Departure(
                paper="plans with a reachability-aware planner (the summary does not give its cost)",
                ours="plan by CEM-MPC on squared latent distance to the goal's encoding plus 0.5 x the head's "
                "steps to go (sum over budgets 1..32 of P(not reachable within b) x the budget's width), "
                "at the plan's end; the plain planner is the same without the head term, as an arm",
                why="our reading of 'latent distance plus a reachability term'; the weight 0.5 puts a "
                "32-step estimate on the scale of an 8-dimensional unit-variance latent's distances, "
                "chosen before any run of it",
                effect="a different cost or weight could help or hurt; an earlier pilot (issue 18, with a "
                "decoder) in which planning by the head's cost-to-go alone lost is why the plain "
                "planner is kept in the criterion too",
            ),
            Departure(
                paper="plans in environments the summary does not name, from pixels in LeWM's setting",
                ours=f"use a 2-D two-room point mass seen through 32 random Fourier features, and in the "
                f"pixels_ settings through a {IMAGE}x{IMAGE} grayscale render (wall, door, the agent as an "
                "anti-aliased dot; one fixed maze, no texture or distractors) read by a 2-layer conv "
                "encoder; 256 exploratory trajectories of 64 steps per seed, 400 training steps (the "
                "continuation: 200 one-step then 200 of the variant's losses), 16 across-the-wall "
                "episodes per cell of at most 40 steps",
                why="CPU budget: the check's first look must fit about 15 minutes on 2 shared cores; "
                "LeWM-style renders are 64x64 or larger and train for 10^5+ steps on a GPU",
                effect="a small world whose only long-horizon difficulty is the wall, and an image far "
                "simpler than the paper's; under-trained models leave room for either loss to matter "
                "more or less than in the paper's tasks",
            ),
            Departure(
                paper="claims the models plan better, with no margin in the summary",
                ours="require success(arm) - success(one_step) >= 0.20 in every setting for both the "
                "reachability-aware and the plain planner, paired by seed",
                why="PAPER_TASKS.md's margin; a check needs a comparison and a margin",
                effect="an improvement below 20 points counts as not shown",
            ),
            Departure(
                paper="reports its comparisons at the paper's own number of runs",
                ours=f"plan the seeds sequentially: looks at {', '.join(map(str, LOOKS))} seeds, stopping at the "
                f"first that decides, each look's intervals at {SeedPlan(looks=LOOKS).look_level:.2%} (Bonferroni "
                "over the looks); the 5-seed look of the Fourier settings had already been seen "
                "(inconclusive) when this plan was set",
                why="at 5 seeds every condition was undecided; more seeds can only be paid for in advance",
                effect="the first look of the Fourier settings repeats a look already seen, so it spends "
                "error rate on a known outcome (conservative); one seed of the four settings costs about "
                "3 minutes of one core here, so the later looks are runs in resumable chunks or on a "
                "bigger machine (--executor ray)",
            ),
        ],
    )
    description = describe_claim(task, claim, solvers)

    def solve_cell(self, setting: str, seed: int, solver: str) -> CellResult:
        t0 = time.perf_counter()
        scale = int(self.options.scale)
        starts, goals = episodes(setting, seed, EPISODES * scale)
        if solver == "true_model":
            actions = true_model_plan(starts, goals, seed)
        else:
            variant, reach_weight = ARMS[solver]
            obs, regime = setting_parts(setting)
            model = trained_model(seed, variant, regime, scale, obs)
            actions = plan_with_model(model, starts, goals, seed, reach_weight, obs)
        return CellResult(
            solver=solver,
            setting=setting,
            seed=seed,
            answer={"actions": actions},
            wall_s=round(time.perf_counter() - t0, 4),
        )

    def score_cell(self, result: CellResult) -> dict[str, float | None]:
        starts, goals = episodes(result.setting, result.seed, EPISODES * int(self.options.scale))
        plans: Any = result.answer.get("actions")
        if not isinstance(plans, list) or len(plans) != len(starts):
            raise ValueError(
                f"actions must hold one action list per episode ({len(starts)}), got {type(plans).__name__}"
            )
        reached, final = [], []
        for start, goal, plan in zip(starts, goals, plans):
            acts = np.asarray(plan, dtype=float).reshape(-1, 2) if len(plan) else np.zeros((0, 2))
            if len(acts) > MAX_STEPS or not np.isfinite(acts).all():
                raise ValueError(
                    f"each episode's actions must be at most {MAX_STEPS} finite (x, y) pairs, got {len(acts)}"
                )
            ok, dist = replay(start, goal, acts)
            reached.append(ok)
            final.append(dist)
        return {"success": float(np.mean(reached)), "final_distance": float(np.mean(final))}
