"""The trained-vs-untrained closed-loop attacker comparison (`closed_loop_eval.py`), on a fake world
where the outcome is known: the defender fails exactly when the attacker brakes at its last decision."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from environments.adv0.sim.scenario import IdmParams

from environments.adv0.checks import closed_loop_eval
from environments.adv0.checks.closed_loop_eval import (
    Arm, Training, arm, arm_text, compare, evaluate, load_training, main, round_line, train,
)
from environments.adv0.sim.closed_loop import ACTIONS, ClosedLoopDraw, ClosedLoopLimits, ClosedLoopPolicy, n_features
from environments.adv0.sim.scenario import Collision, EpisodeResult
from environments.adv0.train.closed_loop_dpo import ClosedLoopConfig, ClosedLoopRoundReport

BRAKE = ACTIONS.index("keep:brake")


def fake_run(jobs: list[tuple[ClosedLoopDraw, int]]) -> list[EpisodeResult]:
    """Three decisions on fixed features; a brake at the last one is a defender-at-fault rear-end."""
    out = []
    for draw, seed in jobs:
        att = draw.attacker()
        phi, mask = np.ones(n_features(draw.policy.k, draw.policy.feature_set)), np.ones(len(ACTIONS), dtype=bool)
        for t in range(3):
            a = draw.policy.sample(phi, mask, att.rng)
            att.trajectory.t.append(float(t))
            att.trajectory.features.append(phi.tolist())
            att.trajectory.feasible.append(mask.tolist())
            att.trajectory.actions.append(ACTIONS[a])
        failed = a == BRAKE
        out.append(
            EpisodeResult(
                family="highway",
                seed=seed,
                attack=None,
                defender="idm",
                steps=3,
                duration_s=3.0,
                crashed=failed,
                collision=Collision(t=3.0, other="attacker", fault="defender", rule="test", geometry=[])
                if failed
                else None,
                ttc=[1.0],
                min_ttc=0.0 if failed else 5.0,
                near_miss=False,
                mean_speed=25.0,
                distance_m=75.0,
                reward=-1.0 if failed else 0.5,
                attacker_trajectory=att.trajectory,
            )
        )
    return out


def test_training_against_a_fixed_defender_raises_the_failure_rate_and_the_paired_interval_shows_it():
    cfg = ClosedLoopConfig(k=8, shaping=0.0, kl_max=3.0)
    attacker, reports = train(fake_run, cfg, rounds=3, contexts=8)
    assert all(r.pairs > 0 for r in reports)
    limits = ClosedLoopLimits()
    res = evaluate(fake_run, {"untrained": attacker.reference, "trained": attacker.policy}, 300, limits, 0)
    untrained, trained, (d, lo, hi) = compare(res["untrained"], res["trained"])
    assert untrained.episodes == trained.episodes == 300
    assert 0.08 < untrained.rate < 0.26  # the reference brakes with probability e^2 / sum ~ 0.17
    assert d == pytest.approx(trained.rate - untrained.rate)
    assert lo > 0 and trained.rate > untrained.rate + 0.1  # the learner found the failure and the interval says so
    assert reports[-1].dpo is not None and reports[-1].dpo.kl <= 3.0 + 1e-9


def test_the_arms_must_share_their_seeds():
    limits = ClosedLoopLimits()
    cfg = ClosedLoopConfig()
    attacker, _ = train(fake_run, cfg, rounds=1, contexts=1)
    a = evaluate(fake_run, {"x": attacker.reference}, 3, limits, 0)["x"]
    with pytest.raises(ValueError, match="same seeds"):
        compare(a, a[::-1])


def test_the_group_recipe_with_gap_features_learns_and_a_training_file_reloads(tmp_path):
    cfg = ClosedLoopConfig(k=8, shaping=0.0, kl_max=3.0, loss_norm="groups", lr=10.0, features="gaps")
    attacker, reports = train(fake_run, cfg, rounds=1, contexts=8)
    assert attacker.policy.feature_set == "gaps" and reports[0].defender_failure_share is not None
    res = evaluate(fake_run, {"untrained": attacker.reference, "trained": attacker.policy}, 300, ClosedLoopLimits(), 0)
    untrained, trained, (d, lo, hi) = compare(res["untrained"], res["trained"])
    assert lo > 0 and trained.rate > untrained.rate + 0.1  # the learner found the failure in one round
    training = Training(
        family="highway",
        defender=IdmParams(),
        config=cfg,
        rounds=1,
        contexts=8,
        rounds_report=reports,
        train_cpu_s=0.0,
        wall_s=0.0,
        policy=attacker.policy.to_state(),
    )
    path = tmp_path / "train.json"
    path.write_text(json.dumps(training.model_dump()))
    assert load_training(path).policy == attacker.policy.to_state()
    path.write_text(json.dumps({"policy": {}}))
    with pytest.raises(ValueError, match="not the --out file"):
        load_training(path)
    with pytest.raises(SystemExit):
        main(["--episodes", "0", "--policy", str(path)])


def test_hand_draws_join_every_group_and_reach_the_command_line(monkeypatch):
    cfg = ClosedLoopConfig(k=2, hand_draws=2, shaping=0.0)
    _, reports = train(fake_run, cfg, rounds=1, contexts=2)
    assert reports[0].episodes == 2 * (2 + 1 + 2)  # K policy + 1 reference + 2 hand draws per group
    # the round's failure share split by who drew: the learner's own draws apart from the off-policy ones
    split = reports[0].failures_by_draw
    assert {kind: n for kind, (_, n) in split.items()} == {"policy": 4, "reference": 2, "hand": 4}
    assert sum(f for f, _ in split.values()) == round(reports[0].defender_failure_share * reports[0].episodes)
    line = round_line(reports[0])
    assert all(f"{kind} {f}/{n}" in line for kind, (f, n) in split.items()), line
    seen: list[ClosedLoopConfig] = []

    def fake_train_only(cfg: ClosedLoopConfig, *args: object, **kwargs: object) -> SimpleNamespace:
        seen.append(cfg)
        return SimpleNamespace(wall_s=0.0, train_cpu_s=0.0)

    monkeypatch.setattr(closed_loop_eval, "train_only", fake_train_only)
    main(["--episodes", "0", "--hand-draws", "3"])
    main(["--episodes", "0"])
    main(["--episodes", "0", "--hand-draws", "2", "--hand-policy", "cut-in", "--hand-pairs", "apart", "--features", "gaps"])
    assert [(c.hand_draws, c.hand_policy, c.hand_pairs) for c in seen] == [
        (3, "steer-brake", "mixed"),
        (0, "steer-brake", "mixed"),
        (2, "cut-in", "apart"),
    ]
    with pytest.raises(SystemExit):  # the cut-in policy reads the gaps features: a usage error, not a traceback
        main(["--episodes", "0", "--hand-draws", "2", "--hand-policy", "cut-in"])
    assert len(seen) == 3


def background_on_odd_seeds(jobs: list[tuple[ClosedLoopDraw, int]]) -> list[EpisodeResult]:
    """`fake_run`, but a failure on an odd seed is a shared contact with background traffic."""
    out = fake_run(jobs)
    for r in out:
        if r.collision is not None and r.seed % 2:
            r.collision = r.collision.model_copy(update={"other": "bg:2", "fault": "shared"})
    return out


def test_the_round_line_and_the_gain_row_split_failures_by_the_other_vehicle_and_old_records_read_unknown():
    cfg = ClosedLoopConfig(k=4, hand_draws=2, shaping=0.0)
    _, reports = train(background_on_odd_seeds, cfg, rounds=1, contexts=4)  # seeds 0..3: two odd
    rep = reports[0]
    for kind, (f, _) in rep.failures_by_draw.items():
        parties = rep.parties_by_draw.get(kind, {})
        assert sum(parties.values()) == f and set(parties) <= {"attacker", "background"}
    assert sum(p.get("background", 0) for p in rep.parties_by_draw.values()) > 0
    assert sum(p.get("attacker", 0) for p in rep.parties_by_draw.values()) > 0
    line = round_line(rep)
    for kind, (f, n) in rep.failures_by_draw.items():
        p = rep.parties_by_draw.get(kind, {})
        assert (f"{kind} {f}/{n} (with the attacker {p.get('attacker', 0)} / "
                f"with background {p.get('background', 0)})") in line, line
    # a round report saved before the split: its failures are all unknown, never either side
    old = ClosedLoopRoundReport.model_validate(rep.model_dump(exclude={"parties_by_draw"}))
    f, n = old.failures_by_draw["policy"]
    assert f > 0 and f"policy {f}/{n} (with the attacker 0 / with background 0 / unknown {f})" in round_line(old)

    results = evaluate(background_on_odd_seeds, {"x": ClosedLoopPolicy.reference()}, 40, ClosedLoopLimits(), 0)["x"]
    a = arm("x", results)
    bg = sum(r.defender_failure and r.seed % 2 == 1 for r in results)
    assert a.by_party == {"attacker": a.defender_failures - bg, "background": bg, "unknown": 0} and 0 < bg
    assert "/ unknown" not in arm_text(a)
    old_arm = Arm.model_validate(a.model_dump(exclude={"by_party"}))
    assert f"(with the attacker 0 / with background 0 / unknown {a.defender_failures}; crashes" in arm_text(old_arm)
