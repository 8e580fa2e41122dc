"""Scenario families as data (`environments/adv0/sim/families.py`): a family file for a highway-env
environment the code never names runs an episode (directly and through suite `adv0`), and bad
declarations are one error naming the family and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from environments.adv0.metrics import episode_scores
from environments.adv0.sim import families, highway
from environments.adv0.sim.closed_loop import ClosedLoopAttacker, ClosedLoopPolicy
from environments.adv0.sim.scenario import IdmParams
from harness.loopback import running_server
from tests.conftest import harness_cli

# exit-v0 (highway-env's ExitEnv) appears nowhere in the project's code: the family is pure data.
EXIT_TOML = """
name = "exit-sparse"
env_id = "exit-v0"
density = 1.2
duration_s = 6
[config]
vehicles_count = 10
[attacker_limits]
longitudinal = ["hold", "brake"]
max_brake = 5.0
"""


def test_a_family_file_for_an_unnamed_environment_runs_an_episode(tmp_path):
    assert "exit" not in " ".join(highway.WORLD_FAMILIES)
    path = tmp_path / "exit.toml"
    path.write_text(EXIT_TOML)
    family = families.load_family_file(path)
    spec = highway.FAMILIES["exit-sparse"]
    assert spec.env_class.__name__ == "ExitEnv" and spec.config["vehicles_density"] == 1.2
    assert spec.config["simulation_frequency"] == 5 and spec.config["vehicles_count"] == 10
    attacker = ClosedLoopAttacker(ClosedLoopPolicy.reference(), family.attacker_limits, seed=[0, 1])
    ep = highway.start_episode("exit-sparse", 0, None, planner=IdmParams(), closed_loop=attacker)
    try:
        while not ep.done:
            ep.step(None)
        result = ep.result()
    finally:
        ep.close()
    assert result.family == "exit-sparse" and 1 <= result.steps <= 6 and result.duration_s <= 6.0 + 1e-9
    actions = result.attacker_trajectory.actions
    assert actions and not any(a.endswith("accelerate") for a in actions)  # the family's limits bind the attacker
    assert episode_scores(result).held_out  # a declared long-tail family counts as held out


@pytest.mark.parametrize("data, key", [
    ({"env_id": "moon-v0"}, "env_id"),
    ({"env_id": "merge-v0", "config": {"lanes_count": 4}}, "config.lanes_count"),
    ({"env_id": "merge-v0", "density": 2.0}, "density"),
    ({"env_id": "exit-v0", "config": {"simulation_frequency": 15}}, "config.simulation_frequency"),
    ({"env_id": "exit-v0", "attacker_limits": {"lateral": []}}, "'lateral'"),
    ({"env_id": "exit-v0", "colour": "red"}, "colour"),
    ({"env_id": "exit-v0", "name": "highway"}, "name"),
])
def test_bad_declarations_name_the_family_and_the_key(data, key, tmp_path):
    data = {"name": "bad-family", **data}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        families.load_family_file(path)
    message = str(err.value)
    assert f"scenario family {data['name']!r}" in message and key in message
    assert data["name"] == "highway" or data["name"] not in highway.FAMILIES  # nothing registered on failure


def test_a_schema_error_is_the_house_one_line_naming_file_family_field_and_fix(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "slow"\nenv_id = "exit-v0"\nduration_s = -1\n')
    with pytest.raises(ValueError) as err:
        families.load_family_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: scenario family 'slow': field `duration_s` is invalid: ")
    assert "(got -1)" in message and "see the format in environments/adv0/sim/families.py" in message
    assert "slow" not in highway.FAMILIES


def test_suite_option_family_file_runs_that_family(tmp_path):
    path = Path(tmp_path) / "exit.toml"
    path.write_text(EXIT_TOML)
    run_dir = Path(tmp_path) / "runs"
    with running_server("--echo", "--reply", '{"action": "IDLE"}') as url:
        proc = harness_cli("eval", "--suite", "adv0", "--model", "openai/driver", "--base-url", url,
                           "--suite-option", f"family_file={path}", "--suite-option", "seeds=1",
                           "--suite-option", "attacker=closed_loop", "--suite-option", "filmstrips=false",
                           "--run-dir", str(run_dir), "--no-progress")
        bad = harness_cli("eval", "--suite", "adv0", "--model", "openai/driver", "--base-url", url,
                          "--suite-option", f"family_file={tmp_path}/missing.toml", "--run-dir", str(run_dir),
                          "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in run_dir.iterdir() if p.is_dir()]
    (record,) = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert record["sample_id"] == "exit-sparse/seed1000000" and record["status"] == "ok"
    assert record["output"]["episode"]["family"] == "exit-sparse" and record["scores"]["held_out"] is True
    assert not any(a.endswith("accelerate") for a in record["output"]["episode"]["attacker_trajectory"]["actions"])
    assert bad.returncode != 0 and "missing.toml" in bad.stderr and "Traceback" not in bad.stderr
