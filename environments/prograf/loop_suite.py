"""Suite `prograf-loop`: the profile-guided ProGraf loop (`environments/prograf/loop_agent.py`) and its
baselines at an equal budget of generator calls, on a generator's hardest subset.

Options pick the method (`loop`, `single-shot`, `best-of`, `fixed-step`, `reflexion`), an
ablation of the loop (`no-profile`, `other-profile`, `no-verify`, `no-rollback`, `no-replan`), the
profile file (`harness prograf profile`), the budget and the checker. The loop's checks (and
best-of's and the Reflexion-style agent's selection): `checker=prompt` (the default) reads them from
the task's prompt alone (`check/prompt.py`); `checker=oracle` uses the hidden VPs, an UPPER BOUND
(every output records `checker`; it is a suite option, so part of the run's setup, and a
leaderboard never pools the two). Score: the final
code against every hidden point (the `prograf` verifier). Metric `recovery`: the pass rate over the
subset, bootstrap CI over tasks. Option `tasks` (comma-separated ids) runs only those tasks: a claim
check (`claim.py`) runs each method on one generator's hardest subset, named that way, and binds the
run to its profile's content with `profile_sha256` (and `other_profile_sha256`). The claim's paired
comparisons use Newcombe's paired interval (`claim.paired_recovery`); `paired_difference` here is
the plain Student-t interval on the per-task differences, kept for the loop's controls.

`StepMock` (in `mock.py`, re-exported here) is the synthetic mock generator made step-aware, for tests only.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, JsonValue

from environments.prograf.check.prompt import read_prompt
from environments.prograf.check.render import Renderer, cache_dir
from environments.prograf.check.verify import Checkable, verify
from environments.prograf.formats import FENCES, extract_code, user_prompt
from environments.prograf.generate.build import CORPUS
from environments.prograf.image.pictures import picture
from environments.prograf.loop_agent import (CheckItem, LoopConfig, ProGrafLoop, StepRequest, TraceEntry, best_of, reflexion,
                                             single_shot)
from environments.prograf.metrics import SCORES
from environments.prograf.mock import ATTENTION_FLOOR, KEEP_FACTOR, StepMock
from environments.prograf.profile import SYSTEM, CapabilityProfile, load_profile
from environments.prograf.suite import ProGrafSuite, no_output_scores, point_summary
from environments.prograf.task import Task, load_tasks
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig, ModelError
from harness.records import Metric, SampleRecord
from harness.stats import mean_metric, ratio_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, SuiteOptions, Transcript

FRESH_SEED = 1000  # the loop's generator seeds start here, away from the profile's 0..k-1
__all__ = ["ATTENTION_FLOOR", "KEEP_FACTOR", "StepMock"]  # re-exported from mock.py


class LoopOptions(SuiteOptions):
    method: Literal["loop", "single-shot", "best-of", "fixed-step", "reflexion"] = Field("loop", description="what solves")
    ablation: Literal["none", "no-profile", "other-profile", "no-verify", "no-rollback", "no-replan"] = Field(
        "none", description="the loop without one of its parts (method=loop only)")
    profile: str = Field("", description="the generator's profile (JSON from harness prograf profile)")
    other_profile: str = Field("", description="another generator's profile (ablation=other-profile)")
    subset: Literal["hardest", "all"] = Field("hardest", description="the profile's hardest subset, or every task")
    budget: int = Field(8, ge=1, le=64, description="generator calls per task, for every method")
    steps: int = Field(3, ge=1, le=16, description="planned steps of the loop and fixed-step")
    checker: Literal["prompt", "oracle"] = Field(
        "prompt", description="where the loop's checks come from: the prompt, or the hidden points (oracle = upper bound)")
    seed_base: int = Field(FRESH_SEED, ge=0, description="first generator seed (fresh: away from the profile's 0..k-1)")
    cross_fit: bool = Field(True, description="plan each task with a profile built without that task's fold")
    category: Literal["all", "geometry", "circuit", "flowchart", "diagram"] = Field("all", description="which tasks")
    render: bool = Field(False, description="render SVG when verifying (slower; counts only what is visible)")
    pictures: bool = Field(True, description="a picture of every loop step, its failed checks marked (output.pictures)")
    max_tokens: int = Field(2048, ge=64, le=32768, description="the generator's output budget per call")
    tasks: str = Field("", description="comma-separated task ids: only these (after subset and category); "
                       "empty = every task left")
    profile_sha256: str = Field("", description="the profile file's sha256: when set, a changed profile is an "
                                "error (a claim check sets it, so its runs are bound to the profile's content)")
    other_profile_sha256: str = Field("", description="the same for other_profile")


class LoopOutput(BaseModel):
    """What the loop suite's solver records (its transcript type)."""

    task_id: str
    category: str
    format: str
    method: str
    ablation: str
    checker: str = Field(description="oracle = an upper bound, never a leaderboard result")
    calls: int
    code: str | None
    trace: list[TraceEntry] = Field(default_factory=list)
    pictures: list[dict[str, str]] = Field(
        default_factory=list, description="one per loop step: caption and base64 PNG, the step's failed checks marked")


