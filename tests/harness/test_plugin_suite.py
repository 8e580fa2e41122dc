"""A suite from a package of its own -- one module and two entry points (the suite and its
presenter), nothing in this project touched -- runs end to end through `harness eval`, `harness
score`, `harness leaderboard export` and `harness view` (its presenter draws the samples and its
report section; its sample data, transcript and scores are its own pydantic models, which its
scorers and metrics get as objects; its metrics are declared)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from harness.loopback import running_server
from harness.run_folder import RunFolder
from tests.conftest import harness_cli

MODULE = '''
"""Toy suite: say the number back. Scorers: exact (pure) and judge (asks the judge role)."""
from pydantic import BaseModel, Field

from harness.providers.base import GenerateConfig
from harness.records import MetricSpec
from harness.stats import ratio_metric
from harness.presenter import Presenter, ReportSection, e
from harness.suite import FunctionScorer, Sample, Score, Suite, SuiteOptions, Transcript


class Number(BaseModel):
    n: int


class Said(BaseModel):
    reply: str


class Verdict(BaseModel):
    correct: bool


class EchoPresenter(Presenter):
    css = ".echo-view { border: 2px solid teal; }"

    def sample_view(self, output, scores):
        return f'<div class="echo-view">said {e(output.get("reply"))}</div>'

    def sample_labels(self, scores):
        return f'<span class="echo-badge">{"right" if scores.get("correct") else "wrong"}</span>'

    def report_section(self, found):
        runs = sum(len(v) for v in found.runs.values())
        return ReportSection(title="Echo: what was said", html=f'<p class="echo-section">{runs} run(s)</p>')


class Options(SuiteOptions):
    count: int = Field(4, ge=1, le=100, description="how many numbers")


class EchoNumbers(Suite[Number, Said, Verdict]):
    name = "echo-numbers"
    version = "0.1"
    headline_metric = "accuracy"
    description = "say the number back"
    Options = Options
    metric_specs = {"accuracy": MetricSpec(unit="fraction", description="replies ending with the number")}
    transcript_type = Said
    scores_type = Verdict

    def load_samples(self, corpus):
        return [Sample(id=f"n{i}", data=Number(n=i)) for i in range(self.options.count)]

    async def solve(self, sample, ctx):
        out = await ctx.generate("assistant", [{"role": "user", "content": str(sample.data.n)}],
                                 GenerateConfig(max_tokens=8))
        return Transcript(output=Said(reply=out.text))

    def scorers(self):
        return {"exact": FunctionScorer("exact", self._exact, description="the reply ends with the number"),
                "judge": FunctionScorer("judge", self._judge, roles=("judge",), description="the judge says yes")}

    async def _exact(self, sample, transcript, ctx):
        return Score(values=Verdict(correct=transcript.reply.strip().endswith(str(sample.data.n))))

    async def _judge(self, sample, transcript, ctx):
        out = await ctx.generate("judge", [{"role": "user", "content": transcript.reply}], GenerateConfig(max_tokens=4))
        return Score(values={"correct": out.text.strip().lower().startswith("yes")})

    def scores_on_failure(self, sample):
        return {"correct": False}  # a declared scores type: what a failed sample counts as must validate too

    def metrics(self, records, seed=0):
        cells = [[1.0 if self.read_scores(r.scores).correct else 0.0, 1.0] for r in records]
        return {"accuracy": ratio_metric(cells, lambda c: c[0], lambda c: c[1], seed=seed)}
'''


def _package(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "plugin"
    (root / "toy_suite-0.1.dist-info").mkdir(parents=True)
    (root / "toy_suite.py").write_text(textwrap.dedent(MODULE))
    (root / "toy_suite-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-suite\nVersion: 0.1\n")
    (root / "toy_suite-0.1.dist-info" / "entry_points.txt").write_text(
        "[harness.suites]\necho-numbers = toy_suite:EchoNumbers\n\n"
        "[harness.presenters]\necho-numbers = toy_suite:EchoPresenter\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}


def test_a_suite_from_its_own_package_runs_scores_exports_and_shows(tmp_path, monkeypatch):
    env = _package(tmp_path)
    run_dir = tmp_path / "runs"
    proc = harness_cli("describe", "echo-numbers", env=env)
    assert proc.returncode == 0 and "count" in proc.stdout and "int >= 1, <= 100 (default 4)" in proc.stdout
    proc = harness_cli("eval", "--suite", "echo-numbers", "--suite-option", "count=500", env=env)
    assert proc.returncode == 2 and "count=500" in proc.stderr and "<= 100" in proc.stderr
    with running_server("--echo") as url:
        proc = harness_cli("eval", "--suite", "echo-numbers", "--suite-option", "count=3", "--model", "openai/a",
                           "--base-url", url, "--run-dir", str(run_dir), "--no-progress", env=env)
        assert proc.returncode == 0, proc.stderr
    [source] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists()]
    summary = json.loads((run_dir / source / "summary.json").read_text())
    assert summary["metrics"]["accuracy"]["value"] == 1.0 and summary["metrics"]["accuracy"]["n"] == 3
    assert summary["metric_specs"]["accuracy"]["unit"] == "fraction"  # the declaration, recorded with the run
    with running_server("--echo", "--reply", "no") as url:
        proc = harness_cli("score", source, "--scorer", "judge", "--judge-model", "openai/j", "--base-url", url,
                           "--run-dir", str(run_dir), "--no-progress", env=env)
        assert proc.returncode == 0, proc.stderr
    [rescored] = [p.name for p in run_dir.iterdir() if (p / "manifest.json").exists() and p.name != source]
    folder = RunFolder(run_dir, rescored)
    assert folder.read_summary().metrics["accuracy"].value == 0.0
    assert {r.scorer for r in folder.read_samples()} == {"judge"}
    board = tmp_path / "board.json"
    proc = harness_cli("leaderboard", "export", "--suite", "echo-numbers", "--run-dir", str(run_dir),
                       "--format", "json", "--out", str(board), env=env)
    assert proc.returncode == 0, proc.stderr
    text = board.read_text()
    assert "openai/a" in text and "openai/j" in text and "scored by judge" in text
    report = tmp_path / "board.html"
    proc = harness_cli("leaderboard", "export", "--suite", "echo-numbers", "--run-dir", str(run_dir),
                       "--format", "html", "--out", str(report), env=env)
    assert proc.returncode == 0, proc.stderr
    assert '<p class="echo-section">2 run(s)</p>' in report.read_text()  # the presenter's own section
    # `harness view`: the samples drawn by the plugin's own presenter (found by its entry point)
    from harness.presenter import presenter_for
    from tests.leaderboards.test_viewer import get, serving

    monkeypatch.syspath_prepend(str(tmp_path / "plugin"))
    presenter_for.cache_clear()
    try:
        with serving(run_dir) as url:
            status, html, _ = get(f"{url}/runs/{source}")
            assert status == 200 and html.count('<span class="echo-badge">right</span>') == 3
            status, html, _ = get(f"{url}/runs/{source}/samples/0")
            assert status == 200 and '<div class="echo-view">said ' in html and ".echo-view { border" in html
    finally:
        presenter_for.cache_clear()
    # A recorded transcript the suite's type does not accept (here: edited by hand) is that sample's
    # error, named, on the re-score path; the other samples are scored and nothing recorded is lost.
    samples = run_dir / source / "samples.jsonl"
    lines = samples.read_text().splitlines()
    first = json.loads(lines[0])
    first["output"] = {"said": first["output"]["reply"]}
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    proc = harness_cli("score", source, "--scorer", "exact", "--run-dir", str(run_dir), "--no-progress", env=env)
    assert proc.returncode == 0, proc.stderr
    [tampered] = [p.name for p in run_dir.iterdir()
                  if (p / "manifest.json").exists() and p.name not in (source, rescored)]
    records = {r.sample_id: r for r in RunFolder(run_dir, tampered).read_samples()}
    [error] = records[first["sample_id"]].errors
    assert error.kind == "record" and "echo-numbers" in error.message and "reply" in error.message
    assert all(not r.errors and r.scores == {"correct": True} for i, r in records.items() if i != first["sample_id"])
    assert RunFolder(run_dir, tampered).read_summary().metrics["accuracy"].value == 2 / 3
