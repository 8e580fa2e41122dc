"""`harness leaderboard export` over real runs: rows, pooling, ties, every format, bad input."""

from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest

from harness.records import Metric
from harness.run_folder import RunFolder
from leaderboards.aggregate import Row, build_leaderboard, rank_rows
from leaderboards.export import to_markdown
from harness.prices import Price, price_for
from tests.conftest import harness_cli
from tests.leaderboards.runs import write_run

HEADLINE = "proactivity_overall_weighted_score"


def _export(runs, *args: str):
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(runs.main),
                       "--run-dir", str(runs.other), *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _error_line(proc) -> str:
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_csv_round_trips_through_pandas_with_one_row_per_model_judge_version(loopback_runs):
    runs = loopback_runs
    frame = pd.read_csv(io.StringIO(_export(runs, "--format", "csv")))
    # a (two seeds pooled), b (other run dir), c: judge j, v1; a: judge k; a: judge j, older version.
    keys = sorted(zip(frame["model"], frame["judge"], frame["suite_version"]))
    assert keys == sorted([("openai/a", "openai/j", "1.0.0"), ("openai/b", "openai/j", "1.0.0"),
                           ("openai/c", "openai/j", "1.0.0"), ("openai/a", "openai/k", "1.0.0"),
                           ("openai/a", "openai/j", "0.9.0")])
    expected = {"rank", "tied", "model", "judge", "judge_note", "suite", "suite_version", "setup", "n", "samples", "errors", "runs",
                "run_ids", "configs", "date", "cost_usd", f"{HEADLINE}_run_sd"}
    for metric in ("proactivity_emergent_pass_rate", "proactivity_critical_weighted_score", HEADLINE):
        expected |= {metric, f"{metric}_ci_low", f"{metric}_ci_high"}
    for role in ("assistant", "judge"):
        expected |= {f"{role}_calls", f"{role}_prompt_tokens", f"{role}_completion_tokens", f"{role}_cost_usd"}
    assert expected <= set(frame.columns)
    assert list(frame.columns[:15]) == ["rank", "tied", "model", "judge", "judge_note", "suite", "suite_version",
                                        "setup", "n", "samples", "errors", "runs", "run_ids", "configs", "date"]
    assert frame["judge_note"].isna().all(), "no judge here is the embedded model"
    assert frame["setup"].isna().all()  # proact's offline protocol: no options, no other roles
    # One value per cell, types a spreadsheet keeps: ISO dates, integer counts, booleans.
    assert pd.to_datetime(frame["date"], format="%Y-%m-%d").notna().all()
    assert frame["n"].dtype.kind == "i" and frame["tied"].dtype == bool
    for metric in (HEADLINE, "proactivity_recovery_pass_rate"):
        assert (frame[f"{metric}_ci_low"] <= frame[metric]).all() and (frame[metric] <= frame[f"{metric}_ci_high"]).all()
    pooled = frame[(frame["model"] == "openai/a") & (frame["judge"] == "openai/j") & (frame["suite_version"] == "1.0.0")]
    row = pooled.iloc[0]
    assert set(row["run_ids"].split(";")) == {runs.ids["a0"], runs.ids["a1"]}
    assert (row["runs"], row["samples"], row["n"], row["configs"]) == (2, 6, 3, 2)  # 3 dialogues, each run twice
    assert frame.loc[frame["model"] == "openai/c", HEADLINE].item() == 0.0
    assert frame.loc[frame["model"] == "openai/b", "run_ids"].item() == runs.ids["b"]  # from the second run dir
    records = [rec for key in ("a0", "a1") for rec in RunFolder(runs.main, runs.ids[key]).read_samples()]
    assert row["assistant_calls"] == sum(r.usage["assistant"].calls for r in records) >= 18  # >= 3 triggers x 6
    assert row["assistant_prompt_tokens"] == sum(r.usage["assistant"].prompt_tokens for r in records) > 0


def test_pooled_row_is_the_suites_own_metric_over_every_sample_of_its_runs(loopback_runs):
    from harness.suite import get_suite

    runs = loopback_runs
    board = build_leaderboard([runs.main], "proact")
    [row] = [r for r in board.rows if (r.model, r.judge, r.suite_version) == ("openai/a", "openai/j", "1.0.0")]
    records = [rec for key in ("a0", "a1") for rec in RunFolder(runs.main, runs.ids[key]).read_samples()]
    assert row.metrics == get_suite("proact").metrics(records, seed=0)
    # A single-run row keeps what its summary recorded.
    [c] = [r for r in board.rows if r.model == "openai/c"]
    assert c.metrics == RunFolder(runs.main, runs.ids["c"]).read_summary().metrics


