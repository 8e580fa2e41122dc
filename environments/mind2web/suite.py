"""Suite `cdwm-mind2web`: Mind2Web's offline protocol (candidate ranking, then action prediction,
scored step by step with the gold history) run by the ReAct baseline or the CDWM agent
(`--agent react|cdwm`), scored with Mind2Web's metrics and CDWM's.

One sample = one task = one episode over its recorded steps. `--corpus` takes the release's JSON
files or data/ folder, or a Hugging Face dataset id (network permitting); without it, the
project's own corpus (`corpora/mind2web/`, snapshots of the local shop, travel and mail sites).
`--suite-option split=cross_task|cross_website|cross_domain|test|train|all`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field

from corpora.mind2web.loader import load_tasks
from environments.cdwm.metrics import cdwm_metrics
from environments.cdwm.suite_base import CdwmOptions, CdwmSuite
from environments.mind2web.env import ACTION_PATTERN, MIND2WEB_MASK, Mind2WebEnvironment
from environments.mind2web.metrics import mind2web_metrics, task_scores
from environments.web.suite import WEB_WORLD_MODEL_HELP
from harness.records import Metric, SampleRecord
from harness.stats import ratio_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, SuiteOptions

MIND2WEB_WORLD_MODEL_HELP = (
    "Only a click can change stored state: typing or selecting fills a form, and nothing is stored until a "
    "button submits it; following a link changes nothing. On the project's own sites: " + WEB_WORLD_MODEL_HELP
)
Split = Literal["test", "all", "train", "cross_task", "cross_website", "cross_domain"]  # corpora.mind2web.loader.SPLITS
M2W_KEYS = ("element_accuracy", "operation_f1", "step_success_rate", "task_success", "gold_steps",
            "answered_steps", "candidate_recall")


class Mind2WebOptions(CdwmOptions):
    split: Split = Field("test", description="which tasks (test = the three test splits, all = every split)")
    top_k: int = Field(10, ge=1, le=100, description="candidate elements shown per step (the ranker's top k)")
    max_steps: int = Field(30, ge=1, description="agent steps per episode (a task's recorded steps end it first)")


class CdwmMind2WebSuite(CdwmSuite):
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

    def load_samples(self, corpus: str | None) -> list[Sample]:
        tasks, _ = load_tasks(corpus, self.options.split)
        return [Sample(id=t["annotation_id"], data=t) for t in tasks]

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        return load_tasks(corpus, self.options.split)[1]

    def intent_of(self, sample: Sample) -> str:
        return str(sample.data["confirmed_task"])

    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Mind2WebEnvironment:
        return Mind2WebEnvironment(top_k=self.options.top_k, world_model_help=self.world_model_help)

    def scorers(self) -> dict[str, Scorer]:
        return {"mind2web": FunctionScorer("mind2web", self._score_task,
                                           description="Mind2Web's step metrics plus CDWM's metrics and composite reward")}

    async def _score_task(self, sample: Sample, transcript: dict[str, Any], ctx: SampleContext) -> Score:
        base = await self._score_episode(sample, transcript, ctx)
        evaluation = transcript["evaluation"]
        return Score(values=base.values | {k: evaluation[k] for k in M2W_KEYS} | {"split": evaluation.get("split", "")})

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        zeros = task_scores([], len(sample.data["actions"])) | {"candidate_recall": 0.0}
        return super().scores_on_failure(sample) | zeros | {"split": sample.data.get("split", "")}

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return mind2web_metrics(records, seed=seed) | cdwm_metrics(records, seed=seed)

    def breakdowns(self, records: list[SampleRecord], seed: int = 0) -> dict[str, dict[str, Metric]]:
        by_split: dict[str, list[list[float]]] = {}
        for r in records:
            by_split.setdefault(str(r.scores.get("split", "")), []).append([r.scores.get("step_success_rate", 0.0), 1.0])
        return {"split": {name: ratio_metric(rows, lambda c: c[0], lambda c: c[1], seed=seed)
                          for name, rows in sorted(by_split.items())}}
