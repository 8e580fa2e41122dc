"""Suite `prograf-image`: the ProGraf tasks drawn by a text-to-image model, verified from pixels.

One sample = one task. Solve: the model under test (`assistant`) gets the task's prompt through an
OpenAI-compatible images endpoint (`GenerateConfig(output="image")`, so an `openai/` spec whose
`--base-url` serves `/v1/images/generations`) and answers with one PNG. Score: the image-only
verifier (`image/verify.py`) decides each point it can decide reliably (OCR labels, OpenCV counts,
as calibrated) and leaves the rest `undecided` -- never guessed.

Because some points stay undecided, every rate is reported as a pair of bounds over the same
tasks: `*_lower` counts an undecided point or task as failed, `*_upper` as passed; the truth lies
between them, and `decided_share` says how much of the corpus the pixels settled. The headline is
the lower bound (what is shown to pass).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from functools import cached_property
from typing import Any

from pydantic import Field

from environments.prograf.image.judge import JudgeCalibration, ask
from environments.prograf.image.verify import verify_image
from environments.prograf.metrics import ratio_cells
from environments.prograf.suite import ProGrafOptions
from environments.prograf.suite import ProGrafSuite
from environments.prograf.task import CATEGORIES, Task
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig, ModelError
from harness.records import Metric, SampleRecord
from harness.stats import wilson_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Transcript

STYLE = ("Draw this as a clean, flat diagram, black lines on a white background, with every label written "
         "legibly as plain text and nothing that was not asked for.")


class ImageOptions(ProGrafOptions):
    """The code suite's options (`format`, `render` and `max_tokens` do not apply to a picture), and
    the vision judge's calibration."""

    judge_calibration: str | None = Field(
        None, description="a `harness prograf calibrate-judge` file: the judge role is asked the points pixels "
                          "leave undecided, for the checks that file enabled (the run's --judge-model must be its judge)")


def image_prompt(task: Task) -> str:
    """What the images endpoint is asked: the task's own prompt, then the drawing style."""
    return f"{task.prompt}\n\n{STYLE}"


class ProGrafImageSuite(ProGrafSuite):
    name = "prograf-image"
    version = "0.1.0"
    headline_metric = "pass_rate_lower"
    description = ("ProGraf text-to-image: draw the task through an images endpoint; points decided from pixels "
                   "(OCR, OpenCV) where calibrated, else undecided; rates as lower/upper bounds")
    Options = ImageOptions

    @property
    def iopts(self) -> ImageOptions:
        assert isinstance(self.options, ImageOptions)
        return self.options

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        task: Task = sample.data["task"]
        output: dict[str, Any] = {"task_id": task.id, "category": task.category, "format": "image"}
        try:
            out = await ctx.generate("assistant", [{"role": "user", "content": image_prompt(task)}],
                                     GenerateConfig(output="image"))
        except ModelError as exc:
            return Transcript(output=output | {"png_base64": None}, errors=[f"assistant: {exc}"])
        png = out.images[0]
        digest = hashlib.sha256(png.encode("utf-8")).hexdigest()[:16]
        return Transcript(output=output | {"png_base64": png, "png_sha256": digest})

    def scorers(self) -> dict[str, Scorer]:
        judged = self.iopts.judge_calibration is not None
        return {"verify": FunctionScorer("verify", self._verify, roles=("judge",) if judged else (),
                                         description="the image-only verifier: OCR and OpenCV checks as calibrated"
                                                     + (", then the calibrated vision judge" if judged else ""))}

    @cached_property
    def calibration(self) -> JudgeCalibration | None:
        path = self.iopts.judge_calibration
        return JudgeCalibration.load(path) if path is not None else None

    async def _verify(self, sample: Sample, transcript: dict[str, Any], ctx: SampleContext) -> Score:
        task: Task = sample.data["task"]
        encoded = transcript.get("png_base64")
        if not encoded:
            return Score(values=self.scores_on_failure(sample))
        try:
            png = base64.b64decode(encoded, validate=True)
        except ValueError:
            png = b""  # not base64: the verifier rejects it as an unreadable image, recorded per point
        verdict = await asyncio.to_thread(verify_image, task, png)
        points = [p.model_dump(exclude_none=True, exclude_defaults=True) | {"status": p.status, "component": p.component}
                  for p in verdict.points]
        if self.calibration is not None and verdict.error is None:
            points = await self._judged(task, encoded, points, ctx)
        return Score(values=summarised(task, points) | {"error": verdict.error, "category": task.category})

    async def _judged(self, task: Task, encoded: str, points: list[dict[str, Any]],
                      ctx: SampleContext) -> list[dict[str, Any]]:
        """The undecided points of the checks the judge's calibration enabled, asked of the judge, in
        task order so that a point whose parent the judge failed is gated as the verifier gates."""
        cal = self.calibration
        assert cal is not None
        judge = ctx.models.get("judge")
        if judge is None or judge.name != cal.judge:
            raise HarnessError(f"--suite-option judge_calibration={self.iopts.judge_calibration} calibrated "
                               f"{cal.judge}, not {judge.name if judge else 'no judge'}: run with "
                               f"--judge-model {cal.judge} or calibrate this judge (harness prograf calibrate-judge)")
        status = {p["id"]: p["status"] for p in points}
        by_id = {vp.id: vp for vp in task.points}
        out = []
        for p in points:
            vp = by_id[p["id"]]
            failed_parent = next((d for d in vp.depends_on if status[d] == "fail"), None)
            if p["status"] == "undecided" and failed_parent is not None:
                p = p | {"status": "fail", "gated": True, "reason": f"not checked: {failed_parent} failed"}
            elif p["status"] == "undecided" and vp.check in cal.enabled:
                said, reply = await ask(lambda m, c: ctx.generate("judge", m, c), encoded, vp)
                if said is not None:
                    p = p | {"status": "pass" if said else "fail", "check_type": f"judge:{vp.check}",
                             "reason": f"the vision judge said {reply!r}"}
            status[p["id"]] = p["status"]
            out.append(p)
        return out

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        task: Task = sample.data["task"]
        return {"passed": False, "decided": len(task.points), "undecided": 0, "category": task.category,
                "error": "no image", "points": [{"id": vp.id, "kind": vp.kind, "component": vp.component,
                                                 "status": "fail", "pattern": "no_output",
                                                 "reason": "no image to verify"} for vp in task.points]}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        out = image_metrics(records, seed=seed)
        if out and self.calibration is not None:
            out |= judge_metrics(self.calibration, _image_scores(records), seed)
        return out

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        return {}

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        scores = _image_scores(records)
        return {"tasks": len(scores), "passed": sum(s["passed"] is True for s in scores),
                "failed": sum(s["passed"] is False for s in scores), "undecided": sum(s["passed"] is None for s in scores),
                "unreadable_images": sum(bool(s.get("error")) for s in scores)}


