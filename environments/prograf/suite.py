"""Suite `prograf`: single-shot structured-diagram generation, verified point by point.

One sample = one task. Solve: the model under test (`assistant`) gets the task's prompt and the
chosen format's conventions and writes the diagram as code; the code block is cut out of the
reply. Score (`verify`): the verifier parses the code into a scene (rendering SVG to check what is
visible) and checks every verification point; nothing the model wrote is ever executed.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field
from typing_extensions import Required, TypedDict  # pydantic validates a typing.TypedDict only from Python 3.12

from environments.prograf.check.render import Renderer, cache_dir
from environments.prograf.check.verify import PointResult, Verdict, verify
from environments.prograf.formats import extract_code, user_prompt
from environments.prograf.generate.build import CORPUS
from environments.prograf.metrics import POINT, CodeScores, PointScore, prograf_breakdowns, prograf_counts, prograf_metrics
from environments.prograf.task import Task, load_tasks
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig, ModelError
from harness.records import Metric, MetricSpec, SampleRecord
from harness.suite import (FunctionScorer, Sample, SampleContext, Score, Scorer, Suite,
                           SuiteOptions, Transcript)

SYSTEM = ("You draw structured diagrams as code. Follow the request exactly: every named object, relation,"
          " connection and label it asks for, and nothing else. Reply with the code block only.")


class ProGrafOptions(SuiteOptions):
    format: Literal["auto", "svg", "dot", "mermaid", "schemdraw-json", "schemdraw-py"] = Field(
        "auto", description="format asked for; auto or one a task does not allow = the task's preferred format")
    category: Literal["all", "geometry", "circuit", "flowchart", "diagram"] = Field("all", description="which tasks")
    source: Literal["all", "generated", "handwritten"] = Field("all", description="seeded or hand-written tasks")
    render: bool = Field(True, description="render SVG and count only what is visible in the render")
    max_tokens: int = Field(2048, ge=64, le=32768, description="the generator's output budget per task")


class CodeTranscript(TypedDict, total=False):
    """What the single-shot solver records: the task, the format asked for, the reply and the code
    cut out of it (`extracted` says how, or why none); `reply` and `code` are None when the call failed."""

    task_id: Required[str]
    category: Required[str]
    format: Required[str]
    reply: str | None
    code: str | None
    extracted: str
    finish_reason: str


def point_score(p: PointResult) -> PointScore:
    """One point compact: the fields that say something (no None, no default). `PointScore` declares
    them in `PointResult`'s order, and a TypedDict validates into its declared order."""
    return POINT.validate_python(p.model_dump(exclude_none=True, exclude_defaults=True))


def point_summary(verdict: Verdict) -> CodeScores:
    """The scores one sample records: the verdict, each point compact."""
    failed = [p for p in verdict.points if not p.passed]
    return {"passed": verdict.passed, "point_rate": verdict.point_rate, "format": verdict.format,
            "error": verdict.error, "notes": verdict.notes, "rendered": verdict.rendered,
            "pattern": failed[0].pattern if verdict.error else None,
            "points": [point_score(p) for p in verdict.points]}


def no_output_scores(task: Task) -> CodeScores:
    """The scores of a sample with no code to verify: every point failed as `no_output`."""
    return {"passed": False, "point_rate": 0.0, "category": task.category, "pattern": "no_output",
            "points": [{"id": vp.id, "kind": vp.kind, "component": vp.component, "passed": False,
                        "pattern": "no_output", "reason": "no output to verify"} for vp in task.points]}


def interleaved(tasks: list[Task]) -> list[Task]:
    """Categories taken in turn (each in corpus order), so `--limit 4` already sees all four."""
    by_category: dict[str, list[Task]] = {}
    for t in tasks:
        by_category.setdefault(t.category, []).append(t)
    queues = list(by_category.values())
    return [q[i] for i in range(max(map(len, queues))) for q in queues if i < len(q)]


