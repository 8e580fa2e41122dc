"""`harness leaderboard compare`: paired bootstrap over shared samples, on real runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.run_folder import RunFolder
from leaderboards.compare import compare_runs, paired_bootstrap
from tests.conftest import harness_cli
from tests.leaderboards.runs import write_run

HEADLINE = "proactivity_overall_weighted_score"


def _compare(runs, a: str, b: str, *extra: str):
    return harness_cli("leaderboard", "compare", runs.ids[a], runs.ids[b], "--run-dir", str(runs.main),
                       "--run-dir", str(runs.other), *extra)


def test_paired_bootstrap_statistics():
    rng = np.random.default_rng(1)
    base = rng.random(200)
    better = base + 0.1 + rng.normal(0, 0.02, 200)
    diff, lo, hi, p = paired_bootstrap(better, base, resamples=2000, seed=0)
    assert diff == pytest.approx(float((better - base).mean()))
    assert lo < diff < hi and lo > 0.09 and hi < 0.11
    assert p == pytest.approx(1 / 2001)  # no resample comes near zero: the smallest p B draws can give
    # Same inputs and seed: the same answer; swapping A and B flips the sign.
    assert paired_bootstrap(better, base, resamples=2000, seed=0) == (diff, lo, hi, p)
    neg = paired_bootstrap(base, better, resamples=2000, seed=0)
    assert neg[0] == pytest.approx(-diff) and neg[1] == pytest.approx(-hi) and neg[2] == pytest.approx(-lo)
    # Noise around no difference: a large p, an interval around zero.
    noise = rng.normal(0, 1, 200)
    _, lo, hi, p = paired_bootstrap(base + noise, base, resamples=2000, seed=0)
    assert lo < 0 < hi and p > 0.05
    # Identical runs: zero difference, p = 1.
    assert paired_bootstrap(base, base, resamples=500, seed=0) == (0.0, 0.0, 0.0, 1.0)


def test_pass_run_against_fail_run_cli(loopback_runs):
    proc = _compare(loopback_runs, "a0", "c", "--json", "--resamples", "500")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["shared_samples"], doc["only_a"], doc["only_b"]) == (3, 0, 0)
    assert doc["notes"] == []  # same judge, same suite version
    head = doc["metrics"][0]
    assert head["metric"] == HEADLINE
    assert (head["a"], head["b"], head["diff"], head["diff_ci_low"], head["diff_ci_high"]) == (1.0, 0.0, 1.0, 1.0, 1.0)
    assert head["p_value"] == pytest.approx(1 / 501)
    assert (head["n"], head["a_better"], head["b_better"], head["flipped"]) == (3, 3, 0, 3)
    partial = next(m for m in doc["metrics"] if m["metric"] == "proactivity_overall_partial_rate")
    assert partial["diff"] == 0.0 and partial["p_value"] == 1.0 and partial["flipped"] == 0
    # Deterministic: the same command prints the same numbers.
    assert _compare(loopback_runs, "a0", "c", "--json", "--resamples", "500").stdout == proc.stdout
    table = _compare(loopback_runs, "a0", "c", "--metric", HEADLINE)
    assert table.returncode == 0, table.stderr
    assert HEADLINE in table.stdout and "+1.000" in table.stdout and "proactivity_overall_pass_rate" not in table.stdout


def test_runs_across_run_dirs_and_different_judges_are_compared_with_a_note(loopback_runs):
    proc = _compare(loopback_runs, "b", "ak")  # b lives in the second run dir; ak has judge k
    assert proc.returncode == 0, proc.stderr
    assert "note: judge differs: A openai/j, B openai/k" in proc.stderr
    assert "3 shared samples" in proc.stdout


def test_unit_values_are_the_suites_metric_on_each_sample(loopback_runs):
    """Mean per-unit value equals the suite's pooled value when every unit has the same weight:
    here every dialogue has one trigger of the type measured."""
    from harness.suite import get_suite

    result = compare_runs([loopback_runs.main], loopback_runs.ids["a0"], loopback_runs.ids["c"],
                          metrics=["proactivity_emergent_pass_rate"], resamples=200)
    [m] = result.metrics
    records = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()
    assert m.mean_a == get_suite("proact").metrics(records)["proactivity_emergent_pass_rate"].value


def _error_line(proc) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_bad_compare_input_is_one_clear_line(loopback_runs, tmp_path):
    runs = loopback_runs
    line = _error_line(harness_cli("leaderboard", "compare", runs.ids["a0"], "no-such-run", "--run-dir", str(runs.main)))
    assert "'no-such-run'" in line and "harness runs" in line
    line = _error_line(harness_cli("leaderboard", "compare", runs.ids["a0"], runs.ids["a0"], "--run-dir", str(runs.main)))
    assert "itself" in line
    line = _error_line(_compare(runs, "a0", "c", "--metric", "accuracy"))
    assert "'accuracy'" in line and HEADLINE in line
    line = _error_line(harness_cli("leaderboard", "compare", "x", "y", "--run-dir", str(tmp_path / "missing")))
    assert "missing" in line and "--run-dir DIR" in line
    # Two runs over different samples share nothing to pair.
    records = RunFolder(runs.main, runs.ids["a0"]).read_samples()
    renamed = [r.model_copy(update={"sample_id": "other-" + r.sample_id}) for r in records]
    write_run(tmp_path, "proact-renamed", renamed)
    write_run(tmp_path, "proact-original", records)
    line = _error_line(harness_cli("leaderboard", "compare", "proact-renamed", "proact-original", "--run-dir", str(tmp_path)))
    assert "share no samples" in line and "same --corpus" in line
