"""The filmstrip of a closed-loop attack shows the attacker's decisions step by step (issue 41 item 5):
each frame's caption names the decision in force then, the picture's caption lists every decision in
order, and a one-shot attacker's filmstrip stays as it was. One short real highway-env episode."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from environments.adv0.sim import highway
from environments.adv0.sim.closed_loop import ACTIONS, ClosedLoopAttacker, ClosedLoopPolicy
from environments.adv0.sim.render import (
    BAND_PX,
    Decision,
    decision_in_force,
    decision_sequence,
    decisions_of,
    frame_captions,
    save_filmstrip,
)
from environments.adv0.sim.scenario import AttackerTrajectory, EpisodeResult
from environments.adv0.suite import _caption

STEPS = 4  # decisions at 0, 1, 2, 3 s; the kept frames (the last 3 s) cover three of them


def _frames(n: int, h: int = 20, w: int = 40) -> list[np.ndarray]:
    return [np.full((h, w, 3), 10 * i, dtype=np.uint8) for i in range(n)]


def test_each_frame_carries_the_latest_decision_at_or_before_its_time():
    decisions = [Decision(0.0, "keep:hold", 0.5), Decision(1.0, "left:brake", 0.41), Decision(2.0, "right:accelerate")]
    times = [0.0, 0.2, 0.8, 1.0, 1.6, 2.0, 2.4]
    picked = [decision_in_force(t, decisions) for t in times]
    assert [d.action for d in picked] == ["keep:hold"] * 3 + ["left:brake"] * 2 + ["right:accelerate"] * 2
    assert decision_in_force(-0.2, decisions) is None
    captions = frame_captions(times, decisions)
    assert captions[3] == "t=1.0 s  attacker @1.0 s left:brake (p=0.41)"
    assert captions[-1] == "t=2.4 s  attacker @2.0 s right:accelerate"  # no policy at hand: no probability
    assert frame_captions([-0.2], decisions) == ["t=-0.2 s  attacker no decision yet"]
    assert decision_sequence(decisions) == "0.0 s keep:hold (p=0.50), 1.0 s left:brake (p=0.41), 2.0 s right:accelerate"


def test_decisions_need_one_time_per_frame(tmp_path: Path):
    with pytest.raises(ValueError, match="one time per frame"):
        save_filmstrip(_frames(3), tmp_path, decisions=[Decision(0.0, "keep:hold")], times=[0.0])


def test_captioned_frames_get_a_band_and_uncaptioned_ones_do_not(tmp_path: Path):
    frames = _frames(3)
    plain = save_filmstrip(frames, tmp_path / "plain")
    captioned = save_filmstrip(
        frames,
        tmp_path / "cap",
        times=[0.0, 0.2, 1.0],
        decisions=[Decision(0.0, "keep:hold"), Decision(1.0, "left:brake")],
    )
    plain_still = np.asarray(Image.open(tmp_path / "plain" / plain[0]))
    still = np.asarray(Image.open(tmp_path / "cap" / captioned[0]))
    assert plain_still.shape == (20, 40, 3) and still.shape == (20 + BAND_PX, 40, 3)
    assert np.array_equal(still[:20], plain_still)  # the scene itself is left uncovered
    assert (still[20:] < 255).any()  # text drawn in the band


def _closed_loop_episode(tmp_path: Path):
    policy = ClosedLoopPolicy.reference()
    attacker = ClosedLoopAttacker(policy, slot=0, seed=[3, 1])
    ep = highway.start_episode("highway", 3, None, frames=True, closed_loop=attacker)
    try:
        for _ in range(STEPS):
            if ep.done:
                break
            ep.step("IDLE")
        times = [f.t for f in ep.history]
        paths = ep.filmstrip(tmp_path / "strip", root=tmp_path)
        result = ep.result()
    finally:
        ep.close()
    return policy, result, times, paths


def test_a_closed_loop_filmstrip_shows_the_recorded_decisions_in_order(tmp_path: Path):
    policy, result, times, paths = _closed_loop_episode(tmp_path)
    traj = result.attacker_trajectory
    assert traj is not None and len(traj.actions) >= 2
    decisions = decisions_of(traj, policy)
    assert [d.action for d in decisions] == traj.actions and [d.t for d in decisions] == traj.t
    for d, phi, mask, action in zip(decisions, traj.features, traj.feasible, traj.actions):
        expected = np.exp(policy.log_probs(np.asarray(phi), np.asarray(mask))[ACTIONS.index(action)])
        assert d.p == pytest.approx(expected) and 0.0 < d.p <= 1.0
    # each kept frame names the decision in force: the recorded action at the latest decision time <= its time
    captions = frame_captions(times, decisions)
    shown = []
    for t, caption in zip(times, captions):
        m = re.fullmatch(r"t=(\S+) s  attacker @(\S+) s (\S+) \(p=(\S+)\)", caption)
        assert m is not None, caption
        i = max(j for j, tj in enumerate(traj.t) if tj <= t + 1e-6)
        assert (float(m[2]), m[3]) == (pytest.approx(traj.t[i], abs=0.05), traj.actions[i])
        if not shown or shown[-1] != i:
            shown.append(i)
    assert shown == sorted(shown) and len(shown) >= 2  # step by step, in order, more than one decision
    # the saved strip is captioned: every still is taller than highway-env's frame by the band
    still = Image.open(tmp_path / paths[0])
    strip = Image.open(tmp_path / paths[-2])
    assert paths[-2].endswith("-strip.png") and strip.height == still.height
    band = np.asarray(still.convert("RGB"))[-BAND_PX:]
    white = (band == 255).all(axis=2)
    assert white.mean() > 0.7 and not white.all()  # a white band with text in it under the scene
    # the transcript's picture caption lists every decision, in order
    caption = _caption(result, policy)
    listed = re.findall(r"(\d+\.\d) s ([a-z]+:[a-z]+) \(p=", caption.split("decisions: ", 1)[1])
    assert [a for _, a in listed] == traj.actions
    assert [float(t) for t, _ in listed] == pytest.approx(traj.t, abs=0.05)


def test_a_one_shot_caption_keeps_its_manoeuvre():
    result = EpisodeResult.model_validate(
        {
            "family": "highway",
            "seed": 1,
            "defender": "llm",
            "steps": 1,
            "duration_s": 1.0,
            "crashed": True,
            "attack": {
                "slot": 0,
                "manoeuvre": "cut_in",
                "trigger_s": 1.0,
                "intensity": 0.5,
                "hold_s": 1.0,
                "gap_m": 10.0,
            },
        }
    )
    assert _caption(result) == "highway seed 1: crash (cut_in from slot 0)"
    closed = result.model_copy(
        update={
            "attack": None,
            "attacker_trajectory": AttackerTrajectory(
                policy="closed_loop",
                t=[0.0, 1.0],
                features=[[0.0], [0.0]],
                feasible=[[True], [True]],
                actions=["keep:hold", "left:brake"],
            ),
        }
    )
    assert (
        _caption(closed)
        == "highway seed 1: crash (closed-loop attacker's decisions: 0.0 s keep:hold, 1.0 s left:brake)"
    )
