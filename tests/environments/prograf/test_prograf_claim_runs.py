"""The ProGraf claim check as ordinary runs: `harness prograf check` leaves one `prograf-loop` run
per method in the run dir (records, the claim's stamp, the subset as option `tasks`), a second check
reuses them without running a sample, `harness prograf verdict RUN...` recomputes the same verdict
from their records, and bad input (a run of another claim or suite, a missing method, runs of two
generators or subsets) is one error naming the piece. Also the suite's `tasks` and profile-digest
options."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from environments.prograf import mock
from environments.prograf.claim import CLAIM, read_runs, report_from_runs
from environments.prograf.commands import prograf_app
from environments.prograf.generate.build import CORPUS
from environments.prograf.loop_suite import LoopOptions, ProGrafLoopSuite, cached_tasks, file_sha256
from environments.prograf.mock import StepMock
from environments.prograf.profile import build_profile
from harness.claims import load_verdicts
from harness.claims.runs import load_runs
from harness.errors import HarnessError
from harness.records import RoleConfig
from harness.run_folder import RunIndex
from harness.suite import get_suite

GENERATOR = "synthetic/prograf-weak-circuits"
METHODS = ["loop", "no-profile", "fixed-step", "reflexion", "best-of", "single-shot"]


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory):
    tasks = [t for t in cached_tasks(CORPUS) if t.category == "circuit"][:30]
    profile = asyncio.run(build_profile(StepMock("weak-circuits", tasks), tasks, generator=GENERATOR, k=3))
    path = tmp_path_factory.mktemp("claim-runs") / "weak.json"
    profile.save(path)
    assert len(profile.hardest) >= 3
    return path


@pytest.fixture
def calls(monkeypatch):
    """Every generator call the mock answers (the check's models are the `synthetic` provider's StepMock)."""
    seen = {"n": 0}
    generate = mock.StepMock.generate

    async def counting(self, messages, config):
        seen["n"] += 1
        return await generate(self, messages, config)

    monkeypatch.setattr(mock.StepMock, "generate", counting)
    return seen


def check(profile_path, run_dir, out):
    return CliRunner().invoke(prograf_app, ["check", "--generator", GENERATOR, "--profile", str(profile_path),
                                            "--limit", "3", "--budget", "2", "--run-dir", str(run_dir),
                                            "--out", str(out)])


@pytest.fixture(scope="module")
def checked(profile_path, tmp_path_factory):
    """One check, its run dir and its report (JSON)."""
    run_dir = tmp_path_factory.mktemp("runs")
    result = check(profile_path, run_dir, run_dir / "report.json")
    assert result.exit_code == 0, result.output
    return run_dir, json.loads((run_dir / "report.json").read_text()), result.output


def test_check_leaves_one_run_per_method_with_records(checked):
    run_dir, report, output = checked
    assert list(report["runs"]) == METHODS and report["tasks"] == 3
    runs = load_runs(run_dir, list(report["runs"].values()))
    tasks = None
    for method, run in zip(METHODS, runs):
        config = run.manifest.config
        assert run.manifest.status == "complete" and config.suite == "prograf-loop"
        assert config.claim == CLAIM.stamp() and config.models == {"assistant": GENERATOR}
        assert config.suite_options["pictures"] is False and config.suite_options["budget"] == 2
        assert len(run.records) == 3 and all(r.status == "ok" for r in run.records)
        assert tasks in (None, config.suite_options["tasks"])
        tasks = config.suite_options["tasks"]
        assert {r.sample_id for r in run.records} == set(tasks.split(","))
        assert any(line.startswith(method + " ") and line.endswith(run.run_id) for line in output.splitlines())
    index = RunIndex(run_dir)  # what `harness runs` lists
    try:
        assert {row["run_id"] for row in index.runs()} == set(report["runs"].values())
    finally:
        index.close()


def test_verdict_from_the_runs_equals_the_checks(checked, tmp_path):
    run_dir, report, _ = checked
    [saved] = load_verdicts([run_dir])
    result = CliRunner().invoke(prograf_app, ["verdict", *report["runs"].values(), "--run-dir", str(run_dir),
                                              "--out", str(tmp_path / "again.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "again.json").read_text()) == report
    [again] = load_verdicts([run_dir])  # saved over the check's (same claim, same generator)
    assert again.wall_s is None and saved.wall_s is not None
    assert again.model_dump(exclude={"wall_s"}) == saved.model_dump(exclude={"wall_s"})
    assert f"claim {CLAIM.id} {report['verdict'].upper()}" in result.output


def test_second_check_reuses_the_finished_runs(checked, profile_path, calls):
    run_dir, report, _ = checked
    before = {run.run_id: len(run.records) for run in load_runs(run_dir, list(report["runs"].values()))}
    result = check(profile_path, run_dir, run_dir / "second.json")
    assert result.exit_code == 0, result.output
    assert calls["n"] == 0  # no sample ran: no generator call
    second = json.loads((run_dir / "second.json").read_text())
    assert second["runs"] == report["runs"] and result.output.count("reusing finished run") == len(METHODS)
    assert {run.run_id: len(run.records) for run in load_runs(run_dir, list(second["runs"].values()))} == before
    assert {k: v for k, v in second.items() if k != "cells_s"} == {k: v for k, v in report.items() if k != "cells_s"}


def _with(run, **config):
    manifest = run.manifest.model_copy(update={"config": run.manifest.config.model_copy(update=config)})
    return type(run)(run.run_id, manifest, run.records)


def test_verdict_names_bad_input(checked):
    run_dir, report, _ = checked
    runs = load_runs(run_dir, list(report["runs"].values()))
    assert report_from_runs(runs).verdict == report["verdict"]
    without = [r for m, r in zip(METHODS, runs) if m != "reflexion"]
    result = CliRunner().invoke(prograf_app, ["verdict", *(r.run_id for r in without), "--run-dir", str(run_dir)])
    assert result.exit_code != 0 and "lack method reflexion" in result.output
    bad = CliRunner().invoke(prograf_app, ["verdict", "no-such-run", "--run-dir", str(run_dir)])
    assert bad.exit_code != 0 and "no-such-run: not found" in bad.output
    cases = {
        "a prograf run, not prograf-loop": _with(runs[1], suite="prograf"),
        "started for claim papers.x, not prograf.recovery": _with(runs[1], claim="papers.x@0123"),
        "started under criterion prograf.recovery@0123": _with(runs[1], claim="prograf.recovery@0123"),
        "not started by a claim check": _with(runs[1], claim=None),
        "two generators (synthetic/prograf-weak-circuits, synthetic/prograf-uniform)":
            _with(runs[1], roles={"assistant": RoleConfig(model="synthetic/prograf-uniform")}),
        "ran two task subsets (3 and 2 tasks": _with(runs[1], suite_options=runs[1].manifest.config.suite_options
                                                    | {"tasks": ",".join(sorted(runs[1].manifest.config.suite_options["tasks"].split(","))[:2])}),
        "differ in option seed_base": _with(runs[1], suite_options=runs[1].manifest.config.suite_options
                                            | {"seed_base": 7}),
        "are both method loop": _with(runs[1], suite_options=runs[0].manifest.config.suite_options),
    }
    for message, swapped in cases.items():
        with pytest.raises(HarnessError, match=message.replace("(", r"\(").replace(")", r"\)")):
            read_runs([runs[0], swapped, *runs[2:]])


def test_tasks_option_picks_tasks_and_names_an_unknown_one(profile_path):
    every = [t.id for t in cached_tasks(CORPUS)]
    assert LoopOptions().model_dump(exclude_defaults=True) == {}  # a run that sets none hashes as before
    suite = get_suite("prograf-loop", {"subset": "all", "tasks": f"{every[5]}, {every[2]},{every[5]}"})
    assert [s.id for s in suite.load_samples(None)] == [every[2], every[5]]  # corpus order, once each
    with pytest.raises(HarnessError, match="tasks names no-such-task: not a task of the corpus"):
        get_suite("prograf-loop", {"subset": "all", "tasks": f"{every[0]},no-such-task"}).load_samples(None)
    geometry = next(t.id for t in cached_tasks(CORPUS) if t.category == "geometry")
    with pytest.raises(HarnessError, match=f"tasks names {geometry}, which category=circuit"):
        get_suite("prograf-loop", {"subset": "all", "category": "circuit", "tasks": geometry}).load_samples(None)


def test_a_changed_profile_is_an_error(profile_path):
    digest = file_sha256(str(profile_path))
    ok = ProGrafLoopSuite(LoopOptions(profile=str(profile_path), profile_sha256=digest))
    assert ok.load_samples(None)
    stale = ProGrafLoopSuite(LoopOptions(profile=str(profile_path), profile_sha256="0" * 64))
    with pytest.raises(HarnessError, match="profile=.*weak.json is not the file this run was set up with"):
        stale.load_samples(None)


def test_the_core_claims_commands_send_prograf_to_its_own(checked):
    """`harness claims verdict` reads the core's SETTING/seedNNN cells; a ProGraf check's runs are
    one run per method over tasks, so it names the family's command instead of misreading them."""
    from harness.cli.claims_cmds import claims_app

    run_dir, report, _ = checked
    result = CliRunner().invoke(claims_app, ["verdict", *report["runs"].values(), "--run-dir", str(run_dir)])
    assert result.exit_code != 0 and "harness prograf verdict RUN" in " ".join(result.output.split())
    result = CliRunner().invoke(claims_app, ["check", CLAIM.id, "--run-dir", str(run_dir)])
    assert result.exit_code != 0 and "harness prograf check --generator SPEC" in " ".join(result.output.split())
