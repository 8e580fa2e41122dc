"""The two-room world (dynamics, exact path length, observations), the reconstruction-free latent
world models and the latent CEM-MPC planners of `rcaux_pointmaze` (torch, one thread, imported only
when a model trains).

A model is an encoder (observation -> latent z), a residual latent dynamics z' = z + f(z, a) and a
reachability head R(z, z_goal, budget) -> logit of "the goal is reachable within `budget` steps".
There is no decoder: every variant is trained in latent space only (LeWM style), with an
anti-collapse regulariser on the encoder's latents -- SIGReg-style: the latents projected on random
unit directions are pushed toward a standard normal by the Epps-Pulley statistic (the distance
between their empirical characteristic function and exp(-t^2/2)), so a constant encoder is costly.
Losses: latent prediction (the predicted latent vs the encoded next observation); `one_step`
predicts each step from the encoded current observation (teacher forcing), `multi_horizon` and
`rcaux` roll the dynamics open loop for HORIZON steps from the window's first latent; `rcaux` adds
binary cross-entropy on reachability pairs: positives are pairs k <= budget apart on one trajectory
(the trajectory itself reaches), negatives are pairs -- on one trajectory (temporal hard negatives)
or across trajectories -- whose exact lower bound on steps exceeds the budget.
Training regimes: `scratch` (TRAIN_STEPS steps of the variant's losses from a fresh model) and
`continued` (a one-step model trained TRAIN_STEPS // 2 steps, then TRAIN_STEPS // 2 steps of the
variant's losses: the same total).
Observations (`obs`): `fourier` (OBS_DIM seeded random Fourier features of the state, an MLP
encoder) or `pixels` (a rendered IMAGE x IMAGE grayscale image of the maze, a small conv encoder:
`rcaux_pixels.py`); everything after the encoder is the same.
Planners: the plain one (CEM-MPC on the squared latent distance to the goal's encoding at the end of
the sequence) and the reachability-aware one (that distance plus REACH_WEIGHT x the head's
estimate of the steps still needed, sum_b (1 - sigmoid R(z_end, z_goal, b)) x (b - previous b)).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from environments.papers.rcaux_pixels import conv_encoder, render

STEP, DOOR, GOAL_TOL = 0.1, 0.15, 0.1
OBS_DIM, OBS_FREQ = 32, 2.5
MAX_STEPS = 40
LATENT, HIDDEN, HORIZON = 8, 64, 8
TRAJECTORIES, TRAJ_LEN, HOLD = 256, 64, 8
TRAIN_STEPS, BATCH, REACH_BATCH, REACH_POOL = 400, 64, 256, 20000
BUDGETS = (1, 2, 4, 8, 16, 32)
PLAN_HORIZON, POPULATION, ELITES, CEM_ITERS = 10, 64, 8, 3
VARIANTS = ("rcaux", "one_step", "multi_horizon")
REGIMES = ("scratch", "continued")
OBSERVATIONS = ("fourier", "pixels")
SIGREG_WEIGHT, SIGREG_DIRECTIONS = 1.0, 16  # the anti-collapse regulariser's weight and random directions
SIGREG_T = (-3.0, 3.0, 17)  # the Epps-Pulley quadrature grid
REACH_WEIGHT = 0.5  # the reachability-aware planner: latent distance + this x estimated steps to go


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
    candidates = np.stack(
        [py, qy, py - px, py + px, qy - qx, qy + qx, np.full_like(py, DOOR), np.full_like(py, -DOOR)], -1
    )
    y = np.clip(candidates, -DOOR, DOOR)
    through = (
        np.maximum(px[..., None], np.abs(py[..., None] - y)) + np.maximum(qx[..., None], np.abs(qy[..., None] - y))
    ).min(-1)
    same_room = (p[..., 0] < 0) == (q[..., 0] < 0)
    return np.asarray(np.where(same_room, direct, through))


def min_steps(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """A lower bound on the steps any path from p to q takes (each step moves at most STEP per axis)."""
    return np.ceil(geodesic(p, q) / STEP - 1e-9).astype(int)


def observation_map(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's fixed random Fourier features: W (OBS_DIM, 2), b (OBS_DIM,)."""
    rng = np.random.default_rng([seed, 1])
    return rng.normal(0.0, OBS_FREQ, size=(OBS_DIM, 2)), rng.uniform(0.0, 2 * np.pi, size=OBS_DIM)