class ProGrafSuite(Suite):
    name = "prograf"
    version = "0.1.0"
    headline_metric = "pass_rate"
    metric_specs = {"pass_rate": MetricSpec(unit="fraction", description="outputs whose every point passed",
                                            breakdowns=("category",)),
                    "point_rate": MetricSpec(unit="fraction"),
                    "format_error_rate": MetricSpec(direction="lower", unit="fraction",
                                                    description="outputs the verifier could not read")}
    description = "ProGraf single-shot: draw a geometry figure, circuit, flowchart or diagram as code; verified point by point"
    Options: ClassVar[type[SuiteOptions]] = ProGrafOptions
    transcript_type: ClassVar[type[Any] | None] = CodeTranscript
    scores_type: ClassVar[type[Any] | None] = CodeScores

    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        self._renderer: Renderer | None = None

    @property
    def opts(self) -> ProGrafOptions:
        assert isinstance(self.options, ProGrafOptions)
        return self.options

    # ------------------------------------------------------------------ dataset
    def load_samples(self, corpus: str | None) -> list[Sample]:
        tasks = load_tasks(Path(corpus) if corpus else CORPUS)
        tasks = [t for t in tasks if self.opts.category in ("all", t.category) and self.opts.source in ("all", t.source)]
        if not tasks:
            raise HarnessError(f"ProGraf: no task is left after category={self.opts.category} source={self.opts.source}")
        return [Sample(id=t.id, data={"task": t, "category": t.category}) for t in interleaved(tasks)]

    def corpus_identity(self, corpus: str | None) -> dict[str, str | None]:
        path = Path(corpus) if corpus else CORPUS
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        return {"path": str(path), "sha256": digest}

    def format_for(self, task: Task) -> str:
        return self.opts.format if self.opts.format in task.formats else task.formats[0]

    # ------------------------------------------------------------------ solve
    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        task: Task = sample.data["task"]
        fmt = self.format_for(task)
        messages: list[ChatMessage] = [{"role": "system", "content": SYSTEM},
                                       {"role": "user", "content": user_prompt(task.prompt, fmt)}]
        output: CodeTranscript = {"task_id": task.id, "category": task.category, "format": fmt}
        try:
            out = await ctx.generate("assistant", messages, GenerateConfig(max_tokens=self.opts.max_tokens))
        except ModelError as exc:
            return Transcript(output=dict(output | {"reply": None, "code": None, "extracted": "no reply"}),
                              errors=[f"assistant: {exc}"])
        code, how = extract_code(out.text, fmt)
        return Transcript(output=dict(output | {"reply": out.text, "code": code, "extracted": how,
                                                "finish_reason": out.finish_reason}))

    # ------------------------------------------------------------------ score
    def scorers(self) -> dict[str, Scorer]:
        return {"verify": FunctionScorer("verify", self._verify,
                                         description="the structural verifier (and SVG renders): every point, with DSG gating")}

    def renderer(self) -> Renderer | None:
        if not self.opts.render:
            return None
        if self._renderer is None:
            self._renderer = Renderer(disk_cache=cache_dir())
            atexit.register(self._renderer.close)
        return self._renderer

    async def _verify(self, sample: Sample, transcript: CodeTranscript, ctx: SampleContext) -> Score:
        task: Task = sample.data["task"]
        code = transcript.get("code")
        fmt = transcript.get("format") or self.format_for(task)
        if code is None:
            return Score(values=dict(no_output_scores(task) | {"format": fmt,
                                                               "error": f"no code: {transcript.get('extracted')}"}))
        verdict = await asyncio.to_thread(verify, task, fmt, code, self.renderer())
        return Score(values=dict(point_summary(verdict) | {"category": task.category}))

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:  # the signature is the core's (harness.suite)
        return dict(no_output_scores(sample.data["task"]))

    # ------------------------------------------------------------------ metrics
    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return prograf_metrics(records, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        return prograf_breakdowns(records, seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return prograf_counts(records)