def summarised(task: Task, points: list[dict[str, Any]]) -> dict[str, Any]:
    """A sample's verdict from its points: failed if a critical point failed, passed if every
    critical point passed, else undecided (None)."""
    critical = {vp.id for vp in task.points if vp.critical}
    statuses = [p["status"] for p in points if p["id"] in critical]
    passed = False if "fail" in statuses else (True if all(s == "pass" for s in statuses) else None)
    undecided = sum(p["status"] == "undecided" for p in points)
    return {"passed": passed, "decided": len(points) - undecided, "undecided": undecided, "points": points}


def judge_metrics(cal: JudgeCalibration, scores: list[dict[str, Any]], seed: int = 0) -> dict[str, Metric]:
    """Beside the scores a judge helped make: the share of points it decided, and for each check it
    was trusted with, its precision (a "fails" it says is a real failure) and recall on the
    calibration renders, with Wilson intervals over those calibration points."""
    out = {"judged_point_share": ratio_cells([[sum(p.get("check_type", "").startswith("judge:") for p in s["points"]),
                                               len(s["points"])] for s in scores], seed)}
    for check in cal.enabled:
        row = cal.by_check[check]
        out[f"judge_precision/{check}"] = wilson_metric(row["tp"], row["tp"] + row["fp"])
        out[f"judge_recall/{check}"] = wilson_metric(row["tp"], row["tp"] + row["fn"])
    return out


def _image_scores(records: list[SampleRecord]) -> list[dict[str, Any]]:
    return [r.scores for r in records if r.scores and "points" in r.scores and "undecided" in r.scores]


def image_metrics(records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
    """Lower and upper bounds of the pass and point rates (undecided as failed / as passed), the
    share of tasks the pixels decided, per category for the pass rate; bootstrap CIs over tasks."""

    def rates(rows: list[dict[str, Any]], suffix: str = "") -> dict[str, Metric]:
        out = {f"pass_rate_lower{suffix}": ratio_cells([[float(s["passed"] is True), 1.0] for s in rows], seed),
               f"pass_rate_upper{suffix}": ratio_cells([[float(s["passed"] is not False), 1.0] for s in rows], seed)}
        if not suffix:
            out["decided_share"] = ratio_cells([[float(s["passed"] is not None), 1.0] for s in rows], seed)
            out["point_rate_lower"] = ratio_cells([[sum(p["status"] == "pass" for p in s["points"]), len(s["points"])]
                                              for s in rows], seed)
            out["point_rate_upper"] = ratio_cells([[sum(p["status"] != "fail" for p in s["points"]), len(s["points"])]
                                              for s in rows], seed)
        return out

    scores = _image_scores(records)
    if not scores:
        return {}
    out = rates(scores)
    for cat in CATEGORIES:
        rows = [s for s in scores if s["category"] == cat]
        if rows:
            out |= rates(rows, f"/{cat}")
    return out
