"""Suite `cdwm-mind2web`: Mind2Web's offline protocol (candidate ranking, then action prediction,
scored step by step with the gold history) run by the ReAct baseline or the CDWM agent
(`--agent react|cdwm`), scored with Mind2Web's metrics and CDWM's.

One sample = one task = one episode over its recorded steps. `--corpus` takes the release's JSON
files or data/ folder, or a Hugging Face dataset id (network permitting); without it, the
project's own corpus (`corpora/mind2web/`, snapshots of the local shop, travel and mail sites).
`--suite-option split=cross_task|cross_website|cross_domain|test|train|all`.

`--suite-option protocol=mindact` asks MindAct's multiple-choice questions (groups of
`group_size` candidates and "None of the above", winners queued again; `top_k` then defaults to
50) instead of one question over the top 10; each question is one agent step, so the agent's step
limit becomes `max_steps` gold steps times the most questions a gold step can take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, Literal

import numpy as np

from pydantic import Field

from corpora.mind2web.loader import Task, load_tasks
from environments.cdwm.episode import EpisodeScores, EpisodeTranscript, Evaluation
from environments.cdwm.metrics import cdwm_metrics
from environments.cdwm.suite_base import CdwmOptions, CdwmSuite
from environments.mind2web.env import ACTION_PATTERN, MIND2WEB_MASK, Mind2WebEnvironment
from environments.mind2web.mindact import MAX_GROUP, MINDACT_MASK, choice_pattern, rounds_needed
from environments.mind2web.metrics import Mind2WebStepMetrics, mind2web_metrics, task_scores
from environments.web.suite import WEB_WORLD_MODEL_HELP
from harness.records import CallRecord, Metric, SampleRecord
from harness.stats import ratio_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, SuiteOptions, Transcript

MIND2WEB_WORLD_MODEL_HELP = (
    "Only a click can change stored state: typing or selecting fills a form, and nothing is stored until a "
    "button submits it; following a link changes nothing. On the project's own sites: " + WEB_WORLD_MODEL_HELP
)
Split = Literal["test", "all", "train", "cross_task", "cross_website", "cross_domain"]  # corpora.mind2web.loader.SPLITS
# What a task's scores take from its evaluation.
M2W_FIELDS = {"element_accuracy", "operation_f1", "step_success_rate", "task_success", "gold_steps", "answered_steps",
              "candidate_recall", "split", "mindact"}


TOP_K = {"single": 10, "mindact": 50}  # MindAct's paper evaluates its top 50


class Mind2WebEvaluation(Mind2WebStepMetrics, Evaluation):
    """The environment's verdict: the step metrics beside the shared evaluation fields."""


class Mind2WebTranscript(EpisodeTranscript):
    evaluation: Mind2WebEvaluation


class Mind2WebScores(Mind2WebStepMetrics, EpisodeScores):
    """CDWM's scores, then Mind2Web's."""


class Mind2WebOptions(CdwmOptions):
    split: Split = Field("test", description="which tasks (test = the three test splits, all = every split)")
    protocol: Literal["single", "mindact"] = Field("single", description=(
        "single: the top_k candidates in one question per step, answered `click [id]`; mindact: MindAct's "
        "multiple-choice questions of group_size candidates plus 'None of the above', answered `click [B]` or `none`"))
    top_k: int | None = Field(None, ge=1, le=100, description="candidate elements per step (the ranker's top k); "
                              "default 10, or 50 under protocol=mindact")
    group_size: int = Field(5, ge=2, le=MAX_GROUP, description="mindact: candidates per question (options B, C, ...)")
    group_order: Literal["shuffled", "ranked"] = Field("shuffled", description=(
        "mindact: the order candidates are asked in: shuffled (MindAct's evaluation; seeded by the step's action_uid) "
        "or ranked (the ranker's order)"))
    max_steps: int = Field(30, ge=1, description="gold steps per episode (a task's recorded steps end it first); "
                           "under mindact the agent may take this many times the questions a step can need")