def cached_tasks(path: Path) -> list[Task]:
    """The corpus, read once per file version (a claim check builds a suite per method)."""
    return _tasks_at(str(path), path.stat().st_mtime_ns if path.is_file() else 0)


def cached_profile(path: Path) -> CapabilityProfile:
    """A profile, read once per file version (the loop asks for its rates once per task)."""
    return _profile_at(str(path), path.stat().st_mtime_ns if path.is_file() else 0)


@lru_cache(maxsize=4)
def _tasks_at(path: str, mtime_ns: int) -> list[Task]:
    return load_tasks(Path(path))


@lru_cache(maxsize=16)
def _profile_at(path: str, mtime_ns: int) -> CapabilityProfile:
    return load_profile(Path(path))


def oracle_checks(task: Task) -> list[CheckItem]:
    """The hidden VPs as the loop's checks: the labelled upper bound."""
    return [CheckItem(vp.id, vp.component, vp.text) for vp in task.points if vp.critical]


def prompt_checks(task: Task) -> list[CheckItem]:
    """The checks the prompt states (`prompt_checks.read_prompt`), never the hidden points."""
    return [CheckItem(vp.id, vp.component, vp.text) for vp in read_prompt(task).points if vp.critical]


def step_prompt(task: Task, fmt: str, req: StepRequest) -> str:
    """The user message of one call: the task, then (for a step) the committed code, the focus, what to keep."""
    parts = [user_prompt(task.prompt, fmt)]
    if req.code is not None:
        parts.append(f"The diagram so far (accepted):\n```{FENCES[fmt][0]}\n{req.code}\n```")
    if not req.whole:
        parts.append("This step: redraw the whole diagram, making sure of the following:\n"
                     + "\n".join(f"- {c.text}" for c in req.focus))
        parts.append("Focus components: " + ", ".join(dict.fromkeys(c.component for c in req.focus)) + ".")
        if req.keep:
            parts.append("Keep components: " + ", ".join(dict.fromkeys(c.component for c in req.keep)) + ".")
    if req.feedback:
        parts.append("The last draft failed these checks:\n" + "\n".join(f"- {f}" for f in req.feedback))
    return "\n\n".join(parts)


