"""Iterative preference learning on closed-loop attacker trajectories (`closed_loop_dpo.py`), its exact
check on the enumerable toy game (`toy_game.py`), and the min-max loop with `attacker=closed_loop`
against the planner and the DQN on highway-env at the smallest size."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from environments.adv0.checks import toy_game
from environments.adv0.commands import adv0_app
from environments.adv0.sim.closed_loop import ACTIONS, ClosedLoopPolicy, ClosedLoopDraw, n_features, step_kl
from environments.adv0.sim.hand_policies import cut_in, steer_brake
from environments.adv0.sim.scenario import AttackerTrajectory, Collision, EpisodeResult
from environments.adv0.train import loop
from environments.adv0.train.attacker import utility
from environments.adv0.train.closed_loop_dpo import (
    ClosedLoopAdv0,
    ClosedLoopConfig,
    StepBatch,
    pair_weights,
    trajectory_dpo,
    trajectory_pairs,
)
from environments.adv0.train.dpo import preference_loss


def random_policy(rng: np.random.Generator, k: int = 1) -> ClosedLoopPolicy:
    return ClosedLoopPolicy(rng.normal(size=(len(ACTIONS), n_features(k))), rng.normal(size=len(ACTIONS)), k)


def random_trajectory(rng: np.random.Generator, policy: ClosedLoopPolicy, steps: int) -> AttackerTrajectory:
    tr = AttackerTrajectory(policy="closed_loop")
    for t in range(steps):
        phi = rng.normal(size=n_features(policy.k, policy.feature_set))
        mask = rng.random(len(ACTIONS)) < 0.6
        mask[4] = True
        tr.t.append(float(t))
        tr.features.append(phi.tolist())
        tr.feasible.append(mask.tolist())
        tr.actions.append(ACTIONS[policy.sample(phi, mask, rng)])
    return tr


def test_the_step_batch_is_the_policys_own_log_probs_gradient_and_kl():
    rng = np.random.default_rng(0)
    q, p = random_policy(rng), random_policy(rng)
    trajs = [random_trajectory(rng, q, n) for n in (3, 0, 5)]
    batch = StepBatch(trajs)
    assert np.allclose(batch.log_probs(q), [q.log_prob(t) for t in trajs])
    coef = np.array([0.7, -2.0, -0.3])
    assert np.allclose(batch.grad(q, coef), sum(c * q.grad_log_prob(t) for c, t in zip(coef, trajs)))
    one = trajs[2]
    phi, mask = np.array(one.features), np.array(one.feasible)
    direct = []
    for f, m in zip(phi, mask):
        lq, lp = q.log_probs(f, m), p.log_probs(f, m)
        direct.append(sum(np.exp(lq[a]) * (lq[a] - lp[a]) for a in np.flatnonzero(m)))
    assert np.allclose(step_kl(q, p, phi, mask), direct)
    assert batch.kl(q, p, np.array([False, False, True])) == pytest.approx(sum(direct))
    assert batch.kl(q, q) == pytest.approx(0.0, abs=1e-12)


def crash_result(seed: int, fault: str, trajectory: AttackerTrajectory) -> EpisodeResult:
    """A crash at 25 m/s: J = -1 when the defender is at fault, else its progress 0.5 (not charged)."""
    collision = Collision(t=3.0, other="attacker", fault=fault, rule="test", geometry=[])
    return EpisodeResult(
        family="highway",
        seed=seed,
        attack=None,
        defender="idm",
        steps=4,
        duration_s=4.0,
        crashed=True,
        collision=collision,
        ttc=[1.0],
        min_ttc=0.0,
        near_miss=False,
        mean_speed=25.0,
        distance_m=100.0,
        reward=-1.0 if fault == "defender" else 0.5,
        attacker_trajectory=trajectory,
    )


def test_the_per_group_loss_is_the_pair_mean_for_one_group_and_weighs_groups_equally():
    rng = np.random.default_rng(8)
    q = random_policy(rng)
    trajs = [random_trajectory(rng, q, 4) for _ in range(7)]
    u = rng.normal(size=7)
    u[2] = -np.inf  # an attacker-at-fault trajectory: it loses every pair
    one = trajectory_pairs([(trajs, u)])
    batch = StepBatch(trajs)
    assert pair_weights(one, "groups") == pytest.approx(pair_weights(one, "pairs"))
    runs = {
        norm: trajectory_dpo(
            q, ClosedLoopPolicy.reference(k=1), batch, one, 0.1, 5, 3.0, weights=pair_weights(one, norm)
        )
        for norm in ("pairs", "groups")
    }
    assert np.allclose(runs["pairs"][0].theta, runs["groups"][0].theta)
    assert runs["pairs"][1].loss_start == pytest.approx(runs["groups"][1].loss_start)
    # Two groups of 7 and 3 trajectories: each group's weights sum to 1 (the loss sums the group means).
    two = trajectory_pairs([(trajs, u), (trajs[:3], np.array([0.1, 0.5, 0.2]))])
    w = pair_weights(two, "groups")
    assert [w[two.ctx == g].sum() for g in (0, 1)] == pytest.approx([1.0, 1.0])
    assert w.sum() == pytest.approx(2.0) and pair_weights(two, "pairs").sum() == pytest.approx(1.0)
    diff = rng.normal(size=len(two))
    loss, grad = preference_loss(diff, two.target, 0.1, w)
    per_group = [preference_loss(diff[two.ctx == g], two.target[two.ctx == g], 0.1)[0] for g in (0, 1)]
    assert loss == pytest.approx(sum(per_group))
    eps = 1e-6
    bumped = preference_loss(diff + eps * (np.arange(len(two)) == 3), two.target, 0.1, w)[0]
    assert (bumped - loss) / eps == pytest.approx(grad[3], rel=1e-4)
    with pytest.raises(ValueError, match="loss_norm='each'"):
        pair_weights(two, "each")  # type: ignore[arg-type]


def test_a_tempered_round_draws_from_pi_to_the_one_over_t_and_reference_draws_stay_the_reference():
    rng = np.random.default_rng(2)
    policy = random_policy(rng)
    att = ClosedLoopAdv0(ClosedLoopConfig(k=3, sample_temperature=2.0), policy=policy, reference=policy)
    draws = att.propose(np.zeros(0), np.random.default_rng(0))
    assert [d.reference for d in draws] == [False, False, False, True]
    assert all(np.allclose(d.policy.theta, policy.theta / 2) for d in draws[:3])
    assert np.array_equal(draws[3].policy.theta, policy.theta)
    assert all(
        np.array_equal(d.policy.theta, policy.theta) for d in att.draw(np.zeros(0), rng, 2)
    )  # evaluation: untempered
    gaps = ClosedLoopAdv0(ClosedLoopConfig(features="gaps"))
    assert gaps.policy.feature_set == gaps.reference.feature_set == "gaps"


def test_hand_draws_join_the_group_and_its_pairs_but_not_the_kl_and_the_knob_persists():
    att = ClosedLoopAdv0(ClosedLoopConfig(k=3, hand_draws=2, shaping=0.0, dpo_steps=3, lr=0.5))
    draws = att.propose(np.zeros(0), np.random.default_rng(0))
    assert [(d.reference, d.hand) for d in draws] == [(False, False)] * 3 + [(True, False)] + [(False, True)] * 2
    hand = steer_brake(att.reference.k, att.reference.feature_set)  # the default hand policy
    assert all(np.array_equal(d.policy.theta, hand.theta) for d in draws[4:])
    assert not np.array_equal(hand.theta, att.reference.theta)
    plain = ClosedLoopAdv0(ClosedLoopConfig(k=3)).propose(np.zeros(0), np.random.default_rng(0))
    assert [d.seed for d in draws[:4]] == [d.seed for d in plain]  # hand draws leave the others' seeds alone
    # Played on random states: the policy and reference draws crash by their own fault, the hand ones
    # make the defender crash, so every pair is won by a hand draw.
    rng = np.random.default_rng(1)
    results = []
    for d in draws:
        tr = random_trajectory(rng, d.policy, 4)
        tr.policy = d.attacker().trajectory.policy
        results.append(crash_result(7, "defender" if d.hand else "attacker", tr))
    assert [r.attacker_trajectory.policy for r in results if r.attacker_trajectory] == (
        ["closed_loop"] * 3 + ["closed_loop_reference"] + ["closed_loop_hand"] * 2
    )
    trajs = [r.attacker_trajectory for r in results if r.attacker_trajectory]
    pairs = trajectory_pairs([(trajs, np.array([utility(r, 0.0) for r in results]))])
    # 2 hand winners x 4 voided losers at target 1, and the two hand draws' tie at 0.5
    assert len(pairs) == 9 and set(pairs.win[:, 0].tolist()) == {4, 5} and (pairs.target == 1.0).sum() == 8
    report = att.update(results, {})
    assert report.episodes == 6 and report.pairs == 9 and report.dpo is not None and report.dpo.steps == 3
    # The KL estimate reads the learner's three draws only (the hand and reference ones are off-policy).
    batch = StepBatch(trajs)
    own = np.array([True] * 3 + [False] * 3)
    assert report.dpo.kl == pytest.approx(batch.kl(att.policy, att.reference, own))
    counting_hand = np.array([True] * 3 + [False] + [True] * 2)  # what the estimate would be with them in
    assert report.dpo.kl != pytest.approx(batch.kl(att.policy, att.reference, counting_hand))
    # The knob survives a state round trip; a state saved before it existed loads with none.
    assert ClosedLoopAdv0.from_state(json.loads(json.dumps(att.state()))).config.hand_draws == 2
    old = att.state()
    old["config"] = {key: v for key, v in old["config"].items() if key != "hand_draws"}
    assert ClosedLoopAdv0.from_state(old).config.hand_draws == 0
    # A state saved before session 28 (no hand policy, no hand pairs) loads with today's defaults.
    old["config"] = {key: v for key, v in old["config"].items() if key not in ("hand_policy", "hand_pairs")}
    assert (ClosedLoopAdv0.from_state(old).config.hand_policy, ClosedLoopAdv0.from_state(old).config.hand_pairs) == (
        "steer-brake",
        "mixed",
    )
    with pytest.raises(ValueError, match="one behaviour policy"):
        ClosedLoopDraw(hand, att.limits, 0, (1,), reference=True, hand=True)


def test_the_fault_gate_ranks_an_attacker_at_fault_crash_below_a_defender_at_fault_one():
    rng = np.random.default_rng(3)
    policy = ClosedLoopPolicy.reference(k=1)
    mine, theirs = (random_trajectory(rng, policy, 4) for _ in range(2))
    while theirs.actions == mine.actions:
        theirs = random_trajectory(rng, policy, 4)
    at_fault, not_at_fault = crash_result(7, "attacker", mine), crash_result(7, "defender", theirs)
    u = np.array([utility(r) for r in (at_fault, not_at_fault)])
    assert u[0] == -np.inf and u[1] == 1.0
    pairs = trajectory_pairs([([mine, theirs], u)])
    assert len(pairs) == 1 and (pairs.win[0, 0], pairs.lose[0, 0], pairs.target[0]) == (1, 0, 1.0)
    attacker = ClosedLoopAdv0(
        ClosedLoopConfig(shaping=0.0, dpo_steps=5, lr=0.5, reference_draws=0), policy=policy, reference=policy
    )
    before = policy.log_prob(theirs) - policy.log_prob(mine)
    report = attacker.update([at_fault, not_at_fault], {})
    assert report.pairs == 1 and report.infeasible_share == 0.5 and report.dpo is not None and report.dpo.steps == 5
    assert report.defender_failure_share == 0.5  # the defender-at-fault crash, of two rollouts
    assert attacker.policy.log_prob(theirs) - attacker.policy.log_prob(mine) > before  # the update follows the gate
    # Without the gate (the ablation) every crash is charged to the defender: a tie, nothing voided.
    assert utility(at_fault, fault_gate=False) == utility(not_at_fault, fault_gate=False) == 1.0
    ungated = ClosedLoopAdv0(
        ClosedLoopConfig(shaping=0.0, fault_gate=False, dpo_steps=1, reference_draws=0), policy=policy, reference=policy
    )
    assert ungated.update([at_fault, not_at_fault], {}).infeasible_share == 0.0
    # Identical action sequences on one seed are one trajectory: no pair.
    assert len(trajectory_pairs([([mine, mine], np.array([0.0, 1.0]))])) == 0


def test_preference_learning_on_the_toy_game_moves_towards_the_exact_optimum_within_the_kl_bound():
    spec = toy_game.GameSpec()
    ref = toy_game.table_of(toy_game.reference_policy(), spec)
    opt, v0 = toy_game.soft_optimal(spec, ref)
    best = toy_game.best_response(spec)
    e_ref, e_opt = toy_game.evaluate(ref, spec, ref, best), toy_game.evaluate(opt, spec, ref, best)
    # pi* is the regularised optimum: it beats the reference and the best response on E[u] - tau KL.
    e_best = toy_game.evaluate(best, spec, ref, best)
    value = lambda e: e.utility - spec.tau * e.kl  # noqa: E731
    assert value(e_opt) > value(e_ref) and value(e_opt) > value(e_best)
    assert value(e_opt) == pytest.approx(float(v0[spec.start_gap - 1].mean()), abs=1e-9)
    # The best reactive strategy: brake when the ego accelerated into a gap of 2, never brake at a gap of 1.
    assert best[0, 1, toy_game.MOVES.index("accelerate"), toy_game.MOVES.index("brake")] == 1.0
    assert best[:, 0, :, toy_game.MOVES.index("brake")].max() == 0.0

    kl_max = 0.05
    cfg = ClosedLoopConfig(tau=spec.tau, k=8, shaping=0.0, kl_max=kl_max, lr=2.0, dpo_steps=10)
    attacker, evals, reports = toy_game.train(spec, rounds=4, contexts=16, config=cfg)
    learned = toy_game.table_of(attacker.policy, spec)
    e_learned = toy_game.evaluate(learned, spec, opt, best)
    assert e_learned.best_response_mass > evals[0].best_response_mass + 0.005
    assert e_learned.utility > e_ref.utility + 0.05
    assert e_learned.kl < 0.6 * toy_game.evaluate(ref, spec, opt).kl  # closer to pi* than the reference is
    key = (0, 1, toy_game.MOVES.index("accelerate"), toy_game.MOVES.index("brake"))
    assert learned[key] > ref[key]  # more mass on braking exactly where it pays
    # The bound was active (steps halved or a round stopped), and the exact trajectory KL stayed within it.
    assert any(r.dpo is not None and (r.dpo.backtracks or r.dpo.kl_stopped) for r in reports)
    assert all(r.dpo is not None and r.dpo.kl <= kl_max for r in reports)
    assert max(e.kl for e in evals) <= kl_max


def test_closed_loop_config_errors_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="--attacker closed_loop needs --family highway"):
        loop.LoopConfig(attacker="closed_loop", family="toy")
    with pytest.raises(ValueError, match="does not apply to --attacker closed_loop"):
        loop.LoopConfig(attacker="closed_loop", ablation="avoidable")
    for args, needle in (
        (["--family", "toy"], "--attacker closed_loop needs --family highway"),
        (["--ablation", "avoidable"], "--ablation avoidable does not apply to --attacker closed_loop"),
    ):
        result = CliRunner().invoke(adv0_app, ["train", "--attacker", "closed_loop", *args, "--run-dir", str(tmp_path)])
        text = " ".join(result.output.split())
        assert result.exit_code == 2 and needle in text and "Traceback" not in text
    assert not list(tmp_path.glob("adv0-train/*"))


SMALLEST = dict(
    attacker="closed_loop",
    family="highway",
    rounds=1,
    episodes=1,
    held_out_episodes=0,
    contexts=1,
    k=2,
    scenarios=1,
    cem_generations=1,
    cem_population=2,
)


def check_round(cfg: loop.LoopConfig, folder) -> None:
    state = loop.load_round(folder, 1)
    report = state.attacker_report
    assert report["attacker"] == "closed_loop" and report["rollouts"] == cfg.contexts * (cfg.k + 1)
    assert report["episodes"] == report["rollouts"] and report["dpo"] is not None
    assert report["dpo"]["kl"] <= ClosedLoopConfig().kl_max
    attacked = [r for r in state.rows if r.split == "attack"]
    assert attacked and all(r.attacked and r.manoeuvre == "closed_loop" for r in attacked)
    # The round's attacker file is a policy file suite adv0 reads (attacker_state=...), and a resumed
    # attacker is the same policy.
    saved = json.loads((folder / "rounds" / "0001" / "attacker.json").read_text())
    policy = ClosedLoopPolicy.from_state(saved)
    assert np.array_equal(policy.theta, loop.make_attacker(cfg, state.attacker).option.policy.theta)
    # It learned, unless every trajectory of the group tied (a tie's soft target 0.5 has no gradient at p0).
    learned = not np.array_equal(policy.theta, ClosedLoopPolicy.reference().theta)
    assert learned or report["dpo"]["loss_end"] == pytest.approx(np.log(2))
    draw = loop.make_attacker(cfg, state.attacker).draw(np.zeros(1), np.random.default_rng(0))
    assert isinstance(draw, ClosedLoopDraw) and not draw.reference


@pytest.mark.slow
def test_one_min_max_round_with_the_closed_loop_attacker_against_the_planner(tmp_path):
    cfg = loop.LoopConfig(defender="idm", **SMALLEST)
    _, folder = loop.start_run(cfg, tmp_path)
    assert loop.train(cfg, folder) == [1]
    check_round(cfg, folder)
    assert loop.load_round(folder, 1).defender_report["generations"]


@pytest.mark.slow
def test_one_min_max_round_with_the_closed_loop_attacker_against_the_dqn(tmp_path, monkeypatch):
    """Tiny (run under `flock /tmp/harness-torch.lock`): a 100-step DQN, fine-tuned 40 steps, half of its
    episodes against the closed-loop attacker's draws."""
    from environments.adv0.train import dqn

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    checkpoint = dqn.build_checkpoint(100, seed=2)
    cfg = loop.LoopConfig(defender="dqn", dqn_steps=40, dqn_ratio=1.0, dqn_checkpoint=str(checkpoint), **SMALLEST)
    _, folder = loop.start_run(cfg, tmp_path / "runs")
    assert loop.train(cfg, folder) == [1]
    check_round(cfg, folder)
    state = loop.load_round(folder, 1)
    assert state.defender_report["steps"] == 40 and (folder / "rounds" / "0001" / "dqn.zip").is_file()


