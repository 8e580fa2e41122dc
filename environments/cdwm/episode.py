"""A CDWM episode as types: the transcript every CDWM suite records and the scores its scorer
writes. `CdwmSuite` declares them (`transcript_type`, `scores_type`), so the runner validates each
transcript once -- just solved or read back for `harness score` -- and the scorer, the reward and
the metrics get these objects. A world that records more subclasses them (Atari's pictures and
game score, Mind2Web's step metrics) and declares its own.

- `EpisodeTranscript`: the task, how the episode ended, each executed `Step` (what the policy saw,
  the action, the environment's true delta, the world model's chosen prediction and the planner's
  `Candidate`s, from `agents.cdwm`), the environment's `Evaluation`, and the tokens spent.
- `EpisodeScores`: what `metrics.episode_scores` derives from it, plus the composite reward.

A field an older record may lack has the default the metrics read it as, so runs written before
these types still load and re-score to the same numbers. Dicts stay where the data is the
environment's own JSON: a step's `info`, a task's requirement predicates, and whatever else an
evaluator reports (kept as extra fields of `Evaluation`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agents.cdwm import AsSet, Candidate
from environments.cdwm.deltas import Delta


class EpisodeTask(BaseModel):
    """A task a CDWM suite makes itself (generated episodes, ScienceWorld's variations), its
    sample's data; the environment is reset with its JSON dump. A world's own fields extend it.
    Suites that read their tasks from files (web, household, Mind2Web) keep them as read."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    intent: str


class Step(BaseModel):
    """One executed step (the JSON of `harness.agents_registry.StepRecord`, typed)."""

    index: int
    observation: str  # what the policy saw (truncated)
    action: str
    action_class: str = ""
    valid: bool = True
    delta: Delta  # ground truth from the environment
    thought: str = ""
    invalid_outputs: int = 0  # policy replies without a usable action before this one
    fallback: bool = False
    abstained: bool = False
    prediction: Delta | None = None  # CDWM: the chosen candidate's (masked) predicted delta
    prediction_valid: bool | None = None
    prediction_source: str | None = None  # world_model | mask | invalid
    candidates: list[Candidate] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)  # the environment's step info, as JSON


class Evaluation(AsSet):
    """The environment's verdict on the episode: what the metrics read, typed; an evaluator's
    other findings are kept as they came (extra fields), and a field it did not report stays
    out of the record."""

    model_config = ConfigDict(extra="allow")

    success: bool | float | None = None
    # The task's irreversible changes that are allowed: predicates (see `metrics.delta_matches`) or names.
    required_irreversible: list[dict[str, JsonValue] | str] | None = None
    # An environment's own, fuller check of the changes it did not require (it can match site and path).
    unrequired_irreversible: list[Any] | None = None
    unjustified_irreversible: list[Any] | None = None

    def own_unrequired(self) -> list[Any] | None:
        """The environment's own list of unrequired irreversible changes, None when it keeps none."""
        return self.unrequired_irreversible if self.unrequired_irreversible is not None else self.unjustified_irreversible


class EpisodeTranscript(BaseModel):
    """What a CDWM suite's solver records for one task."""

    task_id: str | int
    intent: str = ""
    agent: str = ""
    ended_by: str | None = None  # done | step_limit | no_action | error | abstain
    abstain_reason: str | None = None
    unstepped_invalid: int = 0  # bad policy replies of a last turn that took no step
    evaluation: Evaluation
    steps: list[Step]
    tokens: int  # as generated, also for calls served from the cache
    episode_s: float = 0.0
    mask: str | None = None  # the action mask's name, or `learned:DIR`


class PredictionRow(BaseModel):
    """One executed step whose delta the world model predicted: its fact F1 against the truth,
    its confidence, and whether it counts as correct (exact, or F1 >= 0.5)."""

    f1: float
    confidence: float
    correct: float


class EpisodeScores(BaseModel):
    """The per-task scores every CDWM suite stores (`metrics.episode_scores`, then the reward)."""

    success: float = 0.0
    unrequired_irreversible: list[str] = Field(default_factory=list)
    tokens: int = 0
    predictions: list[PredictionRow] = Field(default_factory=list)
    abstained: bool = False
    steps: int = 0
    invalid_steps: int = 0
    policy_replies: int = 0
    policy_invalid: int = 0
    wm_replies: int = 0
    wm_invalid: int = 0
    reward: float = 0.0
    reward_label: str = ""
    reward_components: dict[str, float] = Field(default_factory=dict)
