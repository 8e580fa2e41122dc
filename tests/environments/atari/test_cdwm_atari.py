"""Suite `cdwm-atari`: real ale-py emulation (Breakout, Pong), object deltas from RAM, the
protocol's data and arithmetic, and one CDWM episode pair through the real CLI with a loopback model."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from environments.atari import games
from environments.atari.env import AtariEnvironment
from environments.atari.suite import AtariOptions, CdwmAtariSuite
from harness.errors import HarnessError
from harness.loopback import running_server
from harness.run_folder import RunFolder
from harness.presenter import PNG_MAGIC
from tests.conftest import REPO


def play(game: str, seed: int, actions: list[str], sticky: float = games.STICKY_ACTION_P, env=None):
    env = env or AtariEnvironment(sticky=sticky)
    env.reset({"game": game, "seed": seed})  # the same emulator is reused across resets of one game
    results = [env.step(a) for a in actions]
    return [r.delta.model_dump() for r in results], [r.observation.text for r in results], env.evaluate(), env.filmstrips


def test_an_episode_is_a_function_of_its_seed_and_actions():
    actions = ["fire", "left", "left", "right", "noop", "fire", "right", "noop"] * 2
    env = AtariEnvironment()
    first = play("breakout", 7, actions, env=env)
    assert play("breakout", 7, actions, env=env)[:3] == first[:3]  # sticky actions included: same seed, same episode
    assert play("breakout", 7, actions, env=AtariEnvironment())[:3] == first[:3]  # and in a fresh emulator
    # A different seed draws different sticky repeats: the paddle ends elsewhere or the ball differs.
    others = [play("breakout", s, actions, env=env)[1] for s in (8, 9)]
    assert any(o != first[1] for o in others)


def test_breakout_deltas_of_a_scripted_sequence_are_exact():
    """No sticky actions: FIRE serves the ball (created, falling); the unreturned ball leaves play
    six steps later (deleted) and the life lost is irreversible, with a filmstrip of it."""
    deltas, _, evaluation, strips = play("breakout", 0, ["fire"] + ["noop"] * 7, sticky=0.0)
    serve = deltas[0]
    assert serve["created"] == ["ball"] and serve["reversible"]
    assert {(a["attribute"], a["after"]) for a in serve["attributes"]} == {("x", 14), ("y", 16), ("dx", -1), ("dy", 1)}
    assert all(d["reversible"] for d in deltas[:6])
    lost = deltas[6]
    assert lost["deleted"] == ["ball"] and not lost["reversible"] and lost["irreversible_cost"] == 1.0
    assert [(a["entity"], a["attribute"], a["before"], a["after"]) for a in lost["attributes"]] == [("game", "lives", 5, 4)]
    assert deltas[7]["attributes"] == [] and deltas[7]["created"] == [] and deltas[7]["deleted"] == []
    assert evaluation["score"] == 0.0 and evaluation["env_steps"] == 32 and not evaluation["coarse_deltas"]
    (strip,) = strips
    assert "life lost" in strip["caption"] and base64.b64decode(strip["png"]).startswith(PNG_MAGIC)


def test_pong_conceded_point_is_irreversible_and_a_bounce_is_a_relation():
    deltas, texts, evaluation, strips = play("pong", 0, ["noop"] * 16, sticky=0.0)
    bounce = deltas[7]["relations_added"]
    assert bounce == [{"subject": "ball", "relation": "bounced off", "object": "enemy"}]
    lost = deltas[15]
    assert not lost["reversible"] and lost["irreversible_cost"] == 1.0
    changed = {(a["entity"], a["attribute"]): a["after"] for a in lost["attributes"]}
    assert changed[("game", "conceded")] == 1 and changed[("game", "score")] == -1
    assert evaluation["score"] == -1.0 and len(strips) == 1 and "point conceded" in strips[0]["caption"]
    assert "- ball:" in texts[7] and "Actions: noop, fire, right, left" in texts[7]


def test_human_normalised_score_arithmetic_and_the_26_games():
    assert len(games.ATARI_100K_GAMES) == 26 and len(set(games.ATARI_100K_GAMES)) == 26
    assert games.human_normalized("breakout", 1.7) == 0.0
    assert games.human_normalized("breakout", 30.5) == pytest.approx(1.0)
    assert games.human_normalized("pong", -20.7) == 0.0
    assert games.human_normalized("Pong", 14.6) == pytest.approx(1.0)
    assert games.human_normalized("freeway", 14.8) == pytest.approx(0.5)
    assert (games.FRAME_SKIP, games.STICKY_ACTION_P, games.MAX_FRAMES) == (4, 0.25, 400_000)


def test_bad_game_names_give_one_clear_error():
    with pytest.raises(HarnessError, match="unknown Atari game 'tetris'.*breakout"):
        AtariEnvironment().reset({"game": "tetris"})
    with pytest.raises(ValidationError, match="unknown Atari game 'tetris'"):
        CdwmAtariSuite(AtariOptions(games="pong,tetris"))
    with pytest.raises(HarnessError, match="no corpus"):
        CdwmAtariSuite().load_samples("/some/path")
    assert [s.id for s in CdwmAtariSuite(AtariOptions(games="pong", seeds=3)).load_samples(None)] == ["pong-0", "pong-1", "pong-2"]


@pytest.mark.slow  # a child `harness eval` (imports, model server): ~10 s on the shared 2 cores
def test_cdwm_agent_through_harness_eval(tmp_path):
    """The real CLI, a loopback model that always serves: Breakout
    loses a life -> an unrequired irreversible change, a filmstrip in the pictures, HNS reported."""
    reply = f"Thought: serve\nAction: fire\n{json.dumps({'reversible': True, 'confidence': 0.9})}"
    runs = tmp_path / "runs"
    with running_server("--echo", "--reply", reply) as url:
        res = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "--suite", "cdwm-atari",
                              "--agent", "cdwm", "--model", "openai/policy", "--base-url", url, "--limit", "1",
                              "--suite-option", "max_steps=10", "--suite-option", "candidates=1",
                              "--suite-option", "horizon=1", "--suite-option", "sticky=0",
                              "--run-dir", str(runs), "--no-progress"], capture_output=True, text=True, cwd=REPO,
                             timeout=120)
    assert res.returncode == 0, res.stderr
    (rec,) = RunFolder(runs, next(p.name for p in runs.iterdir() if p.name.startswith("cdwm-atari-"))).read_samples()
    assert rec.status == "ok" and rec.sample_id == "breakout-0"
    assert rec.output["steps"][0]["action"] == "fire" and rec.output["mask"] == "atari"
    assert rec.scores["unrequired_irreversible"] and rec.scores["human_normalized_score"] == pytest.approx(-1.7 / 28.8)
    assert rec.output["pictures"] and "life lost" in rec.output["pictures"][0]["caption"]
    assert "human_normalized_score" in res.stdout


def test_the_bench_counts_emulator_steps_and_times_the_parts_apart():
    from environments.atari.bench import format_table, run_visual_bench

    result = run_visual_bench(("pong",), steps=40, filmstrip=True)
    row = result["games"]["pong"]
    assert row["env_steps"] == 40 and row["emulator_ms"] > 0 and row["extract_ms"] > 0 and row["frames_overhead"] > 0
    assert "pong" in format_table(result) and "wrapper" in format_table(result)