def test_versions_and_judges_get_their_own_rows_and_rank_groups(loopback_runs):
    board = build_leaderboard([loopback_runs.main], "proact")
    groups = {key: [(r.model, r.rank, r.tied) for r in rows] for key, rows in board.groups()}
    assert groups == {
        ("openai/j", "0.9.0"): [("openai/a", 1, False)],
        ("openai/j", "1.0.0"): [("openai/a", 1, False), ("openai/c", 2, False)],
        ("openai/k", "1.0.0"): [("openai/a", 1, False)],
    }
    by_model = build_leaderboard([loopback_runs.main], "proact", group_by=("model",))
    assert [key for key, _ in by_model.groups()] == [("openai/a",), ("openai/c",)]
    # Grouping by model sections the table; rows still never mix judges or versions.
    assert len(by_model.rows) == len(board.rows) == 4


def test_ranks_mark_ties_where_intervals_overlap():
    def row(model: str, value: float, lo: float, hi: float) -> Row:
        return Row(model, "j", "1", runs=[], metrics={"m": Metric(value=value, ci_low=lo, ci_high=hi, n=10)})

    rows = rank_rows([row("low", 0.3, 0.2, 0.4), row("second", 0.75, 0.6, 0.85), row("best", 0.8, 0.7, 0.9),
                      Row("none", "j", "1", runs=[], metrics={"m": Metric(value=None)})], "m")
    assert [(r.model, r.rank, r.tied) for r in rows] == [("best", 1, True), ("second", 1, True), ("low", 3, False),
                                                         ("none", None, False)]


def test_markdown_json_and_html_exports(loopback_runs, tmp_path):
    runs = loopback_runs
    md = _export(runs, "--format", "md")
    assert "## judge openai/j, suite_version 1.0.0" in md and "## judge openai/k, suite_version 1.0.0" in md
    # a and b both score 1.000 [1.000, 1.000] under judge j: a tie, marked; c is clearly third.
    assert re.search(r"\| 1= \| openai/a \| openai/j \| 1\.0\.0 \| 3 \| 1\.000 \[1\.000, 1\.000\] \|", md)
    assert "| 1= | openai/b | openai/j |" in md and "| 3 | openai/c | openai/j |" in md
    assert "| 1 | openai/a | openai/k |" in md and "## All metrics" in md
    doc = json.loads(_export(runs, "--format", "json", "--metric", "proactivity_overall_pass_rate"))
    assert doc["metric"] == "proactivity_overall_pass_rate" and doc["group_by"] == ["judge", "suite_version"]
    csv_cols = list(pd.read_csv(io.StringIO(_export(runs, "--metric", "proactivity_overall_pass_rate"))).columns)
    assert list(doc["rows"][0]) == csv_cols and csv_cols[15] == "proactivity_overall_pass_rate"
    out = tmp_path / "reports" / "board.html"
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(runs.main), "--format", "html",
                       "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert html.count("<svg") == 2 and 'data-chart="metric-bars"' in html and 'data-chart="style-heatmap"' in html
    # Self-contained: nothing to fetch, nothing to run.
    assert "<script" not in html and not re.search(r"(src|href)=\"(https?:)?//", html)
    for run_id in runs.ids.values():
        if run_id != runs.ids["b"]:
            assert run_id in html


def test_markdown_escapes_pipes_in_names():
    from leaderboards.aggregate import Leaderboard

    row = Row("openai/a|b", "j", "1", runs=[], metrics={"m": Metric(value=0.5, ci_low=0.4, ci_high=0.6, n=3)})
    row.rank = 1
    md = to_markdown(Leaderboard("s", "m", ("judge",), [row], []))
    assert "openai/a\\|b" in md


def test_cost_per_role_from_a_price_file_and_litellms_table(loopback_runs, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/a": {"input_per_mtok": 2.0, "output_per_mtok": 8.0},
                                  "openai/j": {"input_per_mtok": 1.0, "output_per_mtok": 4.0}}))
    frame = pd.read_csv(io.StringIO(_export(loopback_runs, "--prices", str(prices))))
    row = frame[(frame["model"] == "openai/a") & (frame["judge"] == "openai/j") & (frame["suite_version"] == "1.0.0")].iloc[0]
    assert row["assistant_cost_usd"] == pytest.approx(
        (row["assistant_prompt_tokens"] * 2.0 + row["assistant_completion_tokens"] * 8.0) / 1e6, rel=1e-5)
    assert row["cost_usd"] == pytest.approx(row["assistant_cost_usd"] + row["judge_cost_usd"], rel=1e-5)
    # Model c has no price: its assistant cost stays empty, and so does its total.
    c = frame[frame["model"] == "openai/c"].iloc[0]
    assert pd.isna(c["assistant_cost_usd"]) and pd.isna(c["cost_usd"]) and c["judge_cost_usd"] > 0
    # List prices: litellm's bundled table, only where the model is called at its provider.
    listed = price_for("litellm/openai/gpt-4o-mini", base_url=None, overrides={})
    assert listed is not None and listed.input_per_token > 0 and listed.output_per_token > listed.input_per_token
    assert price_for("openai/gpt-4o-mini", base_url=None, overrides={}) == listed
    assert price_for("openai/gpt-4o-mini", base_url="http://127.0.0.1:8000/v1", overrides={}) is None
    assert price_for("local/smollm2-135m", base_url=None, overrides={}) is None
    own = Price(1e-6, 2e-6, "file")
    assert price_for("local/smollm2-135m", base_url=None, overrides={"local/smollm2-135m": own}) is own


