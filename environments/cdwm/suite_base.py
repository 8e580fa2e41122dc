"""What every CDWM suite shares (web now; household and science later): choosing the agent
(`--agent react|cdwm`), the model roles it needs, running one task episode in an environment
behind the CDWM protocol, and scoring it with the CDWM metrics and composite reward.

A concrete suite says where its tasks come from (`load_samples`), how to build its environment
(`make_env`, called on the environment's own thread) and which action mask its action space has.
Its transcript and scores are `episode.py`'s `EpisodeTranscript` and `EpisodeScores` (the runner
validates each recorded transcript into them); a world that records more subclasses both and
names them (`CdwmSuite[Data, ItsTranscript, ItsScores]`, `transcript_type`, `scores_type`); a world that
makes its own tasks types them too (`EpisodeTask`: Atari, grid levels, ScienceWorld).
Its `description` is its own sentence followed by CDWM's departures from the paper (`departures.py`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Generic

from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypeVar  # TypeVar defaults (PEP 696) before Python 3.13

from environments.cdwm.departures import describe_departures
from environments.cdwm.episode import EpisodeScores, EpisodeTask, EpisodeTranscript
from environments.cdwm.metrics import cdwm_counts, cdwm_metrics, episode_scores, failure_scores
from environments.cdwm.reward import composite_reward
from agents.trained_world_model import TrainedWorldModel
from harness.agents_registry import AgentConfig, available_agents, load_agent
from harness.environment import ActionMask, Environment, ThreadedEnv
from harness.errors import HarnessError
from harness.providers.base import GenerateConfig
from harness.records import Metric, MetricSpec, SampleRecord
from harness.structured import Form
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, SuiteOptions, Transcript

JUDGE_CONFIG = GenerateConfig(temperature=0.0, max_tokens=16)  # the evaluators' judges answer in a word or two
JUDGE_TIMEOUT_S = 900.0


class CdwmOptions(SuiteOptions):
    """The agent and its budgets; every CDWM suite takes these (its own options extend them)."""

    agent: str = Field("react", description="the agent: react (the ReAct baseline) or cdwm (the CDWM agent)")
    action_format: Form = Field("constrained", description=(
        "how the agent's policy and world model are asked for their replies: constrained (decoding held to the "
        "admissible actions / the delta schema where the provider can), tools (native tool calls) or free (parsed "
        "from text). It changes what is measured, so it is part of the run's setup"))
    max_steps: int = Field(10, ge=1, description="agent steps per episode")
    obs_chars: int = Field(6000, ge=200, description="characters of an observation that reach a prompt")
    policy_max_tokens: int = Field(96, ge=1, description="max new tokens per policy reply")
    parse_attempts: int = Field(2, ge=1, description="policy asks per step until a usable action")
    candidates: int = Field(3, ge=1, description="CDWM: candidate actions per step")
    horizon: int = Field(2, ge=1, le=2, description="CDWM: lookahead depth (1 or 2)")
    confidence_threshold: float = Field(0.5, ge=0.0, le=1.0, description="CDWM: abstain under this confidence")
    cost_threshold: float = Field(0.0, description="CDWM: irreversible cost a candidate may carry unasked")
    risk_lambda: float = Field(1.0, ge=0.0, description="CDWM: weight of predicted risk against progress")
    wm_max_tokens: int = Field(160, ge=1, description="CDWM: max new tokens per world-model reply")
    wm_attempts: int = Field(2, ge=1, description="CDWM: world-model asks per candidate until valid JSON")
    parallel_envs: int = Field(1, ge=1, description="episodes (environments) running at once")
    trained_world_model: str = Field("", description=(
        "CDWM: a `harness cdwm train` adapter folder (OUT/adapter). The agent asks the world_model role -- which "
        "must serve it: --world-model local/smollm2-135m@DIR#all-token -- in the adapter's training prompt and "
        "decodes under its learned mask (in place of the prompted model and the hand-written table)"))

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, value: str) -> str:
        if value not in available_agents():
            raise ValueError(f"unknown agent; choose one of {', '.join(available_agents())}")
        return value


LOWER = "lower"
METRIC_SPECS = {
    "success_rate": MetricSpec(unit="fraction", description="episodes whose goal was met"),
    "irreversible_failure_rate": MetricSpec(direction=LOWER, unit="fraction",
                                            description="episodes with an irreversible action the task did not require"),
    "tokens_per_success": MetricSpec(direction=LOWER, unit="tokens", description="tokens spent per successful episode"),
    "delta_f1": MetricSpec(unit="fraction", description="F1 of the world model's predicted deltas against the world's"),
    "ece": MetricSpec(direction=LOWER, unit="fraction", description="calibration error of the predictions' confidence"),
    "abstention_rate": MetricSpec(direction=LOWER, unit="fraction", description="episodes the agent ended by abstaining"),
    "prediction_invalid_rate": MetricSpec(direction=LOWER, unit="fraction"),
    "action_invalid_rate": MetricSpec(direction=LOWER, unit="fraction"),
    "reward": MetricSpec(description="the paper's composite reward per episode"),
}


# The world name a trained adapter's action classes carry (`harness cdwm collect --worlds`), per suite.
TRAINED_WORLDS = {"cdwm-procgen": "minigrid", "cdwm-household": "household"}


def served_adapter(spec: str) -> Path | None:
    """The adapter folder a model spec serves (`provider/base@DIR#mode`), or None."""
    _, at, rest = spec.partition("@")
    return Path(rest.partition("#")[0]).expanduser().resolve() if at else None


# A sample's task: the world's own type where the suite makes its tasks, else the task file's JSON
# as read. A world that records more than the shared episode subclasses the transcript and the scores.
DataT = TypeVar("DataT", bound=BaseModel | dict[str, Any], default=dict[str, Any])
TranscriptT = TypeVar("TranscriptT", bound=EpisodeTranscript, default=EpisodeTranscript)
ScoresT = TypeVar("ScoresT", bound=EpisodeScores, default=EpisodeScores)
TaskT = TypeVar("TaskT", bound=EpisodeTask, default=EpisodeTask)


class CdwmSuite(Suite[DataT, TranscriptT, ScoresT], Generic[DataT, TranscriptT, ScoresT]):
    headline_metric = "success_rate"
    metric_specs = METRIC_SPECS
    transcript_type: ClassVar[type[Any] | None] = EpisodeTranscript
    scores_type: ClassVar[type[Any] | None] = EpisodeScores
    mask: ActionMask | None = None
    world_model_help: str | None = None  # how this world names entities and relations (world-model prompt)
    # The family's action syntax as a regex, for constrained decoding where an observation lists no
    # admissible actions (the web world); None: the action classes with bracketed arguments.
    action_pattern: str | None = None
    uses_judge = False  # True when the environment's evaluator may ask a judge model (role `judge`)
    Options: ClassVar[type[SuiteOptions]] = CdwmOptions
    options: CdwmOptions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every suite's own description ends with how CDWM here departs from the paper
        # (`departures.py`), so `harness describe` and `harness list` say it beside the suite.
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("description")
        if own and describe_departures() not in own:
            cls.description = own + describe_departures()

    def __init__(self, options: CdwmOptions | None = None) -> None:
        super().__init__(options)
        o = self.options
        self.agent = o.agent
        self.agent_impl = load_agent(o.agent)  # registered under the entry-point group `harness.agents`
        # Environments are heavy (a browser each): at most this many episodes run at once.
        self.parallel_envs = o.parallel_envs
        self._env_slots: asyncio.Semaphore | None = None
        self.config = AgentConfig(max_steps=o.max_steps, obs_chars=o.obs_chars, policy_max_tokens=o.policy_max_tokens,
                                  parse_attempts=o.parse_attempts, candidates=o.candidates, horizon=o.horizon,
                                  confidence_threshold=o.confidence_threshold, cost_threshold=o.cost_threshold,
                                  risk_lambda=o.risk_lambda, wm_max_tokens=o.wm_max_tokens, wm_attempts=o.wm_attempts,
                                  mask=self.mask, world_model_help=self.world_model_help,
                                  action_format=o.action_format, action_pattern=self.action_pattern)
        self.trained: TrainedWorldModel | None = None
        if o.trained_world_model:
            world = TRAINED_WORLDS.get(self.name)
            if o.agent != "cdwm" or world is None:
                raise HarnessError(
                    f"--suite-option trained_world_model={o.trained_world_model}: only the cdwm agent on "
                    f"{', '.join(TRAINED_WORLDS)} asks a trained world model (this run: agent {o.agent}, suite {self.name})")
            self.trained = TrainedWorldModel.load(o.trained_world_model, world)

    @property
    def solver_roles(self) -> tuple[str, ...]:
        # The agent's roles (the CDWM agent asks a world model: by default the model under test,
        # `--world-model` names another); the environment's evaluator may ask a judge, in the episode.
        return tuple(self.agent_impl.roles) + (("judge",) if self.uses_judge else ())

    @abstractmethod
    def make_env(self, sample: Sample, judge: Callable[[str], str] | None) -> Environment:
        """A fresh environment for one task (called on the environment's thread). `judge(prompt)`
        asks the run's judge model (blocking; for evaluators that need one), None without the role."""

    def _judge_for(self, ctx: SampleContext) -> Callable[[str], str] | None:
        """A blocking judge for code on the environment's thread: it hands the call to the run's
        event loop (so caching, retries and accounting are the runner's) and waits for it."""
        if "judge" not in ctx.models:
            return None
        loop = asyncio.get_running_loop()

        def judge(prompt: str) -> str:
            call = ctx.generate("judge", [{"role": "user", "content": prompt}], JUDGE_CONFIG)
            return asyncio.run_coroutine_threadsafe(call, loop).result(timeout=JUDGE_TIMEOUT_S).text

        return judge

    def task_of(self, sample: Sample[DataT]) -> dict[str, Any]:
        """The task as the environment is reset with it (the environment protocol's JSON)."""
        data = sample.data
        return data.model_dump() if isinstance(data, BaseModel) else data

    def intent_of(self, sample: Sample) -> str:
        return str(self.task_of(sample)["intent"])

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        if self._env_slots is None:
            self._env_slots = asyncio.Semaphore(self.parallel_envs)
        async with self._env_slots:
            return await self._run_episode(sample, ctx)

    async def _run_episode(self, sample: Sample, ctx: SampleContext) -> Transcript:
        judge = self._judge_for(ctx)
        env = await ThreadedEnv.create(lambda: self.make_env(sample, judge))
        errors: list[str] = []
        t0 = time.perf_counter()
        try:
            obs = await env.reset(self.task_of(sample))
            if self.trained is not None:
                state = await self._run_trained(ctx, env, self.intent_of(sample), obs)
            else:
                state = await self.agent_impl.run_episode(ctx.generate, env, self.intent_of(sample), obs, self.config)
            errors += state.get("errors", [])
            evaluation = await env.evaluate()
        finally:
            await env.close()
        # Tokens as generated, also for calls served from the cache (their recorded usage).
        tokens = sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in ctx.calls)
        output = EpisodeTranscript.model_validate({
            "task_id": self.task_of(sample).get("task_id", sample.id), "intent": self.intent_of(sample),
            "agent": self.agent, "ended_by": state.get("ended_by"), "abstain_reason": state.get("abstain_reason"),
            "unstepped_invalid": state.get("unstepped_invalid", 0),
            # The environment's evaluation and the agent's step records are JSON (the protocol's and
            # the agent contract's): validated here into the transcript's types.
            "evaluation": evaluation, "steps": [asdict(s) for s in state["steps"]], "tokens": tokens,
            "episode_s": round(time.perf_counter() - t0, 3), "mask": (f"learned:{self.trained.directory}" if self.trained is not None
                                                      else self.mask.name if self.mask else None),
        })
        return Transcript(output=output, errors=errors)

    async def _run_trained(self, ctx: SampleContext, env: ThreadedEnv, intent: str, obs: Any) -> Any:
        """The CDWM agent with the trained world model (refused, naming the option, when the run's
        world_model role does not serve that adapter: its answers would not be the adapter's)."""
        from agents.cdwm import CdwmAgent, trained_world_model

        assert self.trained is not None
        role = self.config.world_model_role
        served = served_adapter(ctx.models[role].name) if role in ctx.models else None
        if served != self.trained.directory.resolve():
            raise HarnessError(
                f"--suite-option trained_world_model={self.trained.directory}: the {role} role serves "
                f"{ctx.models[role].name if role in ctx.models else 'no model'}; run with --world-model "
                f"local/smollm2-135m@{self.trained.directory}#all-token")
        wm = trained_world_model(self.trained, ctx.generate, self.config)
        return await CdwmAgent().run_episode(ctx.generate, env, intent, obs, self.config, world_model=wm)

    def scorers(self) -> dict[str, Scorer[TranscriptT]]:
        return {"cdwm": FunctionScorer("cdwm", self._score_episode,
                                       description="CDWM's metrics over ground-truth deltas and the composite reward")}

    def episode_scores(self, transcript: EpisodeTranscript) -> EpisodeScores:
        """CDWM's scores of an episode and its composite reward (what every world's scorer stores)."""
        t = transcript
        scores = episode_scores(t.steps, t.evaluation, t.tokens, t.ended_by or "", t.unstepped_invalid)
        reward = composite_reward(scores)
        return scores.model_copy(update={"reward": reward.value, "reward_label": reward.label,
                                         "reward_components": reward.components})

    async def _score_episode(self, sample: Sample, transcript: TranscriptT, ctx: SampleContext) -> Score:
        return Score(values=self.episode_scores(transcript))

    def failed_scores(self) -> EpisodeScores:
        """The scores of an episode that crashed or timed out (a failure, reward 0)."""
        return failure_scores().model_copy(update={"reward": 0.0, "reward_label": "ERROR", "reward_components": {}})

    def scores_on_failure(self, sample: Sample) -> dict[str, Any]:
        return self.failed_scores().model_dump(mode="json")  # as recorded

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        return cdwm_metrics([self.read_scores(r.scores) for r in records], seed=seed)

    def counts(self, records: list[SampleRecord]) -> dict[str, int]:
        return cdwm_counts([self.read_scores(r.scores) for r in records])


class GeneratedCdwmSuite(CdwmSuite[TaskT, TranscriptT, ScoresT]):
    """A CDWM suite whose episodes come from its options, not a corpus (Atari games x seeds, grid
    levels x seeds): `episode_tasks()` lists them, and the run's corpus identity is their hash."""

    episode_source: ClassVar[str] = ""  # what generates them, for the corpus identity
    choose_episodes: ClassVar[str] = ""  # how a user picks episodes instead of --corpus

    @abstractmethod
    def episode_tasks(self) -> list[TaskT]: ...

    def load_samples(self, corpus: str | None) -> list[Sample]:
        if corpus:
            raise HarnessError(f"--corpus {corpus}: {self.name} has no corpus (its episodes are generated); "
                               f"{self.choose_episodes}")
        return [Sample(id=t.task_id, data=t) for t in self.episode_tasks()]

    def corpus_identity(self, corpus: str | None) -> dict[str, Any]:
        tasks = [t.model_dump() for t in self.episode_tasks()]
        digest = hashlib.sha256(json.dumps(tasks, sort_keys=True).encode()).hexdigest()
        return {"path": None, "source": self.episode_source, "tasks": len(tasks), "sha256": digest}
