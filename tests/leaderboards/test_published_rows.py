"""`harness leaderboard export --suite proact --with-published --published DIR`: the release's
sixteen scored models as reference rows beside the user's runs, read from the shared release
folder at test time (never copied into the repo)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness.errors import HarnessError
from harness.run_folder import RunFolder
from leaderboards.aggregate import Leaderboard, add_reference_rows
from tests.conftest import SHARED_DATA, harness_cli
from tests.leaderboards.runs import write_run

HEADLINE = "proactivity_overall_weighted_score"
RELEASE_EVAL = SHARED_DATA / "proactbench" / "release" / "dataset" / "eval"
SUFFIX = "_proactivity_bench_metrics.json"


@pytest.fixture(scope="module")
def release_eval() -> Path:
    if not RELEASE_EVAL.is_dir():
        pytest.skip(f"ProactBench release metrics not found at {RELEASE_EVAL}; set HARNESS_SHARED_DATA")
    return RELEASE_EVAL


@pytest.fixture(scope="module")
def user_runs(loopback_runs, tmp_path_factory) -> Path:
    """Two of a user's runs (the loopback run a0's samples): one judged by the published rows'
    judge (under a provider prefix), one by a panel that merely includes it."""
    run_dir = tmp_path_factory.mktemp("published-runs")
    records = RunFolder(loopback_runs.main, loopback_runs.ids["a0"]).read_samples()
    write_run(run_dir, "same-judge", records, models={"assistant": "openai/mine", "judge": "openrouter/openai/gpt-5.4"})
    write_run(run_dir, "other-judge", records,
              models={"assistant": "openai/theirs", "judge": "openai/gpt-4o", "judge_2": "openai/gpt-5.4"})
    return run_dir


def _export(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return harness_cli("leaderboard", "export", "--suite", "proact", "--run-dir", str(run_dir), *args)


def _error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_csv_lists_the_sixteen_published_models_beside_the_runs(user_runs, release_eval):
    proc = _export(user_runs, "--with-published", "--published", str(release_eval), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.StringIO(proc.stdout))
    published = frame[frame["source"] == "published"]
    runs = frame[frame["source"] == "run"]
    assert len(published) == len(list(release_eval.glob("*" + SUFFIX))) == 16 and len(runs) == 2
    # Judge and source of each published row; its figures are the file's own.
    assert set(published["judge"]) == {"GPT-5.4"}
    for _, row in published.iterrows():
        path = Path(row["figures_from"])
        assert path.parent == release_eval and path.name.endswith(SUFFIX)
        released = json.loads(path.read_text())["metrics"]
        assert row[HEADLINE] == pytest.approx(released["eval/" + HEADLINE], abs=5e-6)  # CSV: 6 digits
        assert row["n"] == released["eval/proactivity_total_dialogues"] == 198
        assert pd.isna(row[f"{HEADLINE}_ci_low"]) and pd.isna(row["rank"])  # counts only: no CI, not ranked
    # A provider's `/` is `__` in the release's file names.
    assert "qwen/qwen3.5-9b" in set(published["model"]) and "claude-opus-4-7" in set(published["model"])
    # The user's rows keep their CI and rank, and say where their figures stand.
    for _, row in runs.iterrows():
        assert row[f"{HEADLINE}_ci_low"] <= row[HEADLINE] <= row[f"{HEADLINE}_ci_high"] and row["rank"] == 1
        assert pd.isna(row["figures_from"])
    same = runs[runs["model"] == "openai/mine"].iloc[0]
    other = runs[runs["model"] == "openai/theirs"].iloc[0]
    assert pd.isna(same["comparability"])  # openrouter/openai/gpt-5.4 is the published rows' GPT-5.4
    assert other["comparability"].startswith("not directly comparable: judged by openai/gpt-4o+openai/gpt-5.4")


def test_report_and_markdown_show_the_runs_among_the_published_rows(user_runs, release_eval):
    args = ("--with-published", "--published", str(release_eval))
    md = _export(user_runs, *args, "--format", "md")
    assert md.returncode == 0, md.stderr
    section = md.stdout.split("## Beside the published rows")[1].split("## All metrics")[0]
    table = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert len(table) == 18
    values = [float(ln.rstrip(" |").rsplit("| ", 1)[1].split(" ")[0]) for ln in table]
    assert values == sorted(values, reverse=True)  # one list, best first: where the runs land
    html = _export(user_runs, *args, "--format", "html")
    assert html.returncode == 0, html.stderr
    assert html.stdout.count('<tr class="published">') == 16 and html.stdout.count('<tr class="run">') == 2
    assert "not directly comparable: judged by openai/gpt-4o+openai/gpt-5.4" in html.stdout
    assert "gpt-4o_proactivity_bench_metrics.json" in html.stdout


def test_without_the_flag_nothing_changes(user_runs):
    proc = _export(user_runs, "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.StringIO(proc.stdout))
    assert len(frame) == 2 and not {"source", "comparability", "figures_from"} & set(frame.columns)


def test_bad_published_sources_are_one_error_each(user_runs, release_eval, tmp_path):
    assert "--with-published needs --published DIR" in _error_line(_export(user_runs, "--with-published"))
    missing = tmp_path / "nowhere"
    line = _error_line(_export(user_runs, "--with-published", "--published", str(missing)))
    assert str(missing) in line and "dataset/eval" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no *_proactivity_bench_metrics.json file" in _error_line(
        _export(user_runs, "--with-published", "--published", str(empty)))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / ("m" + SUFFIX)).write_text("[1, 2]")
    line = _error_line(_export(user_runs, "--with-published", "--published", str(bad)))
    assert str(bad / ("m" + SUFFIX)) in line and "not an object" in line
    assert "--published DIR is read by --with-published" in _error_line(
        _export(user_runs, "--published", str(release_eval)))
    line = _error_line(_export(user_runs, "--with-published", "--published", str(release_eval), "--format", "eee"))
    assert "not to eee" in line


def test_a_suite_without_published_results_says_so():
    board = Leaderboard(suite="no-such-suite", metric="m", group_by=(), rows=[], run_dirs=[])
    with pytest.raises(HarnessError, match="has no published results"):
        add_reference_rows(board, Path("."))
