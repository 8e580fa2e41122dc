"""rcaux_pointmaze: the wall blocks and the door passes, the path length and its step bound are
exact, the observation map is a fixed seeded random Fourier function, the reachability head's
temporal hard negatives are truly beyond their budget, the planner with the true model reaches
across the wall (the positive control), every learned arm is reconstruction-free (no decoder
parameters) in both regimes, the anti-collapse regulariser punishes collapse, the head's steps to go
is its closed form, and a tiny learned-model cell is a pure function of its seed.
The torch tests: run under `flock /tmp/harness-torch.lock`."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from environments.papers import rcaux, rcaux_model
from environments.papers.rcaux import RCAuxTask, episodes, replay
from environments.papers.rcaux_model import (
    DOOR,
    STEP,
    exploration_data,
    geodesic,
    min_steps,
    observation_map,
    observe,
    reachability_pairs,
    step,
)


def test_the_wall_blocks_and_the_door_passes():
    right = np.array([1.0, 0.0])
    assert np.allclose(step(np.array([-0.05, 0.5]), right), [-0.05, 0.5])  # blocked: x kept
    assert np.allclose(step(np.array([-0.05, 0.5]), np.array([1.0, 1.0])), [-0.05, 0.6])  # y still moves
    assert np.allclose(step(np.array([-0.05, 0.0]), right), [0.05, 0.0])  # through the door
    assert np.allclose(step(np.array([-0.05, DOOR]), right), [0.05, DOOR])  # the door's edge passes
    assert np.allclose(step(np.array([0.95, 0.95]), np.array([1.0, 1.0])), [1.0, 1.0])  # the box clips
    assert np.allclose(step(np.array([0.0, 0.0]), np.array([3.0, -3.0])), [STEP, -STEP])  # actions clip to the box
    rng = np.random.default_rng(0)
    p = rng.uniform([-0.1, -0.4], [0.1, 0.4], size=(20000, 2))  # near the wall, around the door
    a = rng.uniform(-1, 1, size=(20000, 2))
    q = step(p, a)
    switched = (p[:, 0] < 0) != (q[:, 0] < 0)
    assert np.sum(((p[:, 0] + STEP * a[:, 0] < 0) != (p[:, 0] < 0)) & ~switched) > 1000  # many moves were blocked
    y_cross = p[switched, 1] + (-p[switched, 0]) / (q[switched, 0] - p[switched, 0]) * (q[switched, 1] - p[switched, 1])
    assert switched.sum() > 1000 and np.all(np.abs(y_cross) <= DOOR + 1e-12)  # every room change went through the door
    assert np.all(np.abs(q - p) <= STEP + 1e-12)


def test_path_length_is_exact_and_bounds_the_steps_of_real_trajectories():
    rng = np.random.default_rng(1)
    p, q = rng.uniform(-1, 1, size=(300, 2)), rng.uniform(-1, 1, size=(300, 2))
    door = np.stack([np.zeros(4001), np.linspace(-DOOR, DOOR, 4001)], 1)
    for a, b in zip(p, q):
        if (a[0] < 0) == (b[0] < 0):
            assert geodesic(a, b) == pytest.approx(np.abs(a - b).max())
        else:  # brute force over the door's points
            brute = (np.abs(door - a).max(1) + np.abs(door - b).max(1)).min()
            assert geodesic(a, b) == pytest.approx(brute, abs=1e-4) and geodesic(a, b) <= brute + 1e-12
    states, _ = exploration_data(0)
    for traj in states[:40]:
        t, u = np.triu_indices(len(traj), k=1)
        assert np.all(u - t >= min_steps(traj[t], traj[u]))  # no real path beats the bound


def test_observation_map_is_a_fixed_seeded_random_fourier_function():
    p = np.array([[0.3, -0.2], [-0.7, 0.9]])
    w, b = observation_map(4)
    assert np.allclose(observe(p, 4), np.cos(p @ w.T + b), atol=1e-6)
    assert np.array_equal(observe(p, 4), observe(p, 4))
    assert not np.allclose(observe(p, 4), observe(p, 5))
    assert not np.allclose(observe(p[:1], 4), observe(p[1:], 4))


def test_temporal_hard_negatives_are_truly_beyond_their_budget():
    states, _ = exploration_data(2)
    first, second, budget, label = reachability_pairs(states, 2)
    a, b = states[first[:, 0], first[:, 1]], states[second[:, 0], second[:, 1]]
    negative, positive = label == 0, label == 1
    assert np.all(min_steps(a[negative], b[negative]) > budget[negative])
    assert np.all(first[positive, 0] == second[positive, 0])
    assert np.all(second[positive, 1] - first[positive, 1] <= budget[positive])  # the trajectory itself reaches
    temporal = negative & (first[:, 0] == second[:, 0])
    assert temporal.sum() > 100 and np.all(second[temporal, 1] - first[temporal, 1] > budget[temporal])
    assert 0.2 < positive.mean() < 0.8


def test_the_true_model_planner_reaches_across_the_wall_and_is_deterministic():
    task = RCAuxTask(RCAuxTask.Options(solver="true_model", seeds=1))
    result = task.solve_cell("scratch", 0, "true_model")
    starts, goals = episodes("scratch", 0)
    assert all(np.array_equal(a, b) for a, b in zip(episodes("continued", 0), (starts, goals)))  # paired settings
    assert np.all(np.sign(starts[:, 0]) != np.sign(goals[:, 0]))
    assert task.score_cell(result)["success"] == 1.0
    assert task.solve_cell("scratch", 0, "true_model").answer == result.answer
    idle = result.model_copy(update={"answer": {"actions": [[] for _ in starts]}})
    assert task.score_cell(idle)["success"] == 0.0  # the scorer replays; it trusts nothing else
    ok, dist = replay(starts[0], goals[0], np.asarray(result.answer["actions"][0]))
    assert ok and dist <= rcaux.GOAL_TOL + STEP


def test_bad_input_is_rejected_with_a_clear_error():
    with pytest.raises(ValidationError, match="solver"):
        RCAuxTask.Options(solver="dreamer")
    with pytest.raises(ValueError, match="unknown setting 'maze'"):
        episodes("maze", 0)
    with pytest.raises(ValueError, match="unknown training regime 'warm'"):
        rcaux_model.trained_model(0, "rcaux", "warm")
    result = RCAuxTask().solve_cell("scratch", 0, "true_model")
    with pytest.raises(ValueError, match="one action list per episode"):
        RCAuxTask().score_cell(result.model_copy(update={"answer": {"actions": [[]]}}))


def tiny(monkeypatch):
    for name, value in (("TRAIN_STEPS", 16), ("TRAJECTORIES", 16), ("REACH_POOL", 400), ("POPULATION", 16)):
        monkeypatch.setattr(rcaux_model, name, value)
    monkeypatch.setattr(rcaux, "MAX_STEPS", 4)
    monkeypatch.setattr(rcaux_model, "MAX_STEPS", 4)
    monkeypatch.setattr(rcaux, "EPISODES", 3)
    for cached in (rcaux_model.trained_model, rcaux_model.pretrained_one_step, rcaux_model.training_data):
        cached.cache_clear()


def test_every_learned_arm_is_reconstruction_free_in_both_regimes(monkeypatch):
    tiny(monkeypatch)
    try:
        for variant in rcaux_model.VARIANTS:
            for regime in rcaux_model.REGIMES:
                model = rcaux_model.trained_model(5, variant, regime)
                assert set(model) == {"enc", "dyn", "reach"}
                names = [n for n, _ in model.named_parameters()]
                assert names and not any("dec" in n for n in names)
                # no parameter maps a latent back to an observation: only the encoder reads OBS_DIM numbers
                assert [n for n, p in model.named_parameters() if rcaux_model.OBS_DIM in p.shape] == ["enc.0.weight"]
        # the continuation starts from the one-step model: its encoder moved away from that start
        start = rcaux_model.pretrained_one_step(5)["enc"][0].weight.detach()
        continued = rcaux_model.trained_model(5, "rcaux", "continued")["enc"][0].weight
        assert not np.allclose(start.numpy(), continued.numpy())
    finally:
        for cached in (rcaux_model.trained_model, rcaux_model.pretrained_one_step, rcaux_model.training_data):
            cached.cache_clear()


def test_the_anti_collapse_regulariser_punishes_collapse_and_not_a_standard_normal():
    import torch

    gen = torch.Generator().manual_seed(0)
    normal = rcaux_model.sigreg(torch.randn(4096, rcaux_model.LATENT, generator=gen), gen)
    collapsed = rcaux_model.sigreg(torch.full((4096, rcaux_model.LATENT), 0.3), gen)
    shrunk = rcaux_model.sigreg(0.1 * torch.randn(4096, rcaux_model.LATENT, generator=gen), gen)
    assert normal < 1e-3 and collapsed > 0.1 and shrunk > 0.1


def test_steps_to_go_is_the_budget_weighted_unreachable_probability():
    import torch

    class Head(torch.nn.Module):  # logit = +10 when the budget is at least `need`, else -10
        def __init__(self, need: float) -> None:
            super().__init__()
            self.need = need

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            budget = 2 ** (x[..., -1:] * 5.0)
            return torch.where(budget >= self.need, 10.0, -10.0)

    z = torch.zeros(3, rcaux_model.LATENT)
    for need, steps in ((1, 0.0), (3, 2.0), (32, 16.0), (64, 32.0)):
        value = rcaux_model.steps_to_go({"reach": Head(need)}, z, z)
        assert torch.allclose(value, torch.full((3,), steps), atol=32 * 1e-4)


def test_a_tiny_learned_model_cell_is_a_pure_function_of_its_seed(monkeypatch):
    tiny(monkeypatch)
    try:
        task = RCAuxTask()
        first = task.solve_cell("continued", 7, "rcaux")
        model = rcaux_model.trained_model(7, "rcaux", "continued")
        for cached in (rcaux_model.trained_model, rcaux_model.pretrained_one_step, rcaux_model.training_data):
            cached.cache_clear()
        assert task.solve_cell("continued", 7, "rcaux").answer == first.answer
        plain = task.solve_cell("continued", 7, "rcaux_plain_planner")
        assert plain.answer != first.answer  # the reachability term changes the plans
        assert all(len(a) == 4 for a in first.answer["actions"])
        assert set(task.score_cell(first)) == {"success", "final_distance"}
        import torch

        z = torch.randn(5, rcaux_model.LATENT)
        logit = rcaux_model.reach_logit(model, z, z, torch.full((5,), 4.0))
        assert logit.shape == (5,) and not logit.requires_grad  # the head exists, trained and frozen
        with pytest.raises(ValueError, match="unknown world-model variant"):
            rcaux_model.trained_model(7, "dreamer")
    finally:
        rcaux_model.trained_model.cache_clear()
