"""No silent default judge, and spend per role with budgets (issue 37, items 1 and 4).

Real runs of the proact suite against loopback OpenAI-compatible servers (instant canned replies;
their `/stats` counts every request), so "before any call" and "nothing paid twice" are what the
server saw, not what the harness says about itself.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
import urllib.request
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.loopback import running_server
from harness.prices import Price
from harness.providers.base import Usage
from harness.run_folder import RunFolder
from harness.roles import RoleFlags, assign_roles, parse_role_flags
from harness.spend import Budget, BudgetReached, SpendMeter, check_budgets, parse_budget, parse_budgets
from tests.conftest import JUDGE_PASS, harness_cli
from tests.leaderboards.test_viewer import get, serving


FIXTURE_RUNS = Path(__file__).parents[1] / "fixtures" / "runs_format1"
EMBEDDED_JUDGED = "proact-20261201T215355-859507"


def _served(url: str) -> int:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as resp:
        return int(json.load(resp)["served"])


def _only_run(run_dir: Path) -> RunFolder:
    [path] = [p for p in run_dir.iterdir() if (p / "manifest.json").exists()]
    return RunFolder(run_dir, path.name)


# ---------------------------------------------------------------- no silent default judge
def test_a_real_model_under_test_with_an_unnamed_judge_is_refused_before_any_call(tmp_path):
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--base-url", url, "--limit", "1",
                           "--run-dir", str(tmp_path / "runs"), "--no-progress")
        assert _served(url) == 0
    assert proc.returncode == 2
    assert "the judge role is not named" in proc.stderr and "--judge-model SPEC" in proc.stderr
    assert "--allow-embedded judge" in proc.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir()), "nothing recorded"


def test_every_unnamed_simulating_role_is_named_in_turn_and_opt_in_is_per_role():
    roles = ("assistant", "planner", "user", "judge")
    flags = parse_role_flags([], [], ["--judge-model", "openai/j"])
    with pytest.raises(HarnessError, match="the planner role is not named.*--planner-model SPEC"):
        assign_roles(roles, "openai/a", flags)
    flags = parse_role_flags([], [], ["--judge-model", "openai/j", "--allow-embedded", "planner"])
    with pytest.raises(HarnessError, match="the user role is not named.*--user-model SPEC"):
        assign_roles(roles, "openai/a", flags)
    flags = parse_role_flags(["user=openai/u"], [], ["--judge-model", "openai/j", "--allow-embedded", "planner"])
    out = assign_roles(roles, "openai/a", flags)
    assert {r: rc.model for r, rc in out.items()} == {"assistant": "openai/a", "planner": "local/smollm2-135m",
                                                      "user": "openai/u", "judge": "openai/j"}


def test_the_demo_stays_all_embedded_and_a_judge_only_suite_counts_model_as_under_test():
    out = assign_roles(("assistant", "judge"), "local/smollm2-135m", RoleFlags())
    assert out["judge"].model == "local/smollm2-135m"
    with pytest.raises(HarnessError, match="the judge role is not named"):
        assign_roles(("judge",), "openai/x", RoleFlags())
    with pytest.raises(HarnessError, match="--allow-embedded critic: this run has no role 'critic'"):
        assign_roles(("assistant", "judge"), "openai/a", RoleFlags(allow_embedded=["critic"], judges=["openai/j"]))


def test_runs_marks_a_run_judged_by_the_embedded_model(tmp_path):
    run_dir = tmp_path / "runs"
    shutil.copytree(FIXTURE_RUNS, run_dir)
    listing = harness_cli("runs", "--run-dir", str(run_dir))
    assert listing.returncode == 0 and "not a measurement" not in listing.stdout
    with sqlite3.connect(run_dir / "index.sqlite") as db:  # as a run judged by the embedded model is indexed
        db.execute("UPDATE runs SET judge = ? WHERE run_id = ?", ("openai/j+local/smollm2-135m", EMBEDDED_JUDGED))
    listing = harness_cli("runs", "--run-dir", str(run_dir))
    [line] = [ln for ln in listing.stdout.splitlines() if EMBEDDED_JUDGED in ln]
    assert "(embedded" in line, "the row of the run judged by the embedded model carries the mark (the cell may wrap)"
    assert listing.stdout.count("(embedded") == 1, "and no other row does"
    board = harness_cli("leaderboard", "export", "--suite", "proact", "--format", "csv", "--run-dir", str(run_dir))
    assert board.returncode == 0, board.stderr
    notes = {row["run_ids"]: row["judge_note"] for row in csv.DictReader(io.StringIO(board.stdout))}
    assert notes[EMBEDDED_JUDGED] == "embedded judge: not a measurement"
    assert all(not n for rid, n in notes.items() if rid != EMBEDDED_JUDGED)
    report = harness_cli("leaderboard", "export", "--suite", "proact", "--format", "md", "--run-dir", str(run_dir))
    assert "openai/j+local/smollm2-135m (embedded judge: not a measurement)" in report.stdout


# ---------------------------------------------------------------- budgets: parsing and the meter
@pytest.mark.parametrize("text, usd, tokens", [("judge=5usd", 5.0, None), ("judge=$0.5", 0.5, None),
                                               ("assistant=200000tokens", None, 200000),
                                               ("assistant=200ktokens", None, 200000)])
def test_budget_amounts(text, usd, tokens):
    b = parse_budget(text)
    assert (b.usd, b.tokens) == (usd, tokens)


@pytest.mark.parametrize("text", ["judge=5eur", "judge", "=5usd", "judge=lots", "judge=-1usd"])
def test_a_budget_with_an_unknown_unit_or_form_names_the_flag(text):
    with pytest.raises((HarnessError, ValueError), match="--budget|greater than 0"):
        parse_budget(text)


def test_a_role_given_two_budgets_is_an_error():
    with pytest.raises(HarnessError, match="given twice"):
        parse_budgets(["judge=5usd", "judge=100tokens"])


def test_budget_checks_name_the_role_and_the_missing_price():
    prices = {"assistant": None, "judge": Price(1e-6, 2e-6, "test"), "judge_2": Price(1e-6, 2e-6, "test")}
    with pytest.raises(HarnessError, match="this run calls no role 'planner'"):
        check_budgets([Budget(role="planner", tokens=10)], list(prices), prices)
    with pytest.raises(HarnessError, match="no known price.*--prices FILE"):
        check_budgets([Budget(role="assistant", usd=1.0)], list(prices), prices)
    check_budgets([Budget(role="judge", usd=1.0), Budget(role="assistant", tokens=5)], list(prices), prices)


def test_the_judge_budget_caps_the_whole_panel_in_dollars():
    price = Price(1e-6, 2e-6, "test")  # $1 and $2 per million tokens
    meter = SpendMeter([Budget(role="judge", usd=0.003)], {"judge": price, "judge_2": price, "assistant": None})
    meter.charge("judge", Usage(prompt_tokens=1000, completion_tokens=0, calls=1))  # $0.001
    meter.charge("judge_2", Usage(prompt_tokens=0, completion_tokens=500, calls=1))  # $0.001
    meter.charge("assistant", Usage(prompt_tokens=10**6, completion_tokens=10**6, calls=1))  # unpriced, uncapped
    meter.check("assistant")  # $0.002 of $0.003: goes on
    meter.charge("judge_2", Usage(prompt_tokens=1000, completion_tokens=0, calls=1))  # $0.003: reached
    with pytest.raises(BudgetReached, match=r"judge=\$0.003 reached"):
        meter.check("assistant")  # the run stops as a whole, whichever role calls next
    assert meter.table()["assistant"].usd is None and meter.table()["judge"].usd == pytest.approx(0.001)
    assert "judge $0.0010" in meter.describe() and "caps: judge=$0.003" in meter.describe()


# ---------------------------------------------------------------- budgets: a real run
def _proact(url: str, run_dir: Path, *extra: str) -> object:
    return harness_cli("eval", "--suite", "proact", "--model", "openai/a", "--judge-model", "openai/j",
                       "--base-url", url, "--limit", "4", "--max-connections", "1", "--run-dir", str(run_dir),
                       "--no-progress", *extra)


def test_a_budgeted_run_stops_at_its_cap_and_resumes_without_paying_twice(tmp_path):
    with running_server("--echo", "--reply", JUDGE_PASS) as url:  # the same run, no cap: what it costs
        full = _proact(url, tmp_path / "full")
        assert full.returncode == 0, full.stderr
        calls_uncapped = _served(url)
    reference = _only_run(tmp_path / "full").read_summary()
    judge_tokens = reference.spend["judge"].prompt_tokens + reference.spend["judge"].completion_tokens
    cap = judge_tokens // 3  # reached after about a third of the run's judging

    run_dir = tmp_path / "runs"
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        first = _proact(url, run_dir, "--budget", f"judge={cap}tokens")
        assert first.returncode == 3, first.stderr
        assert "stopped" in first.stderr and "--resume" in first.stderr
        folder = _only_run(run_dir)
        manifest = folder.read_manifest()
        assert manifest.status == "interrupted" and manifest.stop_reason and "judge=" in manifest.stop_reason
        spent = manifest.spend["judge"].prompt_tokens + manifest.spend["judge"].completion_tokens
        assert cap <= spent < judge_tokens, "stopped at the cap, not before it and not at the end"
        recorded = len(folder.read_samples())
        assert 0 < recorded < 4
        listing = harness_cli("runs", "--run-dir", str(run_dir))  # `runs` shows what each role paid
        assert f"judge {spent:,} tok" in " ".join(listing.stdout.split()), listing.stdout
        with serving(run_dir) as viewer:  # the viewer shows why it stopped and what each role paid
            status, html, _ = get(f"{viewer}/runs/{folder.run_id}")
        assert status == 200 and "stopped: budget judge=" in html and "<td>judge</td>" in html
        calls_first = _served(url)
        assert calls_first < calls_uncapped

        second = harness_cli("eval", "--resume", folder.run_id, "--run-dir", str(run_dir), "--no-progress",
                             "--budget", f"judge={judge_tokens * 10}tokens")
        assert second.returncode == 0, second.stderr
        assert _served(url) == calls_uncapped, "every request reached the server exactly once over both sessions"
    manifest = folder.read_manifest()
    assert manifest.status == "complete" and manifest.stop_reason is None
    summary = folder.read_summary()
    assert summary.metrics == reference.metrics
    assert summary.spend["judge"].calls == reference.spend["judge"].calls, "the spend over both sessions is one run's"
    assert "spend" in second.stdout and "judge" in second.stdout


def test_a_dollar_budget_on_a_model_without_a_price_is_refused_before_any_call(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/j": {"input_per_mtok": 1, "output_per_mtok": 2}}))
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = _proact(url, tmp_path / "runs", "--budget", "assistant=1usd", "--prices", str(prices))
        assert _served(url) == 0
    assert proc.returncode == 2 and "the assistant model has no known price" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with running_server("--echo", "--reply", JUDGE_PASS) as url:
        proc = _proact(url, tmp_path / "runs2", "--budget", "judge=1usd", "--prices", str(bad))
        assert _served(url) == 0
    assert proc.returncode == 2 and f"--prices {bad}" in proc.stderr
