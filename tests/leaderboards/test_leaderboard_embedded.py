"""Leaderboard, comparison and viewer over runs of the embedded model (slow: it generates on CPU).

One run uses the embedded model in every role (a 135M judge mostly fails to produce a verdict:
SKIPPED, which the leaderboard must carry as "no value", not as zero); one uses it as the model
under test with an instant loopback judge, so both runs share their samples. The same command
run again over a copy of the run dir checks the call cache (end to end, on the real model).
"""

from __future__ import annotations

import io
import json
import shutil

import pandas as pd
import pytest

from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import JUDGE_PASS, harness_cli
from tests.leaderboards.runs import torch_env
from tests.leaderboards.test_viewer import get, serving

pytestmark = pytest.mark.slow
HEADLINE = "proactivity_overall_weighted_score"
SMALL = ("--suite", "proact", "--limit", "2", "--max-tokens", "16", "--no-progress")


@pytest.fixture(scope="module")
def embedded_runs(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("embedded-runs")
    ids = {}
    proc = harness_cli("eval", *SMALL, "--judge-max-tokens", "32", "--run-dir", str(run_dir), env=torch_env())
    assert proc.returncode == 0, proc.stderr
    [ids["local"]] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists()]
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", *SMALL, "--judge-model", "openai/judge", "--base-url", url, "--run-dir", str(run_dir),
                           env=torch_env())
    assert proc.returncode == 0, proc.stderr
    [ids["loopback"]] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists() and p.name != ids["local"]]
    return run_dir, ids


def _export(run_dir, fmt: str, *extra: str) -> str:
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--format", fmt, "--run-dir", str(run_dir), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_format_over_embedded_model_runs(embedded_runs, tmp_path):
    run_dir, ids = embedded_runs
    frame = pd.read_csv(io.StringIO(_export(run_dir, "csv")))
    assert sorted(frame["judge"]) == ["local/smollm2-135m", "openai/judge"]
    assert set(frame["model"]) == {"local/smollm2-135m"} and set(frame["n"]) == {2}
    for metric in (HEADLINE, "proactivity_emergent_pass_rate"):
        assert {metric, f"{metric}_ci_low", f"{metric}_ci_high"} <= set(frame.columns)
    judged = frame[frame["judge"] == "openai/judge"].iloc[0]
    assert judged[HEADLINE] == 1.0 and judged["rank"] == 1 and judged["judge_prompt_tokens"] > 0
    local = frame[frame["judge"] == "local/smollm2-135m"].iloc[0]
    summary = RunFolder(run_dir, ids["local"]).read_summary()
    if summary.metrics[HEADLINE].value is None:  # every verdict SKIPPED: no value and no rank, never a zero
        assert pd.isna(local[HEADLINE]) and pd.isna(local["rank"])
    else:
        assert local[HEADLINE] == pytest.approx(summary.metrics[HEADLINE].value, abs=1e-6)
    assert local["assistant_completion_tokens"] <= 16 * local["assistant_calls"]

    md = _export(run_dir, "md")
    assert md.count("\n## judge ") == 2 and ids["local"] in md and ids["loopback"] in md
    doc = json.loads(_export(run_dir, "json"))
    assert {r["judge"] for r in doc["rows"]} == {"local/smollm2-135m", "openai/judge"}
    out = tmp_path / "report.html"
    _export(run_dir, "html", "--out", str(out))
    html = out.read_text()
    assert html.count("<svg") == 2 and "<script" not in html


def test_compare_and_view_embedded_model_runs(embedded_runs):
    run_dir, ids = embedded_runs
    proc = harness_cli("leaderboard", "compare", ids["loopback"], ids["local"], "--run-dir", str(run_dir), "--json",
                       "--resamples", "500")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["shared_samples"] == 2 and doc["notes"] == ["judge differs: A openai/judge, B local/smollm2-135m"]
    head = doc["metrics"][0]
    assert head["metric"] == HEADLINE and head["n"] <= 2
    if head["n"]:
        assert head["a"] == 1.0 and head["diff"] == pytest.approx(1.0 - head["b"])
    else:  # no sample got a verdict from the small judge: nothing to pair, said as such
        assert head["diff"] is None and head["p_value"] is None
    with serving(run_dir) as url:
        status, html, _ = get(f"{url}/runs/{ids['local']}/samples/0")
    record = RunFolder(run_dir, ids["local"]).read_samples()
    assert status == 200 and any(r.sample_id in html for r in record)
    assert 'class="label ' in html and "model under test" in html


def test_a_rerun_is_identical_from_the_cache(embedded_runs, tmp_path):
    """The same command again over a copy of the run dir (its call cache included): every call a
    cache hit, the same replies and verdicts; sampling used the per-sample seed, usage per role."""
    run_dir, ids = embedded_runs
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    proc = harness_cli("eval", *SMALL, "--judge-max-tokens", "32", "--run-dir", str(copy), env=torch_env())
    assert proc.returncode == 0, proc.stderr
    assert HEADLINE in proc.stdout
    [rerun] = [p.name for p in copy.iterdir() if (p / "manifest.json").exists() and p.name not in ids.values()]
    a, b = (sorted(RunFolder(copy, i).read_samples(), key=lambda r: r.key) for i in (ids["local"], rerun))
    texts = lambda recs: [t["assistant_response"] for r in recs for t in r.output["turn_records"]]  # noqa: E731
    verdicts = lambda recs: [v["evaluation_result"] for r in recs for v in r.scores["verdicts"]]  # noqa: E731
    assert len(a) == len(b) == 2 and texts(a) == texts(b) and verdicts(a) == verdicts(b)
    assert all(c.cached for r in b for c in r.calls) and not any(c.cached for r in a for c in r.calls)
    for rec in a:
        assert rec.usage["assistant"].calls == len(rec.output["trigger_points"])
        assert rec.usage["judge"].calls >= len(rec.output["trigger_points"])
        assert rec.usage["assistant"].completion_tokens <= 16 * rec.usage["assistant"].calls
    counts = RunFolder(copy, rerun).read_summary().counts
    judged = counts["triggers_pass"] + counts["triggers_partial"] + counts["triggers_fail"] + counts["triggers_skipped"]
    assert judged == sum(len(r.output["trigger_points"]) for r in a)
