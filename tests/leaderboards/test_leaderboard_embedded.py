"""Leaderboard, comparison and viewer over runs of the embedded model (slow: it generates on CPU).

The embedded model is the model under test in two runs that share their samples; their judges are
instant loopback servers. One always says PASS. One never answers in a verdict's form, so every
trigger is SKIPPED, which the leaderboard must carry as "no value", not as zero; the second run's
replies come from the run dir's call cache (the same model, messages and seeds), so the model
generates once. (Until session 28 that judge was the embedded model itself: its three attempts per
trigger were most of this file's CPU time and only sometimes parsed; the embedded judge is now
exercised by tests/environments/proact/test_proact_live.py.) The first command run again over a
copy of the run dir checks the call cache end to end on the real model's replies.
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
MUTE = "I would rather not grade this reply."  # never a verdict: SKIPPED after every attempt
JUDGES = {"pass": "openai/judge", "mute": "openai/mute"}


@pytest.fixture(scope="module")
def judge_urls():
    """The two judges, alive for the module: the rerun test's command must be the first run's."""
    with running_server("--echo", "--reply", JUDGE_PASS) as passing, running_server("--echo", "--reply", MUTE) as mute:
        yield {"pass": passing, "mute": mute}


def _eval(run_dir, judge_urls, judge: str) -> str:
    """`harness eval` of the embedded model under one of the judges; the new run's id."""
    before = {p.name for p in run_dir.iterdir()}
    proc = harness_cli("eval", *SMALL, "--judge-model", JUDGES[judge], "--base-url", judge_urls[judge],
                       "--run-dir", str(run_dir), env=torch_env())
    assert proc.returncode == 0, proc.stderr
    assert HEADLINE in proc.stdout
    [new] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists() and p.name not in before]
    return new


@pytest.fixture(scope="module")
def embedded_runs(tmp_path_factory, judge_urls):
    run_dir = tmp_path_factory.mktemp("embedded-runs")
    ids = {judge: _eval(run_dir, judge_urls, judge) for judge in ("pass", "mute")}
    return run_dir, ids


def _export(run_dir, fmt: str, *extra: str) -> str:
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--format", fmt, "--run-dir", str(run_dir), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_format_over_embedded_model_runs(embedded_runs, tmp_path):
    run_dir, ids = embedded_runs
    frame = pd.read_csv(io.StringIO(_export(run_dir, "csv")))
    assert sorted(frame["judge"]) == ["openai/judge", "openai/mute"]
    assert set(frame["model"]) == {"local/smollm2-135m"} and set(frame["n"]) == {2}
    for metric in (HEADLINE, "proactivity_emergent_pass_rate"):
        assert {metric, f"{metric}_ci_low", f"{metric}_ci_high"} <= set(frame.columns)
    judged = frame[frame["judge"] == "openai/judge"].iloc[0]
    assert judged[HEADLINE] == 1.0 and judged["rank"] == 1 and judged["judge_prompt_tokens"] > 0
    assert 0 < judged["assistant_completion_tokens"] <= 16 * judged["assistant_calls"]
    # Every verdict SKIPPED: no value and no rank, never a zero.
    mute = frame[frame["judge"] == "openai/mute"].iloc[0]
    assert RunFolder(run_dir, ids["mute"]).read_summary().metrics[HEADLINE].value is None
    assert pd.isna(mute[HEADLINE]) and pd.isna(mute["rank"])

    md = _export(run_dir, "md")
    assert md.count("\n## judge ") == 2 and ids["pass"] in md and ids["mute"] in md
    doc = json.loads(_export(run_dir, "json"))
    assert {r["judge"] for r in doc["rows"]} == {"openai/judge", "openai/mute"}
    out = tmp_path / "report.html"
    _export(run_dir, "html", "--out", str(out))
    html = out.read_text()
    assert html.count("<svg") == 2 and "<script" not in html


def test_compare_and_view_embedded_model_runs(embedded_runs):
    run_dir, ids = embedded_runs
    proc = harness_cli("leaderboard", "compare", ids["pass"], ids["mute"], "--run-dir", str(run_dir), "--json",
                       "--resamples", "500")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["shared_samples"] == 2 and doc["notes"] == ["judge differs: A openai/judge, B openai/mute"]
    head = doc["metrics"][0]
    # No sample got a verdict from the mute judge: nothing to pair, said as such.
    assert head["metric"] == HEADLINE and head["n"] == 0 and head["diff"] is None and head["p_value"] is None
    with serving(run_dir) as url:
        status, html, _ = get(f"{url}/runs/{ids['pass']}/samples/0")
    record = RunFolder(run_dir, ids["pass"]).read_samples()
    assert status == 200 and any(r.sample_id in html for r in record)
    assert 'class="label ' in html and "model under test" in html


def test_a_rerun_is_identical_from_the_cache(embedded_runs, judge_urls, tmp_path):
    """The first command again over a copy of the run dir (its call cache included): every call a
    cache hit, the same replies and verdicts; sampling used the per-sample seed, usage per role.
    The second run already read the same replies from the cache: only its judge was called."""
    run_dir, ids = embedded_runs
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    rerun = _eval(copy, judge_urls, "pass")
    a, b, mute = (sorted(RunFolder(copy, i).read_samples(), key=lambda r: r.key) for i in (ids["pass"], rerun, ids["mute"]))
    texts = lambda recs: [t["assistant_response"] for r in recs for t in r.output["turn_records"]]  # noqa: E731
    verdicts = lambda recs: [v["evaluation_result"] for r in recs for v in r.scores["verdicts"]]  # noqa: E731
    assert len(a) == len(b) == 2 and texts(a) == texts(b) and verdicts(a) == verdicts(b)
    assert all(c.cached for r in b for c in r.calls) and not any(c.cached for r in a for c in r.calls)
    assert texts(mute) == texts(a) and all(c.cached == (c.role == "assistant") for r in mute for c in r.calls)
    assert {v["status"] for v in verdicts(mute)} == {"SKIPPED"}
    for rec in a:
        assert rec.usage["assistant"].calls == rec.usage["judge"].calls == len(rec.output["trigger_points"])
        assert rec.usage["assistant"].completion_tokens <= 16 * rec.usage["assistant"].calls
        assert {c.model for c in rec.calls if c.role == "assistant"} == {"local/smollm2-135m"}
    counts = RunFolder(copy, rerun).read_summary().counts
    assert counts["triggers_pass"] == sum(len(r.output["trigger_points"]) for r in a)
