"""The ADV-0 defenders: CEM tuning of the IDM/MOBIL planner (`planner.py`) and the DQN's gym
wrapper, checkpoint and greedy defender (`dqn.py`).

CEM first on a synthetic objective with a known optimum (our own logic: convergence, the box,
determinism, common random numbers, bad input), then on a real world: tuning improves J over the
under-cautious start and never ends at "always brake". The DQN wrapper's rewards sum to the
episode's J, its episodes follow its seed, and a missing checkpoint names the command that builds it.
"""

from __future__ import annotations

import numpy as np
import pytest

from environments.adv0.sim.scenario import EpisodeResult, IdmParams, ScenarioParams
from environments.adv0.train import planner

LO, HI = IdmParams.bounds()
TARGET = np.array([0.7, 0.3, 0.5, 0.6, 0.2, 0.1, 0.8])  # the synthetic optimum, as shares of the box
ATTACK = ScenarioParams(slot=0, manoeuvre="cut_in_brake", trigger_s=2.0, intensity=1.0, hold_s=1.0, gap_m=10.0)


def synthetic(calls: list | None = None):
    """run_episodes whose J peaks at TARGET; attacked episodes lose 0.2; per-seed noise is fixed."""
    def run(params: IdmParams, jobs):
        u = (params.vector() - LO) / (HI - LO)
        if calls is not None:
            calls.append((params, list(jobs)))
        out = []
        for attack, seed in jobs:
            noise = np.random.default_rng(seed).normal(0, 0.01)
            j = 1.0 - float(np.sum((u - TARGET) ** 2)) - 0.2 * (attack is not None) + noise
            out.append(EpisodeResult(family="toy", seed=seed, attack=attack, defender="idm", steps=1, duration_s=1.0,
                                     crashed=False, reward=j))
        return out

    return run


def test_cem_finds_the_optimum_inside_the_box():
    best, history = planner.tune_cem(synthetic(), [ATTACK] * 2, IdmParams(), generations=12, population=16,
                                     elite_frac=0.25, seed=3)
    u = (best.vector() - LO) / (HI - LO)
    assert np.max(np.abs(u - TARGET)) < 0.1, u
    assert len(history) == 12 and history[-1].incumbent_j == max(h.best_j for h in history)
    assert history[-1].incumbent == best.model_dump()
    assert history[-1].mean_j > history[0].mean_j  # the population moved towards the optimum
    assert all(h.episodes == 16 * 4 and h.cpu_s >= 0 and h.wall_s > 0 for h in history)


def test_cem_stays_in_the_box_uses_common_episodes_and_keeps_the_start_if_nothing_beats_it():
    calls: list = []
    start = IdmParams.from_vector(LO + TARGET * (HI - LO))  # already optimal
    best, _ = planner.tune_cem(synthetic(calls), [ATTACK, (None, 99)], start, generations=3, population=6,
                               elite_frac=0.5, seed=0, normal=1, init_sigma=2.0)  # huge steps: clipping matters
    assert all(np.all(p.vector() >= LO) and np.all(p.vector() <= HI) for p, _ in calls)
    assert {tuple(map(str, jobs)) for _, jobs in calls} == {tuple(map(str, calls[0][1]))}  # the same episodes
    assert calls[0][1] == [(ATTACK, 0), (None, 99), (None, 2)]
    assert best == start


def test_cem_is_deterministic_for_a_seed():
    run = lambda seed: planner.tune_cem(synthetic(), [ATTACK], IdmParams(), 3, 8, 0.25, seed)  # noqa: E731
    (a, ha), (b, hb), (_, hc) = run(5), run(5), run(6)
    assert a == b and [h.mean_j for h in ha] == [h.mean_j for h in hb]
    assert [h.mean_j for h in ha] != [h.mean_j for h in hc]


@pytest.mark.parametrize("kwargs, message", [
    ({"generations": 0}, "generations=0"), ({"population": 1}, "population=1"), ({"elite_frac": 0.0}, "elite_frac=0.0"),
])
def test_cem_bad_input_names_the_parameter(kwargs, message):
    args = {"generations": 2, "population": 4, "elite_frac": 0.5} | kwargs
    with pytest.raises(ValueError, match=message):
        planner.tune_cem(synthetic(), [ATTACK], IdmParams(), seed=0, **args)
    with pytest.raises(ValueError, match=r"scenarios\[0\]"):
        planner.episode_jobs([{"slot": 0}])
    with pytest.raises(ValueError, match="no episodes"):
        planner.episode_jobs([], normal=0)



