"""The two-room world (dynamics, exact path length, observations), the latent world models and the
latent CEM-MPC planner of `rcaux_pointmaze` (torch, one thread, imported only when a model trains).

A model is an encoder (observation -> latent z), a residual latent dynamics z' = z + f(z, a), a
decoder (z -> observation) and, for the method, a reachability head R(z, z_goal, budget) -> logit
of "the goal is reachable within `budget` steps". Losses: reconstruction; latent prediction
(decoded prediction vs the next observation, and the predicted latent vs the encoded next one);
`one_step` predicts each step from the encoded current observation (teacher forcing), `multi_horizon`
and `rcaux` roll the dynamics open loop for HORIZON steps from the window's first observation;
`rcaux` adds binary cross-entropy on reachability pairs: positives are pairs k <= budget apart on
one trajectory (the trajectory itself reaches), negatives are pairs -- on one trajectory (temporal
hard negatives) or across trajectories -- whose exact lower bound on steps exceeds the budget.
Every learned model plans with the same CEM-MPC and the same cost (squared latent distance to the
goal's encoding at the end of the sequence), so a difference in success is the losses' doing.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

STEP, DOOR, GOAL_TOL = 0.1, 0.15, 0.1
OBS_DIM, OBS_FREQ = 32, 2.5
MAX_STEPS = 40
LATENT, HIDDEN, HORIZON = 8, 64, 8
TRAJECTORIES, TRAJ_LEN, HOLD = 256, 64, 8
TRAIN_STEPS, BATCH, REACH_BATCH, REACH_POOL = 400, 64, 256, 20000
BUDGETS = (1, 2, 4, 8, 16, 32)
PLAN_HORIZON, POPULATION, ELITES, CEM_ITERS = 10, 64, 8, 3
VARIANTS = ("rcaux", "one_step", "multi_horizon")


def step(p: np.ndarray, a: np.ndarray) -> np.ndarray:
    """The true dynamics, batched over leading axes: p (..., 2) positions, a (..., 2) actions."""
    a = np.clip(a, -1.0, 1.0)
    q = np.clip(p + STEP * a, -1.0, 1.0)
    crosses = (p[..., 0] < 0) != (q[..., 0] < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(crosses, -p[..., 0] / (q[..., 0] - p[..., 0]), 0.0)
    y_cross = p[..., 1] + t * (q[..., 1] - p[..., 1])
    blocked = crosses & (np.abs(y_cross) > DOOR)
    # Blocked: the x move is lost (the point slides along its side of the wall), the y move stays.
    return np.stack([np.where(blocked, p[..., 0], q[..., 0]), q[..., 1]], axis=-1)


def geodesic(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Shortest path length between positions in the Chebyshev metric (the action box's), through
    the door when they are in different rooms. Each room is a convex rectangle, so within a room
    the straight line is shortest; across, the length through door point (0, y) is convex and
    piecewise linear in y, so its minimum lies at one of the breakpoints tried here."""
    p, q = np.broadcast_arrays(np.asarray(p, float), np.asarray(q, float))
    direct = np.abs(p - q).max(axis=-1)
    px, py, qx, qy = (np.abs(p[..., 0]), p[..., 1], np.abs(q[..., 0]), q[..., 1])
    candidates = np.stack([py, qy, py - px, py + px, qy - qx, qy + qx, np.full_like(py, DOOR), np.full_like(py, -DOOR)], -1)
    y = np.clip(candidates, -DOOR, DOOR)
    through = (np.maximum(px[..., None], np.abs(py[..., None] - y)) + np.maximum(qx[..., None], np.abs(qy[..., None] - y))).min(-1)
    same_room = (p[..., 0] < 0) == (q[..., 0] < 0)
    return np.where(same_room, direct, through)