class CdwmMind2WebSuite(CdwmSuite[Task, Mind2WebTranscript, Mind2WebScores]):
    name = "cdwm-mind2web"
    version = "0.1.0"
    headline_metric = "step_success_rate"
    description = ("Mind2Web offline protocol (top-k candidates, element + operation per step; element accuracy, "
                   "operation F1, step and task success) with CDWM's metrics (--agent react|cdwm)")
    mask = MIND2WEB_MASK
    action_pattern = ACTION_PATTERN
    world_model_help = MIND2WEB_WORLD_MODEL_HELP
    Options: ClassVar[type[SuiteOptions]] = Mind2WebOptions
    options: Mind2WebOptions
    transcript_type = Mind2WebTranscript
    scores_type = Mind2WebScores

    def __init__(self, options: Mind2WebOptions | None = None) -> None:
        super().__init__(options)
        o = self.options
        self.top_k = o.top_k or TOP_K[o.protocol]
        self._meters: dict[int, CallMeter] = {}
        if o.protocol == "mindact":  # the answers are letters; each question is one agent step
            self.mask = MINDACT_MASK
            self.config = replace(self.config, mask=MINDACT_MASK, action_pattern=choice_pattern(o.group_size),
                                  max_steps=o.max_steps * max(1, rounds_needed(self.top_k, o.group_size)))

    async def solve(self, sample: Sample[Task], ctx: SampleContext) -> Transcript:
        # Under mindact each question records the model calls and tokens spent on it: the
        # environment reads this sample's call records through a meter (one fresh Sample per
        # solve, so concurrent epochs of a task never share one).
        if self.options.protocol != "mindact":
            return await super().solve(sample, ctx)
        own = Sample(id=sample.id, data=sample.data)
        self._meters[id(own)] = CallMeter(ctx.calls)
        try:
            return await super().solve(own, ctx)
        finally:
            del self._meters[id(own)]

    def load_samples(self, corpus: str | None) -> list[Sample]:
        tasks, _ = load_tasks(corpus, self.options.split)
        return [Sample(id=t.annotation_id, data=t) for t in tasks]

    def corpus_identity(self, corpus: str | None) -> dict[str, str | None]:
        return load_tasks(corpus, self.options.split)[1]

    def intent_of(self, sample: Sample[Task]) -> str:
        return sample.data.confirmed_task

    def make_env(self, sample: Sample[Task], judge: Callable[[str], str] | None) -> Mind2WebEnvironment:
        o, meter = self.options, self._meters.get(id(sample))
        return Mind2WebEnvironment(top_k=self.top_k, world_model_help=self.world_model_help, protocol=o.protocol,
                                   group_size=o.group_size, order=o.group_order, meter=meter.take if meter else None)

    def scorers(self) -> dict[str, Scorer]:
        return {"mind2web": FunctionScorer("mind2web", self._score_task,
                                           description="Mind2Web's step metrics plus CDWM's metrics and composite reward")}

    async def _score_task(self, sample: Sample[Task], transcript: Mind2WebTranscript, ctx: SampleContext) -> Score:
        own = Mind2WebStepMetrics.model_validate(transcript.evaluation.model_dump(include=M2W_FIELDS))
        return Score(values=Mind2WebScores(**dict(self.episode_scores(transcript)), **dict(own)))

    def scores_on_failure(self, sample: Sample[Task]) -> dict[str, Any]:
        zeros = Mind2WebStepMetrics(**task_scores([], len(sample.data.actions)), split=sample.data.split)
        return Mind2WebScores(**dict(self.failed_scores()), **dict(zeros)).model_dump(mode="json")  # as recorded

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        scores = [self.read_scores(r.scores) for r in records]
        return mind2web_metrics(scores, seed=seed) | cdwm_metrics(scores, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        by_split: dict[str, list[list[float]]] = {}
        for s in (self.read_scores(r.scores) for r in records):
            by_split.setdefault(s.split, []).append([s.step_success_rate, 1.0])
        return {"split": {name: ratio_metric(np.asarray(rows, dtype=float), lambda c: c[0], lambda c: c[1], seed=seed)
                          for name, rows in sorted(by_split.items())}}


class CallMeter:
    """The model calls (and their tokens) one sample made since the last `take()`."""

    def __init__(self, calls: list[CallRecord]):
        self.calls, self.seen = calls, 0

    def take(self) -> tuple[int, int]:
        new = self.calls[self.seen:]
        self.seen += len(new)
        return len(new), sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in new)