def observe(p: np.ndarray, seed: int, obs: str = "fourier") -> np.ndarray:
    """What the agent sees of positions p (..., 2): (..., OBS_DIM) features or (..., IMAGE, IMAGE) images."""
    if obs == "pixels":
        return render(p, DOOR)
    if obs != "fourier":
        raise ValueError(f"unknown observation {obs!r}: use one of {OBSERVATIONS}")
    w, b = observation_map(seed)
    return np.asarray(np.cos(np.asarray(p) @ w.T + b).astype(np.float32))


def torch_single_thread() -> Any:
    import torch

    # One thread: tiny tensors, and threads fighting over 2 shared cores only slow each other.
    torch.set_num_threads(1)
    return torch


def exploration_data(seed: int, scale: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(states (N, T+1, 2), actions (N, T, 2)): uniform starts, each direction held HOLD steps with
    noise, so trajectories travel far enough to cross rooms."""
    rng = np.random.default_rng([seed, 4])
    n = TRAJECTORIES * scale
    states = np.zeros((n, TRAJ_LEN + 1, 2))
    states[:, 0] = rng.uniform(-1, 1, size=(n, 2))
    held = np.repeat(rng.uniform(-1, 1, size=(n, TRAJ_LEN // HOLD + 1, 2)), HOLD, axis=1)[:, :TRAJ_LEN]
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


def build(torch: Any, obs: str = "fourier") -> Any:
    nn = torch.nn

    def mlp(i: int, o: int) -> Any:
        return nn.Sequential(nn.Linear(i, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, HIDDEN), nn.ELU(), nn.Linear(HIDDEN, o))

    enc = conv_encoder(torch, HIDDEN, LATENT) if obs == "pixels" else mlp(OBS_DIM, LATENT)
    return nn.ModuleDict({"enc": enc, "dyn": mlp(LATENT + 2, LATENT), "reach": mlp(2 * LATENT + 1, 1)})


def advance(model: Any, z: Any, a: Any) -> Any:
    torch = torch_single_thread()
    return z + model["dyn"](torch.cat([z, a], -1))


def reach_logit(model: Any, z: Any, z_goal: Any, budget: Any) -> Any:
    torch = torch_single_thread()
    return model["reach"](torch.cat([z, z_goal, torch.log2(budget)[..., None] / 5.0], -1))[..., 0]


def sigreg(z: Any, gen: Any) -> Any:
    """Epps-Pulley distance of the latents' 1-D projections on SIGREG_DIRECTIONS random unit directions
    from N(0, 1), averaged over the directions: 0 only when every projection is standard normal, large
    for a collapsed (constant) encoder."""
    torch = torch_single_thread()
    z = z.reshape(-1, z.shape[-1])
    u = torch.randn(z.shape[-1], SIGREG_DIRECTIONS, generator=gen)
    s = z @ (u / u.norm(dim=0, keepdim=True))  # (N, M)
    t = torch.linspace(*SIGREG_T)
    ts = s[:, :, None] * t  # (N, M, T)
    gauss = torch.exp(-(t**2) / 2)
    gap = (torch.cos(ts).mean(0) - gauss) ** 2 + torch.sin(ts).mean(0) ** 2  # (M, T)
    return torch.trapezoid(gap * gauss, t, dim=-1).mean()


def prediction_loss(model: Any, obs: Any, acts: Any, open_loop: bool, gen: Any) -> Any:
    """Latent prediction error plus the anti-collapse regulariser; no decoder, no reconstruction."""
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
    return ((predicted - z[:, 1:]) ** 2).mean() + SIGREG_WEIGHT * sigreg(z, gen)


def train(model: Any, variant: str, steps: int, seed: int, data: tuple[Any, ...]) -> None:
    """`steps` Adam steps of the variant's losses on the seed's exploration data (in place)."""
    torch = torch_single_thread()
    states, obs, acts, pairs = data
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        traj = torch.randint(0, states.shape[0], (BATCH,), generator=gen)
        t0 = torch.randint(0, TRAJ_LEN - HORIZON + 1, (BATCH,), generator=gen)
        window = t0[:, None] + torch.arange(HORIZON + 1)
        loss = prediction_loss(
            model,
            obs[traj[:, None], window],
            acts[traj[:, None], window[:, :-1]],
            open_loop=variant != "one_step",
            gen=gen,
        )
        if variant == "rcaux":
            first, second, budget, label = pairs
            k = torch.randint(0, len(label), (REACH_BATCH,), generator=gen)
            za = model["enc"](obs[first[k, 0], first[k, 1]])
            zb = model["enc"](obs[second[k, 0], second[k, 1]])
            loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(
                reach_logit(model, za, zb, budget[k]), label[k]
            )
        opt.zero_grad()
        loss.backward()
        opt.step()


@lru_cache(maxsize=8)
def training_data(seed: int, scale: int = 1, obs: str = "fourier") -> tuple[Any, ...]:
    torch = torch_single_thread()
    states, actions = exploration_data(seed, scale)
    first, second, budget, label = reachability_pairs(states, seed)
    pairs = (
        torch.from_numpy(first),
        torch.from_numpy(second),
        torch.from_numpy(budget).float(),
        torch.from_numpy(label).float(),
    )
    return states, torch.from_numpy(observe(states, seed, obs)), torch.from_numpy(actions.astype(np.float32)), pairs


# Large enough to hold every model of a look (arms share them: rcaux and rcaux_plain_planner plan
# with the same model); each is ~20-50k parameters.
@lru_cache(maxsize=512)
def trained_model(seed: int, variant: str, regime: str = "scratch", scale: int = 1, obs: str = "fourier") -> Any:
    """The variant's world model trained on the seed's exploration data (seen as `obs`) under
    `regime`, then frozen (`scale` multiplies the exploration data and the training steps)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown world-model variant {variant!r}: use one of {VARIANTS}")
    if regime not in REGIMES:
        raise ValueError(f"unknown training regime {regime!r}: use one of {REGIMES}")
    if obs not in OBSERVATIONS:
        raise ValueError(f"unknown observation {obs!r}: use one of {OBSERVATIONS}")
    torch = torch_single_thread()
    data, steps = training_data(seed, scale, obs), TRAIN_STEPS * scale
    torch.manual_seed(seed)
    model = build(torch, obs)
    if regime == "scratch":
        train(model, variant, steps, seed, data)
    else:
        model.load_state_dict(pretrained_one_step(seed, scale, obs).state_dict())
        train(model, variant, steps - steps // 2, seed + 1, data)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@lru_cache(maxsize=256)
def pretrained_one_step(seed: int, scale: int = 1, obs: str = "fourier") -> Any:
    """The continuation regime's starting point: a one-step model after half the training."""
    torch = torch_single_thread()
    torch.manual_seed(seed)
    model = build(torch, obs)
    train(model, "one_step", TRAIN_STEPS * scale // 2, seed, training_data(seed, scale, obs))
    return model


def steps_to_go(model: Any, z: Any, z_goal: Any) -> Any:
    """The head's estimate of the steps from z to the goal: sum over budgets of P(not reachable
    within b) x (b - previous b), capped at the largest budget."""
    torch = torch_single_thread()
    total, previous = torch.zeros(z.shape[:-1]), 0
    for b in BUDGETS:
        total = total + (1 - torch.sigmoid(reach_logit(model, z, z_goal, torch.full(z.shape[:-1], float(b))))) * (
            b - previous
        )
        previous = b
    return total


def plan_with_model(
    model: Any, starts: np.ndarray, goals: np.ndarray, seed: int, reach_weight: float = 0.0, obs: str = "fourier"
) -> list[list[list[float]]]:
    """CEM-MPC in the model's latent space, replanning every step; the chosen actions are executed
    in the true world (rounded to 6 decimals, as recorded). The cost of a sequence is the squared
    latent distance of its end to the goal's encoding, plus `reach_weight` x the reachability head's
    steps to go from there (the reachability-aware planner; 0: the plain one). The goal is seen as
    the observations are (`obs`): as features, or as an image with the agent drawn at the goal."""
    torch = torch_single_thread()
    gen = torch.Generator().manual_seed(seed + 3)
    n = len(starts)
    p, mean = starts.copy(), torch.zeros(n, PLAN_HORIZON, 2)
    actions: list[list[list[float]]] = [[] for _ in range(n)]
    done = geodesic(p, goals) <= GOAL_TOL
    with torch.no_grad():
        z_goal = model["enc"](torch.from_numpy(observe(goals, seed, obs)))[:, None].expand(n, POPULATION, LATENT)
        for _ in range(MAX_STEPS):
            if done.all():
                break
            z0 = model["enc"](torch.from_numpy(observe(p, seed, obs)))
            std = torch.full_like(mean, 0.6)
            for _ in range(CEM_ITERS):
                seqs = (
                    mean[:, None] + std[:, None] * torch.randn(n, POPULATION, PLAN_HORIZON, 2, generator=gen)
                ).clamp(-1, 1)
                z = z0[:, None].expand(n, POPULATION, LATENT)
                for t in range(PLAN_HORIZON):
                    z = advance(model, z, seqs[:, :, t])
                score = ((z - z_goal) ** 2).sum(-1)
                if reach_weight:
                    score = score + reach_weight * steps_to_go(model, z, z_goal)
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
