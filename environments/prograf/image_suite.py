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
from typing import Any, ClassVar

from pydantic import Field, TypeAdapter
from typing_extensions import Required, TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12

from environments.prograf.image.judge import JudgeCalibration, ask
from environments.prograf.image.verify import ImagePoint, Status, verify_image
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


class ImageTranscript(TypedDict, total=False):
    """What the image solver records: the task and the picture (None when the call failed)."""

    task_id: Required[str]
    category: Required[str]
    format: Required[str]  # "image"
    png_base64: Required[str | None]
    png_sha256: str  # the first 16 hex digits of the base64 text's sha256


class ImagePointScore(TypedDict, total=False):
    """One point as the image suite's scores record it: the image verifier's `ImagePoint` without its
    None and default fields (keys in its order); a judged point has `check_type` `judge:CHECK`."""

    id: Required[str]
    kind: Required[str]
    check: str  # absent on the points of a sample with no image
    component: Required[str]
    status: Required[Status]
    check_type: str
    measured: Any  # what the image check measured, whatever it reports
    reason: Required[str]
    pattern: str
    gated: bool
    critical: bool  # only when False


class ImageScores(TypedDict, total=False):
    """The image suite's scores: passed None when undecided, and how many points the pixels decided."""

    passed: Required[bool | None]
    decided: Required[int]
    undecided: Required[int]
    points: Required[list[ImagePointScore]]
    error: str | None
    category: str


# The metrics read records through it: a record's scores are the JSON that `ImageScores` describes.
SCORES = TypeAdapter(ImageScores)
POINT = TypeAdapter(ImagePointScore)


def image_point_score(p: ImagePoint) -> ImagePointScore:
    """One point compact: the fields that say something (no None, no default). `ImagePointScore`
    declares them in `ImagePoint`'s order, and a TypedDict validates into its declared order."""
    return POINT.validate_python(p.model_dump(exclude_none=True, exclude_defaults=True))


def no_image_scores(task: Task) -> ImageScores:
    """The scores of a sample with no image to verify: every point failed as `no_output`."""
    return {"passed": False, "decided": len(task.points), "undecided": 0, "category": task.category,
            "error": "no image", "points": [{"id": vp.id, "kind": vp.kind, "component": vp.component,
                                             "status": "fail", "pattern": "no_output",
                                             "reason": "no image to verify"} for vp in task.points]}


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
    transcript_type: ClassVar[type[Any] | None] = ImageTranscript
    scores_type: ClassVar[type[Any] | None] = ImageScores

    @property
    def iopts(self) -> ImageOptions:
        assert isinstance(self.options, ImageOptions)
        return self.options

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        task: Task = sample.data["task"]
        output: ImageTranscript = {"task_id": task.id, "category": task.category, "format": "image", "png_base64": None}
        try:
            out = await ctx.generate("assistant", [{"role": "user", "content": image_prompt(task)}],
                                     GenerateConfig(output="image"))
        except ModelError as exc:
            return Transcript(output=dict(output), errors=[f"assistant: {exc}"])
        png = out.images[0]
        digest = hashlib.sha256(png.encode("utf-8")).hexdigest()[:16]
        return Transcript(output=dict(output | {"png_base64": png, "png_sha256": digest}))

    def scorers(self) -> dict[str, Scorer]:
        judged = self.iopts.judge_calibration is not None
        return {"verify": FunctionScorer("verify", self._verify_picture, roles=("judge",) if judged else (),
                                         description="the image-only verifier: OCR and OpenCV checks as calibrated"
                                                     + (", then the calibrated vision judge" if judged else ""))}

    @cached_property
    def calibration(self) -> JudgeCalibration | None:
        path = self.iopts.judge_calibration
        return JudgeCalibration.load(path) if path is not None else None

    async def _verify_picture(self, sample: Sample, transcript: ImageTranscript, ctx: SampleContext) -> Score:
        task: Task = sample.data["task"]
        encoded = transcript.get("png_base64")
        if not encoded:
            return Score(values=dict(no_image_scores(task)))
        try:
            png = base64.b64decode(encoded, validate=True)
        except ValueError:
            png = b""  # not base64: the verifier rejects it as an unreadable image, recorded per point
        verdict = await asyncio.to_thread(verify_image, task, png)
        points = [image_point_score(p) for p in verdict.points]
        if self.calibration is not None and verdict.error is None:
            points = await self._judged(task, encoded, points, ctx)
        return Score(values=dict(summarised(task, points) | {"error": verdict.error, "category": task.category}))

    async def _judged(self, task: Task, encoded: str, points: list[ImagePointScore],
                      ctx: SampleContext) -> list[ImagePointScore]:
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

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:  # the signature is the core's (harness.suite)
        return dict(no_image_scores(sample.data["task"]))

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


def summarised(task: Task, points: list[ImagePointScore]) -> ImageScores:
    """A sample's verdict from its points: failed if a critical point failed, passed if every
    critical point passed, else undecided (None)."""
    critical = {vp.id for vp in task.points if vp.critical}
    statuses = [p["status"] for p in points if p["id"] in critical]
    passed = False if "fail" in statuses else (True if all(s == "pass" for s in statuses) else None)
    undecided = sum(p["status"] == "undecided" for p in points)
    return {"passed": passed, "decided": len(points) - undecided, "undecided": undecided, "points": points}


def judge_metrics(cal: JudgeCalibration, scores: list[ImageScores], seed: int = 0) -> dict[str, Metric]:
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


def _image_scores(records: list[SampleRecord]) -> list[ImageScores]:
    return [SCORES.validate_python(r.scores) for r in records if r.scores and "points" in r.scores and "undecided" in r.scores]


def image_metrics(records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
    """Lower and upper bounds of the pass and point rates (undecided as failed / as passed), the
    share of tasks the pixels decided, per category for the pass rate; bootstrap CIs over tasks."""

    def rates(rows: list[ImageScores], suffix: str = "") -> dict[str, Metric]:
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