def test_incomplete_runs_are_left_out_unless_asked(tmp_path, loopback_runs):
    records = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()
    write_run(tmp_path, "proact-interrupted-run", records[:2], status="interrupted")
    line = _error_line(harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(tmp_path)))
    assert "no complete runs" in line and "1 interrupted" in line and "--include-incomplete" in line
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(tmp_path), "--include-incomplete")
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.StringIO(proc.stdout))
    assert frame["run_ids"].tolist() == ["proact-interrupted-run"] and frame["n"].tolist() == [2]


@pytest.mark.parametrize("args, must_name, must_fix", [
    (["--format", "xlsx"], "'xlsx'", "csv, md, html, json"),
    (["--metric", "accuracy"], "'accuracy'", "proactivity_overall_weighted_score"),
    (["--group-by", "colour"], "'colour'", "model, judge, suite_version"),
    (["--run-dir", "no/such/dir"], "no/such/dir", "--run-dir DIR"),
    (["--prices", "no-prices.json"], "no-prices.json", "input_per_mtok"),
    (["--format", "html", "--bench", "no-bench.json"], "no-bench.json", "harness bench adapters"),
    (["--format", "csv", "--bench", "x.json"], "--bench", "--format html"),
])
def test_bad_export_input_is_one_clear_line(loopback_runs, args, must_name, must_fix):
    proc = harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(loopback_runs.main), *args)
    line = _error_line(proc)
    assert must_name in line and must_fix in line, line


def test_unknown_suite_names_it(loopback_runs):
    line = _error_line(harness_cli("leaderboard", "export", "--suite", "nosuch", "--run-dir", str(loopback_runs.main)))
    assert "'nosuch'" in line and "harness runs" in line


def test_setup_label_keeps_agents_and_other_roles_apart():
    """Runs that differ in suite options (the agent) or in other roles' models measure different
    things: their setup labels differ, so they never pool into one row."""
    from leaderboards.runs import setup_label

    react = setup_label({"agent": "react"}, {"assistant": "m", "judge": "j"})
    cdwm = setup_label({"agent": "cdwm"}, {"assistant": "m", "judge": "j", "judge_2": "k", "world_model": "w"})
    assert react == "agent=react" and cdwm == "agent=cdwm; world_model=w"
    assert setup_label({}, {"assistant": "m", "judge": "j"}) == ""
    assert setup_label({"b": 1, "a": 2}, {"user": "u", "planner": "p"}) == "a=2; b=1; planner=p; user=u"


def test_synthetic_generators_are_refused(tmp_path):
    """ProGraf's fault-injecting mock generator is a test fixture, never a leaderboard row."""
    proc = harness_cli("eval", "--suite", "prograf", "--model", "synthetic/prograf-perfect", "--limit", "2",
                       "--run-dir", str(tmp_path), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = harness_cli("leaderboard", "export", "--suite", "prograf", "--run-dir", str(tmp_path),
                       "--out", str(tmp_path / "board.csv"))
    assert proc.returncode != 0 and "synthetic/prograf-perfect" in proc.stderr and "refuses" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "board.csv").exists()


def test_a_lower_is_better_metric_ranks_ascending():
    def row(model: str, value: float, lo: float, hi: float) -> Row:
        return Row(model, "j", "1", runs=[], metrics={"err": Metric(value=value, ci_low=lo, ci_high=hi, n=10)})

    rows = rank_rows([row("worst", 0.5, 0.4, 0.6), row("best", 0.1, 0.05, 0.15), row("close", 0.12, 0.1, 0.2)], "err",
                     lower_is_better=True)
    assert [(r.model, r.rank, r.tied) for r in rows] == [("best", 1, True), ("close", 1, True), ("worst", 3, False)]
