"""The fixed defender of `closed_loop_eval` (`closed_loop_defender.py`): a DQN checkpoint checked and
pinned before any episode, its episodes through the closed-loop world, and `--hand-eval` on a fake
runner."""

from __future__ import annotations

import json

import numpy as np
import pytest

from environments.adv0.checks import closed_loop_defender, closed_loop_eval
from environments.adv0.checks.closed_loop_defender import DqnCheckpoint, Runner, dqn_checkpoint
from environments.adv0.checks.closed_loop_eval import GainReport, Training, hand_eval, hand_rows, load_training, main
from environments.adv0.sim.closed_loop import ClosedLoopDraw, ClosedLoopLimits, ClosedLoopPolicy
from environments.adv0.sim.scenario import META_ACTIONS, IdmParams
from environments.adv0.train.closed_loop_dpo import ClosedLoopConfig
from harness.errors import HarnessError
from tests.environments.adv0.test_closed_loop_eval import background_on_odd_seeds

PINNED = DqnCheckpoint(path="fake-dqn.zip", sha256="f" * 64)


def test_a_missing_checkpoint_is_one_error_naming_the_pretrain_command(tmp_path, capsys):
    with pytest.raises(HarnessError, match=r"missing: build it with `harness adv0 pretrain-dqn --steps 20000`"):
        dqn_checkpoint(tmp_path / "dqn-highway-20000steps-seed0.zip")
    with pytest.raises(SystemExit):
        main(["--defender", "dqn", "--dqn-checkpoint", str(tmp_path / "none.zip"), "--hand-eval", "cut-in"])
    assert "pretrain-dqn" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a checkpoint names the DQN defender: not silently ignored
        main(["--dqn-checkpoint", str(tmp_path / "none.zip"), "--hand-eval", "cut-in"])
    assert "--defender dqn" in capsys.readouterr().err


class AlwaysSlower:
    """A stand-in for a loaded DQN: `predict` always picks SLOWER."""

    def predict(self, obs: np.ndarray, deterministic: bool) -> tuple[int, None]:
        assert deterministic and obs.ndim == 2
        return META_ACTIONS.index("SLOWER"), None


def test_a_pinned_dqn_drives_closed_loop_episodes(monkeypatch):
    monkeypatch.setitem(closed_loop_defender._models, PINNED.sha256, AlwaysSlower())
    draw = ClosedLoopDraw(ClosedLoopPolicy.reference(), ClosedLoopLimits(), 0, (700_000, 1))
    (r,) = Runner("highway", PINNED, 1)([(draw, 700_000)])
    assert r.defender == "dqn" and r.seed == 700_000
    assert r.attacker_trajectory is not None and len(r.attacker_trajectory.actions) > 0
    # the model's greedy choice every step (IDLE once SLOWER is not available at the lowest speed)
    assert r.actions[0] == "SLOWER" and set(r.actions) == {"SLOWER", "IDLE"}


def test_a_report_keeps_which_defender_and_refuses_another(tmp_path):
    cfg = ClosedLoopConfig()
    policy = ClosedLoopPolicy.reference().to_state()
    common = dict(family="highway", config=cfg, rounds=1, contexts=1, rounds_report=[], train_cpu_s=0.0,
                  wall_s=0.0, policy=policy)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(Training(defender=PINNED, **common).model_dump()))
    assert load_training(path).defender == PINNED
    path.write_text(json.dumps(Training(defender=IdmParams(), **common).model_dump()))  # a file from before
    assert load_training(path).defender == IdmParams()
    with pytest.raises(ValueError, match="give the same --defender"):
        closed_loop_eval.attack_gain(cfg, 1, 1, 2, 1, defender=PINNED, training=load_training(path),
                                     trained_in="t.json")
    assert "defender" in GainReport.model_fields


class FakeRunner:
    def __init__(self, family: str, defender: object, workers: int):
        self.defender = defender

    def __call__(self, draws):
        return background_on_odd_seeds(draws)

    def close(self) -> None:
        pass


def test_hand_eval_pairs_each_hand_policy_with_the_reference_on_the_same_seeds(monkeypatch):
    monkeypatch.setattr(closed_loop_eval, "Runner", FakeRunner)
    rep = hand_eval(["cut-in", "steer-brake"], 40, 1, PINNED, first_seed=700_000)
    assert [a.name for a in rep.arms] == ["reference", "cut-in", "steer-brake"]
    assert set(rep.differences) == {"cut-in", "steer-brake"}
    for a in rep.arms[1:]:
        d, lo, hi = rep.differences[a.name]
        assert d == pytest.approx(a.rate - rep.arms[0].rate) and lo <= d <= hi
    failures = {(c.policy, c.seed) for c in rep.crashes}
    assert len(failures) == sum(a.defender_failures for a in rep.arms)  # the fake world: every crash a failure
    assert all(700_000 <= seed < 700_040 for _, seed in failures)
    assert {c.other for c in rep.crashes} == {"attacker", "bg:2"}
    text = hand_rows(rep)
    assert "| 1 | cut-in |" in text and "seeds 700000-700039" in text and "fake-dqn.zip" in text


@pytest.mark.slow
def test_a_checkpoint_that_is_not_this_familys_dqn_is_one_error(tmp_path):
    """A few seconds (torch; run under the torch lock): a DQN over another observation, and a file
    that is no DQN, each refused before any episode, naming the file and the pretrain command."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(1)

    class Other(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        action_space = gym.spaces.Discrete(len(META_ACTIONS))

    other = tmp_path / "other.zip"
    DQN("MlpPolicy", Other(), policy_kwargs={"net_arch": [4]}, buffer_size=10, device="cpu").save(other)
    with pytest.raises(HarnessError, match=r"other\.zip: observation \(3,\).*family 'highway' observes \(5, 5\)"):
        dqn_checkpoint(other)
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip")
    with pytest.raises(HarnessError, match=r"junk\.zip: not a stable-baselines3 DQN file.*pretrain-dqn"):
        dqn_checkpoint(junk)