# ---------------------------------------------------------------- CEM on the toy world
def toy_failures(limit: int = 3) -> list[tuple[ScenarioParams, int]]:
    """(z, seed) pairs where the default (under-cautious) planner crashes at fault in the toy world,
    found by enumerating the cut-in manoeuvres over a few seeds."""
    from environments.adv0.sim import toy, toy_sim
    from environments.adv0.sim.scenario import all_scenarios

    z = all_scenarios()
    z = z[np.isin(z[:, 1], [1, 0])]  # cut_in_brake, cut_in
    seeds = list(range(3, 9))
    out = toy.evaluate(seeds, z)
    hits = np.argwhere(out.fault == toy_sim.FAULT_CODES.index("defender"))
    assert len(hits), "the toy world gave the default planner no at-fault crash to learn from"
    return [(ScenarioParams.from_index(tuple(z[m])), seeds[s]) for s, m in hits[:: max(1, len(hits) // limit)][:limit]]


def test_cem_on_the_toy_world_removes_at_fault_crashes_without_slowing_down():
    from environments.adv0.sim import toy

    scenarios = toy_failures()
    run = planner.world_runner(toy, "toy")
    jobs = planner.episode_jobs(scenarios)
    before = run(IdmParams(), jobs)
    best, history = planner.tune_cem(run, scenarios, IdmParams(), generations=3, population=8, elite_frac=0.25, seed=0)
    after = run(best, jobs)
    assert history[0].start_j == pytest.approx(np.mean([r.reward for r in before]))
    assert history[-1].incumbent_j > history[0].start_j + 0.1
    assert sum(r.defender_failure for r in after) < sum(r.defender_failure for r in before)
    assert np.mean([r.mean_speed for r in after]) > 22.0  # it did not buy safety with a crawl
    assert all(r.defender == "idm" for r in after)


def test_always_braking_loses_and_cem_leaves_a_crawl():
    from environments.adv0.sim import toy

    run = planner.world_runner(toy, "toy")
    crawl = IdmParams(time_wanted=3.0, target_speed=15.0, comfort_acc_max=0.5)
    jobs = planner.episode_jobs([], normal=4)
    assert planner.objective(run, crawl, jobs) == 0.0 < planner.objective(run, IdmParams(), jobs)
    best, history = planner.tune_cem(run, [], crawl, generations=4, population=8, elite_frac=0.25, seed=1, normal=4)
    # Off the plateau (J = 0 for every crawl; ties are broken by speed) and driving on.
    assert history[-1].incumbent_j > 0.1 and best.target_speed > crawl.target_speed + 3



def test_cem_on_highway_env_is_deterministic():
    """The real world, one tiny generation twice: the same seed gives the same candidates and scores."""
    from environments.adv0.sim import highway

    run = planner.world_runner(highway, "highway")
    tune = lambda: planner.tune_cem(run, [(ATTACK, 5)], IdmParams(), generations=1, population=2,  # noqa: E731
                                    elite_frac=0.5, seed=0, normal=0)
    (a, ha), (b, hb) = tune(), tune()
    assert a == b and ha[0].mean_j == hb[0].mean_j and ha[0].episodes == 2
    assert -1.0 <= ha[0].start_j <= 1.0 and ha[0].cpu_s > 0


# ---------------------------------------------------------------- the DQN defender (highway-env)
def some_attack(rng: np.random.Generator) -> ScenarioParams:
    """A sampler: cut-in + brake from a random nearby slot."""
    return ATTACK.model_copy(update={"slot": int(rng.integers(3))})


def play(env, seed: int, actions):
    """One episode of a DefenderEnv with scripted action indices: (draw info, rewards, last info, observations)."""
    obs, info = env.reset(seed=seed)
    rewards, observations, done, i = [], [obs], False, 0
    while not done:
        obs, r, terminated, truncated, last = env.step(actions[i % len(actions)])
        rewards.append(r)
        observations.append(obs)
        done, i = terminated or truncated, i + 1
    return info, rewards, last, observations


def test_dqn_env_rewards_sum_to_j_and_episodes_follow_the_seed():
    from environments.adv0.sim import highway
    from environments.adv0.train import dqn

    env = dqn.DefenderEnv(highway, "highway", some_attack, adversarial_ratio=1.0)
    assert env.observation_space.shape == (5, 5) and env.action_space.n == 5
    outcomes = set()
    for seed in range(4):
        info, rewards, last, obs = play(env, seed, [3, 3, 0, 1])  # FASTER, FASTER, LANE_LEFT, IDLE
        result = last["result"]
        assert info["attack"] is not None and result.attack == info["attack"] and result.seed == info["seed"]
        assert abs(sum(rewards) - result.reward) < 1e-9  # the step rewards split J exactly
        assert len(rewards) == result.steps
        # Step rewards before the last are the progress term over the horizon: within [0, 1/20].
        assert all(0.0 <= r <= 1 / 20 + 1e-12 for r in rewards[:-1])
        outcomes.add("failure" if result.defender_failure else "crash" if result.crashed else "survived")
        if result.defender_failure:
            assert sum(rewards) == pytest.approx(-1.0)
    assert len(outcomes) >= 2, outcomes  # the seeds cover more than one kind of ending
    info, rewards, _, obs = play(env, 1, [3, 3, 0, 1])
    info2, rewards2, _, obs2 = play(env, 1, [3, 3, 0, 1])
    assert info2 == info and rewards2 == rewards and all(np.array_equal(a, b) for a, b in zip(obs, obs2))
    normal = dqn.DefenderEnv(highway, "highway", some_attack, adversarial_ratio=0.0)
    assert normal.reset(seed=7)[1]["attack"] is None
    env.close()


def test_dqn_bad_input_and_missing_checkpoint(tmp_path, monkeypatch):
    from environments.adv0.train import dqn
    from harness.errors import HarnessError

    with pytest.raises(ValueError, match="adversarial_ratio=1.5"):
        dqn.DefenderEnv(object(), sampler=some_attack, adversarial_ratio=1.5)
    with pytest.raises(ValueError, match="needs a sampler"):
        dqn.DefenderEnv(object(), adversarial_ratio=0.5)
    from environments.adv0.sim import toy

    with pytest.raises(ValueError, match="no DriverView.features"):
        dqn.DefenderEnv(toy, "toy")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    missing = dqn.checkpoint_path(500, 3)
    assert missing.parent == tmp_path / "adv0"
    with pytest.raises(HarnessError, match=r"`harness adv0 pretrain-dqn --steps 500`"):
        dqn.load_checkpoint(missing)


@pytest.mark.slow
def test_dqn_checkpoint_is_cached_loaded_finetuned_and_drives_greedily(tmp_path, monkeypatch):
    """Tiny (a few hundred steps; run under `flock /tmp/torch.lock`): the checkpoint is built once
    and then served from the cache, fine-tuning from it is deterministic for a seed, and the
    greedy defender replays the same episode."""
    import torch

    from environments.adv0.sim import highway
    from environments.adv0.train import dqn

    torch.set_num_threads(1)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    path = dqn.build_checkpoint(120, seed=1)
    assert path == tmp_path / "adv0" / "dqn-highway-120steps-seed1.zip" and path.is_file()
    meta = path.with_suffix(".json").read_text()
    assert '"steps": 120' in meta and '"gamma": 0.8' in meta
    stamp = path.stat().st_mtime_ns
    assert dqn.build_checkpoint(120, seed=1) == path and path.stat().st_mtime_ns == stamp  # served from the cache

    def tuned():
        model = dqn.load_checkpoint(path)
        stats = dqn.finetune(model, some_attack, 60, adversarial_ratio=0.5, seed=4)
        return model, stats

    (m1, s1), (m2, _) = tuned(), tuned()
    assert s1.steps == 60 and s1.cpu_s > 0 and m1.num_timesteps == 180
    w1, w2 = (torch.cat([p.flatten() for p in m.policy.parameters()]) for m in (m1, m2))
    assert torch.equal(w1, w2)  # same seed, same fine-tuning
    defender = dqn.DqnDefender(m1)
    r1, r2 = (defender.episode(highway, "highway", 11, ATTACK) for _ in range(2))
    assert r1.defender == "dqn" and r1.actions == r2.actions and r1.reward == r2.reward
