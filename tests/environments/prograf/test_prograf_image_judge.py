"""The vision judge (`image/judge.py`) and its use by `prograf-image`: calibration on our own
renders with scripted judges (a truthful one is enabled where it saw enough failures, one that
always says yes never is), answers read strictly, and a run whose judge (the loopback server
saying "yes", shown the picture as an image part) is used only for the checks its calibration
enabled, only when it is the calibrated judge."""

from __future__ import annotations

import asyncio
import base64
import hashlib

import pytest

from environments.prograf.check.verify import verify
from environments.prograf.generate.build import CORPUS
from environments.prograf.image.calibrate import render_png, samples
from environments.prograf.image.judge import JudgeCalibration, calibrate_judge, dump, read_answer
from environments.prograf.image_suite import image_prompt
from environments.prograf.task import load_tasks
from harness.errors import HarnessError
from harness.loopback import prompt_key, running_server
from harness.messages import images_of, text_of
from harness.providers.base import ModelOutput
from harness.run_folder import RunFolder
from tests.conftest import harness_cli


@pytest.fixture(scope="module")
def geometry():
    return {t.id: t for t in load_tasks(CORPUS) if t.category == "geometry"}


def test_a_calibration_that_trusts_a_check_without_its_figures_is_refused(tmp_path):
    bad = tmp_path / "judge.json"
    bad.write_text('{"judge": "openai/j", "enabled": ["segment"], "tasks": 1, "images": 1, "seconds": 0, '
                   '"by_check": {}}', encoding="utf-8")
    with pytest.raises(HarnessError, match="enabled check 'segment' has no tp/fp/fn/tn counts.*; write one with "
                                           "`harness prograf calibrate-judge"):
        JudgeCalibration.load(bad)
    bad.write_text('{"judge": "openai/j", "enabled": [], "tasks": 1, "images": 1, "seconds": 0, '
                   '"by_check": {"segment": {"tp": 1}}}', encoding="utf-8")
    with pytest.raises(HarnessError, match=r"judge.json: field `by_check.segment.fp` is missing; write one with"):
        JudgeCalibration.load(bad)
    with pytest.raises(HarnessError, match=r"missing.json: cannot be read \(No such file or directory\); write one"):
        JudgeCalibration.load(tmp_path / "missing.json")


def test_answers_are_read_strictly():
    assert read_answer("Yes.") is True and read_answer(" no") is False
    assert read_answer("yes and no") is None and read_answer("It is parallel") is None and read_answer("") is None
    assert read_answer("Yesterday") is None  # a word, not a prefix


def _truth_table(tasks, renderer):
    """(sha of the picture, the fact asked) -> does it hold, from the structural verifier."""
    table = {}
    for task in tasks:
        for _, sol in samples(task):
            try:
                _, png = render_png(task, sol, renderer)
            except Exception:
                continue
            key = hashlib.sha256(base64.b64encode(png)).hexdigest()
            for p, vp in zip(verify(task, sol.format, sol.code, renderer).points, task.points):
                table[(key, vp.text)] = p.passed
    return table


class ScriptedJudge:
    """Answers from a table (truthful) or always the same word."""

    def __init__(self, table=None, always=None):
        self.table, self.always, self.calls = table, always, 0

    async def __call__(self, messages, config):
        self.calls += 1
        if self.always is not None:
            return ModelOutput(text=self.always)
        (msg,) = messages
        key = hashlib.sha256(images_of(msg)[0].encode("ascii")).hexdigest()
        fact = text_of(msg).split("\n")[1]
        return ModelOutput(text="yes" if self.table[(key, fact)] else "no")


def test_calibration_enables_a_truthful_judge_and_never_an_always_yes_one(geometry, renderer):
    tasks = [geometry["geometry-000"], geometry["geometry-002"], geometry["geometry-005"]]
    truthful = ScriptedJudge(table=_truth_table(tasks, renderer))
    good = asyncio.run(calibrate_judge(truthful, "scripted/truthful", tasks, renderer))
    assert truthful.calls > 0 and good.images > 0
    for check, row in good.by_check.items():
        assert row["fp"] == 0 and row["fn"] == 0, check  # it is right by construction
        assert row["enabled"] == (row["tp"] >= 5), (check, row)
    assert good.enabled, good.by_check  # some check saw five failures in these three tasks

    yes = asyncio.run(calibrate_judge(ScriptedJudge(always="Yes"), "scripted/yes", tasks, renderer))
    assert yes.enabled == []
    assert all(r["tp"] == 0 and r["why_disabled"] for r in yes.by_check.values())