NO_CRASH = {"crashed": False, "collision": None, "reward": 0.5}  # an episode nobody crashed in: J 0.5


def test_cut_in_hand_draws_with_pairs_apart_never_pair_across_and_the_kl_stays_the_learners():
    cfg = ClosedLoopConfig(
        k=3, hand_draws=2, hand_policy="cut-in", hand_pairs="apart", features="gaps", shaping=0.0, dpo_steps=3, lr=0.5
    )
    att = ClosedLoopAdv0(cfg)
    draws = att.propose(np.zeros(0), np.random.default_rng(0))
    assert all(np.array_equal(d.policy.theta, cut_in(att.reference.k).theta) for d in draws if d.hand)
    # Two groups; in each the hand draws crash by their own fault or make the defender crash, the
    # learner's and reference draws do not crash (utility = progress 0.5) except one voided draw.
    rng = np.random.default_rng(2)
    results = []
    for seed in (7, 8):
        for i, d in enumerate(draws):
            tr = random_trajectory(rng, d.policy, 4)
            tr.policy = d.attacker().trajectory.policy
            if d.hand:
                results.append(crash_result(seed, "defender" if i == 4 else "attacker", tr))
            elif i == 0:
                results.append(crash_result(seed, "attacker", tr))
            else:
                results.append(crash_result(seed, "defender", tr).model_copy(update=NO_CRASH))
    trajs = [r.attacker_trajectory for r in results if r.attacker_trajectory]
    groups = [(trajs[g * 6 : g * 6 + 6], np.array([utility(r, 0.0) for r in results[g * 6 : g * 6 + 6]])) for g in (0, 1)]
    mixed, apart = trajectory_pairs(groups), trajectory_pairs(groups, hand_apart=True)
    hand = np.array([tr.policy == "closed_loop_hand" for tr in trajs])
    # Mixed: the voided hand draw loses to all 4 feasible others, the defender-failure hand draw wins 4 pairs.
    assert (hand[mixed.win[:, 0]] != hand[mixed.lose[:, 0]]).any()
    # Apart: no pair crosses; in each group the hand part is one pair (failure over voided) and the
    # learner part pairs the voided draw 0 with 1-3 (3 pairs) and 1-3 among themselves (3 ties at 0.5).
    assert not (hand[apart.win[:, 0]] != hand[apart.lose[:, 0]]).any()
    assert len(apart) == 2 * (1 + 3 + 3) and sorted(set(apart.ctx.tolist())) == [0, 1, 2, 3]
    assert np.bincount(apart.ctx).tolist() == [6, 1, 6, 1]  # each part its own group for loss_norm "groups"
    weights = pair_weights(apart, "groups")
    assert np.bincount(apart.ctx, weights=weights) == pytest.approx([1.0] * 4)
    # The round: the pairs apart, and the KL estimate over the learner's own draws (3 of 6 per group) only.
    report = att.update(results, {})
    assert report.pairs == len(apart) and report.dpo is not None and report.dpo.steps == 3
    own = np.array(([True] * 3 + [False] * 3) * 2)
    assert report.dpo.kl == pytest.approx(StepBatch(trajs).kl(att.policy, att.reference, own))
    back = ClosedLoopAdv0.from_state(json.loads(json.dumps(att.state())))
    assert (back.config.hand_policy, back.config.hand_pairs) == ("cut-in", "apart")