class ProGrafLoopSuite(ProGrafSuite):
    name = "prograf-loop"
    # 0.2: checker=prompt is the default (0.1 had only the oracle); option seed_base. 0.3: the prompt
    # checker reads circuits placed in free words (3 hand-written circuits gain their wiring checks); step pictures
    version = "0.3.0"
    headline_metric = "recovery"
    description = "ProGraf loop: profile-guided stepwise drawing with verified commits vs baselines at equal budget"
    Options = LoopOptions
    transcript_type: ClassVar[type[Any] | None] = LoopOutput  # scores: the code suite's `CodeScores`, with `calls`

    @classmethod
    def leaderboard_refusal(cls, options: dict[str, JsonValue]) -> str | None:  # a manifest's suite options
        if options.get("checker") == "oracle":
            return ("checker=oracle: the loop checked its steps against the hidden points, an upper bound, not a "
                    "result; rerun it with checker=prompt (the default) for the leaderboard")
        return None

    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        self._picture_renderer: Renderer | None = None

    @property
    def lopts(self) -> LoopOptions:
        assert isinstance(self.options, LoopOptions)
        return self.options

    def renderer(self) -> Renderer | None:
        if not self.lopts.render:
            return None
        if self._renderer is None:
            self._renderer = Renderer(disk_cache=cache_dir())
            atexit.register(self._renderer.close)
        return self._renderer

    def picture_renderer(self) -> Renderer:
        """The renderer of the step pictures (the sandboxed worker; cached by content hash on disk)."""
        if self._picture_renderer is None:
            self._picture_renderer = Renderer(disk_cache=cache_dir())
            atexit.register(self._picture_renderer.close)
        return self._picture_renderer

    def step_pictures(self, checked: Checkable, fmt: str, trace: list[TraceEntry]) -> list[dict[str, str]]:
        """A picture of each step's draw (commit or rollback), the step's failed checks marked; a draw
        that cannot be read or drawn gets none (the trace has its results)."""
        out = []
        steps = [(t, code) for t in trace if (code := t.get("code")) is not None]
        for k, (step, code) in enumerate(steps, 1):
            results: dict[str, bool] = step.get("checks") or {}
            verdict = verify(checked, fmt, code, self.renderer())
            caption = (f"{checked.id} step {k}/{len(steps)} (call {step.get('call')}): {step['node']}, "
                       f"{sum(results.values())}/{len(results)} checks passed")
            pic = picture(checked, fmt, code, self.picture_renderer(), caption, verdict=verdict, only=results)
            if pic is not None:
                out.append(pic)
        return out

    def profile(self) -> CapabilityProfile | None:
        return cached_profile(Path(self.lopts.profile)) if self.lopts.profile else None

    def load_samples(self, corpus: str | None) -> list[Sample]:
        o = self.lopts
        for path, digest, name in ((o.profile, o.profile_sha256, "profile"),
                                   (o.other_profile, o.other_profile_sha256, "other_profile")):
            if digest and file_sha256(path) != digest:
                raise HarnessError(f"prograf-loop: {name}={path or '(none)'} is not the file this run was set up with "
                                   f"(sha256 {digest[:12]}...): it changed or is missing; start a new run (or check)")
        every = cached_tasks(Path(corpus) if corpus else CORPUS)
        tasks = [t for t in every if self.lopts.category in ("all", t.category)]
        if self.lopts.subset == "hardest":
            profile = self.profile()
            if profile is None:
                raise HarnessError("prograf-loop: subset=hardest needs profile=FILE (harness prograf profile --out FILE)")
            hardest = set(profile.hardest)
            tasks = [t for t in tasks if t.id in hardest]
        if o.tasks:
            wanted = list(dict.fromkeys(t.strip() for t in o.tasks.split(",") if t.strip()))
            known, left = {t.id for t in every}, {t.id for t in tasks}
            unknown = [t for t in wanted if t not in known]
            if unknown:
                raise HarnessError(f"prograf-loop: tasks names {', '.join(unknown[:5])}"
                                   f"{f' (and {len(unknown) - 5} more)' if len(unknown) > 5 else ''}: not a task of "
                                   f"the corpus {corpus or CORPUS}")
            dropped = [t for t in wanted if t not in left]
            if dropped:
                raise HarnessError(f"prograf-loop: tasks names {', '.join(dropped[:5])}, which category={o.category} "
                                   f"/ subset={o.subset} leave out")
            keep = set(wanted)
            tasks = [t for t in tasks if t.id in keep]
        if self.lopts.ablation == "other-profile" and not self.lopts.other_profile:
            raise HarnessError("prograf-loop: ablation=other-profile needs other_profile=FILE")
        if not tasks:
            raise HarnessError("prograf-loop: no task left (an empty hardest subset? try subset=all)")
        return [Sample(id=t.id, data={"task": t, "category": t.category}) for t in tasks]

    def rates(self, task: Task) -> dict[str, float]:
        o = self.lopts
        path = o.other_profile if o.ablation == "other-profile" else o.profile
        if o.method != "loop" or o.ablation == "no-profile" or not path:
            return {}
        profile = cached_profile(Path(path))
        own = o.ablation != "other-profile"
        return profile.component_rates(exclude=task.id if o.cross_fit and own else None)

    def loop_config(self) -> LoopConfig:
        o = self.lopts
        fixed = o.method == "fixed-step"
        return LoopConfig(budget=o.budget, steps=o.steps, use_profile=not fixed and o.ablation != "no-profile",
                          verify=o.ablation != "no-verify", rollback=o.ablation != "no-rollback",
                          replan=not fixed and o.ablation != "no-replan")

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        task: Task = sample.data["task"]
        fmt = task.formats[0]
        o = self.lopts
        oracle = o.checker == "oracle"
        checks = oracle_checks(task) if oracle else prompt_checks(task)
        checked: Checkable = task if oracle else read_prompt(task)  # what `check` verifies against

        async def draw(req: StepRequest) -> str | None:
            messages: list[ChatMessage] = [{"role": "system", "content": SYSTEM},
                                           {"role": "user", "content": step_prompt(task, fmt, req)}]
            seed = o.seed_base + ctx.seed * 1000 + req.call
            try:
                out = await ctx.generate("assistant", messages, GenerateConfig(max_tokens=o.max_tokens, seed=seed))
            except ModelError:
                return None
            return extract_code(out.text, fmt)[0]

        async def check(code: str, ids: list[str]) -> dict[str, bool]:
            verdict = await asyncio.to_thread(verify, checked, fmt, code, self.renderer())
            return {p.id: p.passed for p in verdict.points if p.id in ids}

        if o.method == "single-shot" or (not checks and o.method in ("loop", "fixed-step")):  # nothing to step on
            outcome = await single_shot(checks, draw)
            code, calls, trace = outcome.code, outcome.calls, outcome.trace
        elif o.method == "best-of":
            outcome = await best_of(checks, draw, check, o.budget)
            code, calls, trace = outcome.code, outcome.calls, outcome.trace
        elif o.method == "reflexion":
            outcome = await reflexion(checks, draw, check, o.budget)
            code, calls, trace = outcome.code, outcome.calls, outcome.trace
        else:
            state = await ProGrafLoop(checks, draw, check, self.rates(task), self.loop_config()).run()
            code, calls, trace = state["code"], state["calls"], state["trace"]
        pictures = await asyncio.to_thread(self.step_pictures, checked, fmt, trace) if o.pictures else []
        return Transcript(output=LoopOutput(task_id=task.id, category=task.category, format=fmt, method=o.method,
                                            ablation=o.ablation, checker=o.checker, calls=calls, code=code,
                                            trace=trace, pictures=pictures).model_dump())

    def scorers(self) -> dict[str, Scorer]:
        return {"verify": FunctionScorer("verify", self._verify_final,
                                         description="the final code against every hidden point")}

    async def _verify_final(self, sample: Sample, transcript: LoopOutput, ctx: SampleContext) -> Score:
        task: Task = sample.data["task"]
        if transcript.code is None:
            return Score(values=dict(no_output_scores(task) | {"calls": transcript.calls}))
        verdict = await asyncio.to_thread(verify, task, transcript.format, transcript.code, self.renderer())
        return Score(values=dict(point_summary(verdict) | {"category": task.category, "calls": transcript.calls}))

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        rows = [SCORES.validate_python(r.scores) for r in records if r.scores and "passed" in r.scores]
        out = {"recovery": _share([[float(s["passed"]), 1.0] for s in rows], seed),
               "calls": _share([[float(s.get("calls", 0)), 1.0] for s in rows], seed)}
        for cat in ("geometry", "circuit", "flowchart", "diagram"):
            mine = [[float(s["passed"]), 1.0] for s in rows if s.get("category") == cat]
            if mine:
                out[f"recovery/{cat}"] = _share(mine, seed)
        return out

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        m = self.metrics(records, seed)
        return {"category": {k.split("/", 1)[1]: v for k, v in m.items() if k.startswith("recovery/")}}