def min_steps(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """A lower bound on the steps any path from p to q takes (each step moves at most STEP per axis)."""
    return np.ceil(geodesic(p, q) / STEP - 1e-9).astype(int)


def observation_map(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's fixed random Fourier features: W (OBS_DIM, 2), b (OBS_DIM,)."""
    rng = np.random.default_rng([seed, 1])
    return rng.normal(0.0, OBS_FREQ, size=(OBS_DIM, 2)), rng.uniform(0.0, 2 * np.pi, size=OBS_DIM)


def observe(p: np.ndarray, seed: int) -> np.ndarray:
    w, b = observation_map(seed)
    return np.cos(np.asarray(p) @ w.T + b).astype(np.float32)


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def exploration_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(states (N, T+1, 2), actions (N, T, 2)): uniform starts, each direction held HOLD steps with
    noise, so trajectories travel far enough to cross rooms."""
    rng = np.random.default_rng([seed, 4])
    states = np.zeros((TRAJECTORIES, TRAJ_LEN + 1, 2))
    states[:, 0] = rng.uniform(-1, 1, size=(TRAJECTORIES, 2))
    held = np.repeat(rng.uniform(-1, 1, size=(TRAJECTORIES, TRAJ_LEN // HOLD + 1, 2)), HOLD, axis=1)[:, :TRAJ_LEN]
    actions = np.clip(held + 0.3 * rng.normal(size=held.shape), -1, 1)
    for t in range(TRAJ_LEN):
        states[:, t + 1] = step(states[:, t], actions[:, t])
    return states, actions


def reachability_pairs(states: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(first index (traj, t), second index (traj, u), budget, label) for REACH_POOL drawn pairs, the
    ambiguous ones (temporally beyond the budget but perhaps reachable within it) dropped."""
    rng = np.random.default_rng([seed, 5])
    n, t_len = states.shape[0], states.shape[1]
    i = rng.integers(0, n, REACH_POOL)
    j = np.where(rng.random(REACH_POOL) < 0.5, i, rng.integers(0, n, REACH_POOL))  # half temporal, half across
    t, u = rng.integers(0, t_len, REACH_POOL), rng.integers(0, t_len, REACH_POOL)
    t, u = np.minimum(t, u), np.maximum(t, u)
    budget = np.asarray(BUDGETS)[rng.integers(0, len(BUDGETS), REACH_POOL)]
    beyond = min_steps(states[i, t], states[j, u]) > budget
    positive = (i == j) & (u - t <= budget)
    keep = positive | beyond
    label = positive.astype(np.float32)
    return np.stack([i, t], 1)[keep], np.stack([j, u], 1)[keep], budget[keep], label[keep]


def build(torch: Any) -> Any:
    nn = torch.nn
    mlp = lambda i, o: nn.Sequential(nn.Linear(i, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, o))  # noqa: E731
    return nn.ModuleDict({"enc": mlp(OBS_DIM, LATENT), "dyn": mlp(LATENT + 2, LATENT), "dec": mlp(LATENT, OBS_DIM),
                          "reach": mlp(2 * LATENT + 1, 1)})


def advance(model: Any, z: Any, a: Any) -> Any:
    torch = torch_single_thread()
    return z + model["dyn"](torch.cat([z, a], -1))


def reach_logit(model: Any, z: Any, z_goal: Any, budget: Any) -> Any:
    torch = torch_single_thread()
    return model["reach"](torch.cat([z, z_goal, torch.log2(budget)[..., None] / 5.0], -1))[..., 0]


def prediction_loss(model: Any, obs: Any, acts: Any, open_loop: bool) -> Any:
    torch = torch_single_thread()
    z = model["enc"](obs)  # (B, H+1, Z)
    if open_loop:  # roll the dynamics from the window's first latent, never re-encoding
        z_hat, steps = z[:, 0], []
        for k in range(acts.shape[1]):
            z_hat = advance(model, z_hat, acts[:, k])
            steps.append(z_hat)
        predicted = torch.stack(steps, 1)
    else:  # teacher forcing: each step predicted from the encoded current observation
        predicted = advance(model, z[:, :-1], acts)
    # One decoder call on the stack: the same loss as per step, a third of the small ops.
    decoded = model["dec"](torch.cat([z, predicted], 1))
    target = torch.cat([obs, obs[:, 1:]], 1)
    return ((decoded - target) ** 2).mean() * 2 + ((predicted - z[:, 1:].detach()) ** 2).mean()


@lru_cache(maxsize=24)
def trained_model(seed: int, variant: str) -> Any:
    """The variant's world model trained on the seed's exploration data, then frozen."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown world-model variant {variant!r}: use one of {VARIANTS}")
    torch = torch_single_thread()
    states, actions = exploration_data(seed)
    obs = torch.from_numpy(observe(states, seed))
    acts = torch.from_numpy(actions.astype(np.float32))
    torch.manual_seed(seed)
    model = build(torch)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    if variant == "rcaux":
        first, second, budget, label = (torch.from_numpy(np.asarray(x)) for x in reachability_pairs(states, seed))
        budget, label = budget.float(), label.float()
    for _ in range(TRAIN_STEPS):
        traj = torch.randint(0, states.shape[0], (BATCH,), generator=gen)
        t0 = torch.randint(0, TRAJ_LEN - HORIZON + 1, (BATCH,), generator=gen)
        window = t0[:, None] + torch.arange(HORIZON + 1)
        loss = prediction_loss(model, obs[traj[:, None], window], acts[traj[:, None], window[:, :-1]],
                               open_loop=variant != "one_step")
        if variant == "rcaux":
            k = torch.randint(0, len(label), (REACH_BATCH,), generator=gen)
            za = model["enc"](obs[first[k, 0], first[k, 1]])
            zb = model["enc"](obs[second[k, 0], second[k, 1]])
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(reach_logit(model, za, zb, budget[k]), label[k])
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def plan_with_model(model: Any, starts: np.ndarray, goals: np.ndarray, seed: int) -> list[list[list[float]]]:
    """CEM-MPC in the model's latent space, replanning every step; the chosen actions are executed
    in the true world (rounded to 6 decimals, as recorded)."""
    torch = torch_single_thread()
    gen = torch.Generator().manual_seed(seed + 3)
    n = len(starts)
    p, mean = starts.copy(), torch.zeros(n, PLAN_HORIZON, 2)
    actions: list[list[list[float]]] = [[] for _ in range(n)]
    done = geodesic(p, goals) <= GOAL_TOL
    with torch.no_grad():
        z_goal = model["enc"](torch.from_numpy(observe(goals, seed)))[:, None].expand(n, POPULATION, LATENT)
        for _ in range(MAX_STEPS):
            if done.all():
                break
            z0 = model["enc"](torch.from_numpy(observe(p, seed)))
            std = torch.full_like(mean, 0.6)
            for _ in range(CEM_ITERS):
                seqs = (mean[:, None] + std[:, None] * torch.randn(n, POPULATION, PLAN_HORIZON, 2, generator=gen)).clamp(-1, 1)
                z = z0[:, None].expand(n, POPULATION, LATENT)
                for t in range(PLAN_HORIZON):
                    z = advance(model, z, seqs[:, :, t])
                score = ((z - z_goal) ** 2).sum(-1)
                best = score.argsort(dim=1)[:, :ELITES]
                chosen = torch.gather(seqs, 1, best[:, :, None, None].expand(n, ELITES, PLAN_HORIZON, 2))
                mean, std = chosen.mean(1), chosen.std(1) + 0.05
            first = mean[:, 0].double().numpy().round(6)
            for i in np.flatnonzero(~done):
                actions[i].append(first[i].tolist())
            p = np.where(done[:, None], p, step(p, first))
            done = done | (geodesic(p, goals) <= GOAL_TOL)
            mean = torch.cat([mean[:, 1:], torch.zeros(n, 1, 2)], 1)  # warm start: shift the plan
    return actions
