"""Metrics are declared by their suite and recorded in each run's summary, so a leaderboard ranks
and labels them without knowing the suite (issue 36, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.records import Metric, MetricSpec, RunConfig, RunManifest, RunSummary, now_iso
from harness.run_folder import RunFolder, RunIndex
from harness.suite import suite_class
from leaderboards.aggregate import build_leaderboard
from leaderboards.eee import document
from leaderboards.runs import metric_spec

UNINSTALLED = "nosuch-family"  # a suite this machine does not have: the runs came from elsewhere


def _run(run_dir: Path, run_id: str, model: str, err: float, specs: dict[str, MetricSpec]) -> None:
    config = RunConfig(suite=UNINSTALLED, models={"assistant": model})
    manifest = RunManifest(run_id=run_id, suite=UNINSTALLED, suite_version="1", config=config, config_hash=run_id,
                           started=now_iso(), ended=now_iso(), status="complete")
    folder = RunFolder(run_dir, run_id)
    folder.write_manifest(manifest)
    folder.close()
    summary = RunSummary(run_id=run_id, suite=UNINSTALLED, suite_version="1", headline_metric="err",
                         metrics={"err": Metric(value=err, ci_low=err - 0.01, ci_high=err + 0.01, n=50)},
                         metric_specs=specs, counts={"samples": 50, "sample_errors": 0})
    folder.write_summary(summary)
    index = RunIndex(run_dir)
    index.record(manifest, summary, 50, 0)
    index.close()


def test_a_recorded_lower_is_better_metric_ranks_ascending_without_the_suite_installed(tmp_path: Path) -> None:
    lower = {"err": MetricSpec(direction="lower", unit="fraction", description="wrong answers")}
    _run(tmp_path, "r1", "openai/worse", 0.40, lower)
    _run(tmp_path, "r2", "openai/better", 0.10, lower)
    board = build_leaderboard([tmp_path], UNINSTALLED)
    assert [(row.model, row.rank) for row in board.rows] == [("openai/better", 1), ("openai/worse", 2)]
    assert board.spec().unit == "fraction"
    config = document(board, board.rows[0], "0.3.0", now_iso())["evaluation_results"][0]["metric_config"]
    assert config["lower_is_better"] is True and config["metric_unit"] == "fraction"
    assert "wrong answers" in config["evaluation_description"]


def test_an_undeclared_metric_of_an_unknown_suite_ranks_higher_first(tmp_path: Path) -> None:
    _run(tmp_path, "r1", "openai/low", 0.40, {})  # a run written before metrics were declared
    _run(tmp_path, "r2", "openai/high", 0.10, {})
    board = build_leaderboard([tmp_path], UNINSTALLED)
    assert [row.model for row in board.rows] == ["openai/low", "openai/high"]
    assert board.spec() == MetricSpec()


def test_a_summary_written_before_declarations_still_loads(tmp_path: Path) -> None:
    _run(tmp_path, "r1", "openai/a", 0.2, {})
    path = RunFolder(tmp_path, "r1").summary_path
    data = json.loads(path.read_text())
    del data["metric_specs"]
    path.write_text(json.dumps(data))
    assert RunFolder(tmp_path, "r1").read_summary().metric_specs == {}


def test_the_installed_declaration_answers_for_runs_that_recorded_none() -> None:
    adv0 = suite_class("adv0")  # the model drives: fewer defender failures rank first
    assert adv0.metric_spec("defender_failure_rate").lower_is_better
    assert metric_spec("adv0", "defender_failure_rate").lower_is_better
    papers = suite_class("papers.procti_synth_imputation")  # the family's shorthand becomes declarations
    assert papers.metric_spec("mae@attribute").lower_is_better
    ptq = suite_class("papers.ptq_priced_bitalloc")
    assert "accuracy" in ptq.metric_specs and not ptq.metric_spec("accuracy@2.5bits").lower_is_better