def _share(rows: list[list[float]], seed: int) -> Metric:
    arr = np.asarray(rows, dtype=float).reshape(-1, 2)
    return ratio_metric(arr, lambda c: c[0], lambda c: c[1], seed=seed)


def file_sha256(path: str) -> str:
    """A file's sha256 ("" when there is no such file)."""
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest() if path and p.is_file() else ""


def paired_difference(a: dict[str, bool], b: dict[str, bool], level: float = 0.95) -> Metric:
    """Recovery of A minus recovery of B over the tasks both ran (task id -> passed): the mean of
    the per-task differences (each -1, 0 or +1) with its Student-t interval over tasks
    (`harness.stats.mean_interval`). Used by the loop's positive and negative controls
    (tests/environments/prograf/test_prograf_loop.py), not by the claim: the claim decides on
    Newcombe's paired score interval of the 2x2 counts (`claim.paired_recovery`), because this t
    interval fails on 0/1 paired outcomes with few discordant tasks -- it collapses to [0, 0] when
    every task is tied, and covers 0.64 at n = 20 with 5% of tasks one-way discordant (claim.py's
    docstring, docs/claims.md). One task gives no interval."""
    common = sorted(set(a) & set(b))
    if not common:
        raise HarnessError("paired_difference: the two runs share no task")
    return mean_metric([float(a[t]) - float(b[t]) for t in common], level)
