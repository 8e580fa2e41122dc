"""Roles as data: `RunConfig.roles` (model, endpoint, generation overrides per role), the general
flags `--role` / `--role-config` with the older flags as shorthands, and runs written before the
change (`tests/fixtures/runs_before_roles`, written by the code of 2026-12-06 before roles were
data: per-role endpoints, assistant and judge overrides, a judge panel) loading, hashing as they
did, resuming and re-scoring."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from harness.cli.run_cmds import eval_cmd, score_cmd
from harness.errors import HarnessError
from harness.loopback import running_server
from harness.records import RoleConfig, RunConfig
from harness.run_folder import RunFolder
from harness.roles import assign_roles, parse_role_flags
from harness.runner import config_hash
from harness.suite import get_suite
from tests.conftest import JUDGE_PASS, REPO, harness_cli

FIXTURE = REPO / "tests" / "fixtures" / "runs_before_roles"
OVERRIDES = "proact-20261206T153314-f33ae5"  # --max-tokens 64 --temperature 0.5 --judge-max-tokens 32, judge endpoint
PANEL = "proact-20261206T153335-37d962"  # two judges, --temperature 0.25 --judge-max-tokens 32
PROACT_ROLES = ("assistant", "judge")


@pytest.fixture()
def old_runs(tmp_path) -> Path:
    run_dir = tmp_path / "runs"
    shutil.copytree(FIXTURE, run_dir)
    return run_dir


def hash_of(config: RunConfig, run_dir: Path, run_id: str) -> str:
    manifest = RunFolder(run_dir, run_id).read_manifest()
    return config_hash(get_suite(config.suite, config.suite_options), config, manifest.corpus)


def config_from(*args: str) -> RunConfig:
    """What `harness eval --suite proact --model openai/m ARGS` builds (the CLI's own functions)."""
    flags = parse_role_flags([a.split("=", 1)[1] for a in args if a.startswith("role=")],
                             [a.split("=", 1)[1] for a in args if a.startswith("role-config=")],
                             [a for a in args if not a.startswith(("role=", "role-config="))])
    return RunConfig(suite="proact", roles=assign_roles(PROACT_ROLES, "openai/m", flags), limit=2)


def test_a_run_written_before_loads_as_roles_and_hashes_as_it_did(old_runs):
    manifest = RunFolder(old_runs, OVERRIDES).read_manifest()
    roles = manifest.config.roles
    assert roles["assistant"] == RoleConfig(model="openai/m", max_tokens=64, temperature=0.5)
    assert roles["judge"].model == "openai/j" and roles["judge"].max_tokens == 32 and roles["judge"].base_url
    assert manifest.config.overrides() == {"assistant": {"max_tokens": 64, "temperature": 0.5}, "judge": {"max_tokens": 32}}
    for run_id in (OVERRIDES, PANEL):
        m = RunFolder(old_runs, run_id).read_manifest()
        assert hash_of(m.config, old_runs, run_id) == m.config_hash  # so it resumes and its cache still answers
    # The same flags today build a config with the same hash: shorthands and the general form alike.
    old_flags = config_from("--judge-model", "openai/j", "--max-tokens", "64", "--temperature", "0.5",
                            "--judge-max-tokens", "32", "--role-base-url", "judge=http://elsewhere:1/v1")
    general = config_from("role=judge=openai/j", "role-config=assistant.max_tokens=64",
                          "role-config=assistant.temperature=0.5", "role-config=judge.max_tokens=32")
    assert hash_of(old_flags, old_runs, OVERRIDES) == hash_of(general, old_runs, OVERRIDES) == manifest.config_hash


def test_overrides_the_old_form_could_not_hold_change_the_hash_and_reach_the_role():
    base = config_from("--judge-model", "openai/j")
    planner_like = config_from("--judge-model", "openai/j", "role-config=judge.temperature=0.3")
    assert "role_settings" not in base.result_fields()
    assert planner_like.result_fields()["role_settings"] == {"judge": {"temperature": 0.3}}
    assert planner_like.overrides() == {"judge": {"temperature": 0.3}}
    # --judge-max-tokens reaches every judge of a panel (before, only `judge` got it)
    panel = config_from("--judge-model", "openai/j", "--judge-model", "openai/j2", "--judge-max-tokens", "32")
    assert panel.overrides() == {"judge": {"max_tokens": 32}, "judge_2": {"max_tokens": 32}}
    assert panel.result_fields()["role_settings"] == {"judge_2": {"max_tokens": 32}}
    # the general form wins over its shorthand
    both = config_from("--judge-model", "openai/j", "--max-tokens", "10", "role-config=assistant.max_tokens=20")
    assert both.roles["assistant"].max_tokens == 20


@pytest.mark.parametrize(("args", "must"), [
    (["--limt", "5"], "no such option: --limt"),
    (["--judge-model"], "--judge-model needs a value"),
    (["--planner-model", "openai/p"], "no role 'planner'"),
    (["role-config=judge.top_k=3"], "ROLE.KEY=VALUE with KEY one of base_url, max_tokens, temperature"),
    (["role-config=judge.max_tokens=0"], "--role-config judge.max_tokens='0'"),
    (["role-config=critic.max_tokens=5"], "no role 'critic'"),
])
def test_bad_role_flags_name_the_flag_and_the_fix(args, must):
    with pytest.raises(HarnessError, match=must.replace(".", r"\.").replace("(", r"\(")):
        config_from(*args)


def test_legacy_keyword_configs_still_build_and_reject_what_cannot_be():
    old = RunConfig(suite="s", models={"assistant": "a", "judge": "j"}, max_tokens=5, judge_max_tokens=7,
                    base_urls={"judge": "http://h/v1"})
    assert old.roles["judge"] == RoleConfig(model="j", max_tokens=7, base_url="http://h/v1")
    assert old.endpoint("judge") == "http://h/v1" and old.endpoint("assistant") is None
    with pytest.raises(ValueError, match="judge_max_tokens = 7 is an override for the judge role"):
        RunConfig(suite="s", models={"assistant": "a"}, judge_max_tokens=7)
    with pytest.raises(ValueError, match="base_urls names role 'judge'"):
        RunConfig(suite="s", models={"assistant": "a"}, base_urls={"judge": "http://h/v1"})


def test_eval_and_score_keep_their_parameters_few():
    # The command's own parameters; the shared RunOptions arrive as one (`run`).
    for command in (eval_cmd, score_cmd):
        own = inspect.signature(command.command).parameters  # type: ignore[attr-defined]
        assert len(own) <= 15 and "run" in own, list(own)
    assert len(inspect.signature(eval_cmd.command).parameters) == 13  # type: ignore[attr-defined]


def test_an_old_run_resumes_and_rescores_with_the_shorthands(old_runs):
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--resume", OVERRIDES, "--base-url", url, "--role-base-url", f"judge={url}",
                           "--run-dir", str(old_runs), "--no-progress")
        assert proc.returncode == 0, proc.stderr
        assert "0 to go" in proc.stderr
        before = {p.name for p in old_runs.iterdir()}
        proc = harness_cli("score", PANEL, "--judge-model", "openai/k", "--judge-max-tokens", "16", "--base-url", url,
                           "--run-dir", str(old_runs), "--no-progress")
        assert proc.returncode == 0, proc.stderr
    [new] = {p.name for p in old_runs.iterdir()} - before
    manifest = RunFolder(old_runs, new).read_manifest()
    assert manifest.source_run == PANEL and manifest.config.models == {"assistant": "openai/m", "judge": "openai/k"}
    assert manifest.config.roles["assistant"].temperature == 0.25  # what the transcripts were made with, kept
    assert manifest.config.roles["judge"].max_tokens == 16
    records = RunFolder(old_runs, new).read_samples()
    assert len(records) == 2 and all(lab["label"] == "PASS" for r in records for lab in r.scores["triggers"])