def test_a_run_uses_the_calibrated_judge_only_for_its_enabled_checks(tmp_path, geometry, renderer):
    task = geometry["geometry-000"]
    png = render_png(task, task.reference[0], renderer)[1]
    images = tmp_path / "images"
    images.mkdir()
    (images / f"{prompt_key(image_prompt(task))}.png").write_bytes(png)
    checks = sorted({vp.check for vp in task.points})
    enabled = ["circle"]  # a check no enabled pixel check decides
    assert "circle" in checks
    cal = tmp_path / "judge.json"
    runs = tmp_path / "runs"
    with running_server("--echo", "--reply", "yes", "--images", str(images)) as url:
        figures = {"circle": {"tp": 9, "fp": 1, "fn": 3, "tn": 40, "undecided": 0, "false_fail": [], "false_pass": [],
                              "precision": 0.9, "recall": 0.75, "pass_precision": 40 / 43, "enabled": True,
                              "why_disabled": ""}}
        dump(JudgeCalibration(judge="openai/judge", enabled=enabled, tasks=1, images=1, seconds=0.0,
                              by_check=figures), cal)
        common = ["eval", "--suite", "prograf-image", "--model", "openai/painter", "--base-url", url,
                  "--suite-option", "category=geometry", "--suite-option", f"judge_calibration={cal}",
                  "--limit", "1", "--run-dir", str(runs), "--no-progress", "--no-cache"]
        res = harness_cli(*common, "--judge-model", "openai/judge")
        assert res.returncode == 0, res.stderr
        wrong = harness_cli(*common, "--judge-model", "openai/another")
    [run] = [RunFolder(runs, p.name) for p in runs.iterdir() if p.is_dir()
             and RunFolder(runs, p.name).read_manifest().config.models.get("judge") == "openai/judge"]
    (rec,) = run.read_samples()
    points = rec.scores["points"]
    judged = [p for p in points if p.get("check_type", "").startswith("judge:")]
    by_id = {vp.id: vp for vp in task.points}
    assert judged and all(by_id[p["id"]].check in enabled and p["status"] == "pass" for p in judged)
    assert all(p["status"] == "undecided" for p in points if by_id[p["id"]].check not in enabled
               and p.get("check_type") is None)
    judge_calls = [c for c in rec.calls if c.role == "judge"]
    assert len(judge_calls) == len(judged)
    # The judge's calibration figures stand beside the scores it helped make.
    summary = run.read_summary()
    assert summary is not None
    metrics = summary.metrics
    assert metrics["judge_precision/circle"].value == pytest.approx(0.9)
    assert metrics["judge_precision/circle"].n == 10 and 0.5 < metrics["judge_precision/circle"].ci_low < 0.9
    assert metrics["judge_recall/circle"].value == pytest.approx(0.75)
    assert metrics["judged_point_share"].value == pytest.approx(len(judged) / len(points))
    # Another judge than the calibrated one: every sample's scoring names the fix.
    assert "calibrated openai/judge, not openai/another" in wrong.stdout + wrong.stderr + "".join(
        str(r.errors) for p in runs.iterdir() if p.is_dir() for r in RunFolder(runs, p.name).read_samples())


def test_calibrate_judge_command_writes_a_file_a_run_can_name(tmp_path):
    out = tmp_path / "judge.json"
    with running_server("--echo", "--reply", "yes") as url:
        res = harness_cli("prograf", "calibrate-judge", "--judge-model", "openai/always-yes", "--base-url", url,
                          "--limit", "1", "--out", str(out))
        bad = harness_cli("prograf", "calibrate-judge", "--judge-model", "openai/always-yes", "--base-url", url,
                          "--tasks", "all", "--out", str(tmp_path / "x.json"))
    assert res.returncode == 0, res.stderr
    cal = JudgeCalibration.load(out)
    assert cal.judge == "openai/always-yes" and cal.tasks == 1 and cal.images > 0
    assert cal.enabled == [] and cal.by_check  # asked, and never trusted: it never says a point fails
    assert "| check |" in res.stdout
    assert bad.returncode != 0 and "--tasks must be 'even' or 'odd'" in bad.stdout + bad.stderr
    assert not (tmp_path / "x.json").exists()
