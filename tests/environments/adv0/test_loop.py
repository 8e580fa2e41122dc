"""The closed min-max loop (`environments/adv0/train/loop.py`) on the toy world: a round's state round
trips through its folder; a real SIGKILL of a child process mid-run loses at most the round in
flight, and resuming it yields exactly the rounds -- and the very evaluation rows -- of a run that
was never interrupted; a half-written round is never taken for a complete one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from environments.adv0.sim.worlds import context_of, world_for
from environments.adv0.train import loop

ROOT = Path(__file__).resolve().parents[3]
SMALL = dict(family="toy", episodes=6, held_out_episodes=6, contexts=3, k=3, scenarios=6, cem_generations=1,
             cem_population=4)
# The child's rounds are heavier (about a second each here), so the kill lands inside a round.
CHILD = dict(family="toy", rounds=3, episodes=12, held_out_episodes=12, contexts=4, k=4, scenarios=12,
             cem_generations=2, cem_population=6)


def rows_by_round(folder: Path) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for row in loop.load_rows(folder):
        out.setdefault(row.round, []).append(row.model_dump())
    return out


def test_a_round_state_round_trips_and_restores_both_players(tmp_path: Path):
    cfg = loop.LoopConfig(rounds=1, **SMALL)
    _, folder = loop.start_run(cfg, tmp_path)
    seen = []
    assert loop.train(cfg, folder, on_round=seen.append) == [1]
    saved = loop.load_round(folder, 1)
    assert saved == seen[0]
    assert saved.rows and {r.split for r in saved.rows} == {"normal", "attack", "held_out"}
    assert all(r.round == 1 for r in saved.rows) and all(r.held_out for r in saved.rows if r.split == "held_out")
    assert set(saved.cpu_s) == {"attacker", "defender", "eval"}
    assert len(saved.defender_report["cpu_s_per_generation"]) == cfg.cem_generations
    # The attacker file is the attacker alone (what suite adv0 reads) and equals the state's copy.
    assert json.loads((folder / "rounds" / "0001" / "attacker.json").read_text()) == saved.attacker
    # Restored players act exactly like the live ones would.
    attacker = loop.make_attacker(cfg, saved.attacker)
    defender = loop.make_defender(cfg, saved.defender, folder / "rounds" / "0001")
    assert defender.params.model_dump() == saved.defender["params"] != loop.IdmParams().model_dump()
    ctx = context_of(world_for("toy"), "toy", 5)
    live = loop.make_attacker(cfg, json.loads((folder / "rounds" / "0001" / "attacker.json").read_text()))
    a = [attacker.draw(ctx, np.random.default_rng(1)) for _ in range(5)]
    b = [live.draw(ctx, np.random.default_rng(1)) for _ in range(5)]
    assert a == b


def test_sigkill_mid_round_then_resume_loses_nothing_and_duplicates_nothing(tmp_path: Path):
    # Reference: the same run, never interrupted.
    cfg = loop.LoopConfig(**CHILD)
    _, ref_folder = loop.start_run(cfg, tmp_path / "ref")
    loop.train(cfg, ref_folder)
    expected = rows_by_round(ref_folder)
    assert sorted(expected) == [1, 2, 3]

    run_dir = tmp_path / "killed"
    args = ["train", "--run-dir", str(run_dir)] + [
        f"--{k.replace('_', '-')}={v}" for k, v in CHILD.items()]
    child = subprocess.Popen([sys.executable, "-c", "from environments.adv0.commands import adv0_app; adv0_app()", *args],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        folder = None
        while time.monotonic() < deadline:
            runs = list((run_dir / loop.TRAIN_DIR).glob("adv0-*"))
            # Round 2's staging folder exists: round 1 is complete and round 2 is in flight.
            if runs and list((runs[0] / "rounds").glob(".0002.*")):
                folder = runs[0]
                break
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            time.sleep(0.01)
        assert folder is not None, "round 2 never started"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    done = loop.complete_rounds(folder)
    assert done in ([1], [1, 2]), done  # round 2 may have just been renamed into place
    assert any(p.name.startswith(".") for p in (folder / "rounds").iterdir()) or done == [1, 2]
    # Every complete round is whole; the one in flight is not a round folder.
    for r in done:
        assert (folder / "rounds" / loop.round_name(r) / "state.json").is_file()

    # Resume through the command, without --rounds: the saved config (3 rounds) is the run's.
    from typer.testing import CliRunner

    from environments.adv0.commands import adv0_app

    result = CliRunner().invoke(adv0_app, ["train", "--resume", folder.name, "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert f"resuming {folder.name}: {len(done)} of 3 rounds complete" in " ".join(result.output.split())
    assert loop.open_run(run_dir, folder.name)[0] == cfg
    names = sorted(p.name for p in (folder / "rounds").iterdir())
    assert names == ["0001", "0002", "0003"]  # the leftover is gone, no round twice or missing
    assert rows_by_round(folder) == expected  # the resumed run is the uninterrupted run


def test_a_round_without_done_or_a_gap_is_not_complete(tmp_path: Path):
    cfg = loop.LoopConfig(rounds=2, **SMALL)
    _, folder = loop.start_run(cfg, tmp_path)
    loop.train(cfg, folder)
    (folder / "rounds" / "0002" / "done").unlink()  # as if written by hand without its marker
    (folder / "rounds" / ".0003.999").mkdir()  # a killed round's staging folder
    (folder / "rounds" / "0004").mkdir()
    (folder / "rounds" / "0004" / "done").write_text("{}")  # after a gap: not counted
    assert loop.complete_rounds(folder) == [1]
    assert loop.clean_partial(folder) == [".0003.999", "0002", "0004"]
    assert loop.train(cfg.model_copy(update={"rounds": 3}), folder) == [2, 3]
    assert loop.complete_rounds(folder) == [1, 2, 3]
    assert sorted(p.name for p in (folder / "rounds").iterdir()) == ["0001", "0002", "0003"]


def test_open_run_names_the_missing_run(tmp_path: Path):
    with pytest.raises(loop.HarnessError, match="--resume nope: no ADV-0 training run"):
        loop.open_run(tmp_path, "nope")


class ScriptedDriverModel:
    """A model that always speeds up and, asked for a lesson, gives one (our own logic under test)."""

    name = "scripted/driver"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, messages, config):
        from harness.providers.base import ModelOutput

        self.calls += 1
        schema = config.json_schema or {}
        if "lesson" in schema.get("properties", {}):
            return ModelOutput(text='{"lesson": "Leave more room before a car that may brake."}')
        return ModelOutput(text='{"action": "FASTER"}')

    async def aclose(self) -> None:
        pass


def test_the_llm_driver_keeps_its_reflections_across_rounds_and_a_resume(tmp_path: Path, monkeypatch):
    import harness.providers

    model = ScriptedDriverModel()
    monkeypatch.setattr(harness.providers, "load_model", lambda spec: model)
    cfg = loop.LoopConfig(defender="llm", rounds=1, family="toy", episodes=1, held_out_episodes=1, contexts=1, k=2,
                          scenarios=6)
    _, folder = loop.start_run(cfg, tmp_path)
    loop.train(cfg, folder)
    state = loop.load_round(folder, 1)
    memory_file = folder / "rounds" / "0001" / state.defender["memory"]
    assert memory_file.is_file() and model.calls > 0
    report = state.defender_report
    assert report["episodes"] == 6 and report["lessons_added"] == report["crashes"] > 0  # a lesson per crash
    assert report["lessons"] == state.defender["lessons"]
    # Restored from its round, the driver has the same memory; evaluation drives with a copy, so
    # crashing in a test never teaches it.
    driver = loop.make_defender(cfg, state.defender, folder / "rounds" / "0001")
    assert driver.memory.model_dump() == json.loads(memory_file.read_text())
    before = driver.memory.model_dump()
    brake = loop.ScenarioParams(slot=0, manoeuvre="brake_check", trigger_s=1.0, intensity=1.0, hold_s=2.0, gap_m=5.0)
    results = driver.run([(brake, s) for s in range(8)])
    assert any(r.crashed and r.collision.fault != "attacker" for r in results)
    assert driver.memory.model_dump() == before
    driver.close()
    # Resuming adds round 2's lessons on top of round 1's.
    cfg2, folder2 = loop.open_run(tmp_path, folder.name, rounds=2)
    assert loop.train(cfg2, folder2) == [2]
    round2 = loop.load_round(folder, 2)
    assert round2.defender["lessons"] == state.defender["lessons"] + round2.defender_report["lessons_added"]
    assert round2.defender_report["lessons_added"] > 0
