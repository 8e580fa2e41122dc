"""The vision judge: a model that is shown the picture (the `judge` role; a message carrying the
PNG as an image part, see `harness.messages`) and asked, point by point, whether the point's fact
holds -- for the points pixels alone leave undecided.

A judge is trusted per check (the verifier's predicate: `parallel`, `connected`, ...) only where
its calibration on our own renders found it precise enough, by the same rule as the OCR and
OpenCV checks (`image_calibrate._rates`: precision and pass precision >= 0.9, >= 5 known
failures). `harness prograf calibrate-judge` writes that calibration for one judge model; the
suite `prograf-image` uses a judge only with such a file, and only for the checks it enabled. An
answer that is neither yes nor no leaves the point undecided.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, model_validator

from environments.prograf.check.render import Renderer
from environments.prograf.check.verify import verify
from environments.prograf.image.calibrate import Rates, Tally, _empty, _rates, _tally, render_png, samples, subset
from environments.prograf.image.pictures import UNREADABLE
from environments.prograf.image.verify import verify_image
from environments.prograf.task import Task, VerificationPoint
from harness.errors import HarnessError, invalid
from harness.messages import ChatMessage, image_part, text_part
from harness.providers.base import GenerateConfig, ModelError, ModelOutput

QUESTION = ("Look at the diagram in the image. Is the following true of it?\n{fact}\n"
            "Answer with one word: yes or no.")
ANSWER_CONFIG = GenerateConfig(max_tokens=4, temperature=0.0)
Generate = Callable[[list[ChatMessage], GenerateConfig], Awaitable[ModelOutput]]


def judge_messages(png_base64: str, vp: VerificationPoint) -> list[ChatMessage]:
    return [{"role": "user", "content": [text_part(QUESTION.format(fact=vp.text)), image_part(png_base64)]}]


def read_answer(text: str) -> bool | None:
    """yes -> True, no -> False; anything else (a sentence, both, nothing) -> None."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    yes, no = "yes" in words, "no" in words
    return yes if yes != no else None


async def ask(generate: Generate, png_base64: str, vp: VerificationPoint) -> tuple[bool | None, str]:
    """The judge's verdict on one point (None: no usable answer) and its reply, as said."""
    try:
        out = await generate(judge_messages(png_base64, vp), ANSWER_CONFIG)
    except ModelError as exc:
        return None, f"judge failed: {exc}"
    return read_answer(out.text), out.text.strip()


class JudgeCalibration(BaseModel):
    """What `calibrate-judge` found for one judge model; the suite reads it back."""

    judge: str = Field(description="the judge's model spec, as `--judge-model` names it")
    enabled: list[str] = Field(description="the checks whose judged points may be used")
    tasks: int
    images: int
    seconds: float
    by_check: dict[str, Rates] = Field(description="each check asked: its counts and rates, as the image checks'")

    @model_validator(mode="after")
    def _enabled_have_figures(self) -> "JudgeCalibration":
        # A run reports the judge's calibration figures beside its scores, so a trusted check
        # without them is a malformed file, not a judge to use.
        for check in self.enabled:
            if check not in self.by_check:
                raise ValueError(f"enabled check {check!r} has no tp/fp/fn/tn counts in by_check")
        return self

    @classmethod
    def load(cls, path: str | Path) -> "JudgeCalibration":
        fix = "write one with `harness prograf calibrate-judge --judge-model SPEC --out FILE`"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise HarnessError(f"judge calibration {path}: cannot be read ({exc.strerror}); {fix}") from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:  # not JSON at all is an error at `(top level)`
            raise HarnessError(invalid(exc, f"judge calibration {path}", fix)) from None


async def calibrate_judge(generate: Generate, judge: str, tasks: list[Task], renderer: Renderer,
                          limit: int | None = None, parity: int | None = None) -> JudgeCalibration:
    """Ask the judge every point our image checks leave undecided, on the references and mutants
    of the chosen tasks; the truth is the structural verifier's verdict (gated points are left out)."""
    start = time.perf_counter()
    table: dict[str, Tally] = {}
    seen: set[str] = set()
    images = 0
    chosen = subset(tasks, parity, limit)
    for task in chosen:
        for name, sol in samples(task):
            try:
                digest, png = render_png(task, sol, renderer)
            except UNREADABLE:
                continue
            if digest in seen:
                continue
            seen.add(digest)
            images += 1
            truth = {p.id: p for p in verify(task, sol.format, sol.code, renderer).points}
            pixels = {p.id: p.status for p in verify_image(task, png).points}
            encoded = _base64(png)
            for vp in task.points:
                if pixels[vp.id] != "undecided" or truth[vp.id].gated:
                    continue
                said, reply = await ask(generate, encoded, vp)
                row = table.setdefault(vp.check, _empty())
                if said is None:
                    row["undecided"] += 1
                    continue
                _tally(row, truth[vp.id].passed, said, f"{task.id} {name} {vp.id}: judge said {reply!r} "
                                                        f"(truth: {truth[vp.id].reason})")
    by_check = {check: _rates(row) for check, row in sorted(table.items())}
    return JudgeCalibration(judge=judge, enabled=[c for c, r in by_check.items() if r["enabled"]], tasks=len(chosen),
                            images=images, seconds=round(time.perf_counter() - start, 1), by_check=by_check)


def _base64(png: bytes) -> str:
    return base64.b64encode(png).decode("ascii")


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def format_judge_table(cal: JudgeCalibration) -> str:
    lines = [f"judge {cal.judge}: {cal.tasks} tasks, {cal.images} images, {cal.seconds} s",
             "| check | fails said / true | precision | recall | pass precision | no answer | enabled |",
             "|---|---|---|---|---|---|---|"]
    for check, r in cal.by_check.items():
        lines.append(f"| {check} | {r['tp'] + r['fp']} / {r['tp'] + r['fn']} | {_num(r['precision'])} "
                     f"| {_num(r['recall'])} | {_num(r['pass_precision'])} | {r['undecided']} "
                     f"| {'yes' if r['enabled'] else r['why_disabled']} |")
    return "\n".join(lines)


def dump(cal: JudgeCalibration, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cal.model_dump(), indent=1, ensure_ascii=False), encoding="utf-8")
