"""Suite `cdwm-planner`: the planner check (planner_check.py) as ordinary runs, so that a CDWM
claim's arms are runs of one suite (`harness.claims.runs`; claims.py).

A sample is one episode, named `SETTING/seedNNN` as the claims framework reads it: a setting is a
split of the collector (`validation`: the training task types on odd task indices, never trained
on; `heldout_task_type`; `heldout_rule`: a world's rule perturbation; `heldout_website`: the web
world's held-out site), and episode i of a setting plays world `worlds[i % len(worlds)]` among those
that offer it. The option `world_model` is the arm: `none` (ReAct on the same proposer), `oracle`
(the ledger), `prompted` (agents/world_model.py on `prompted_model`), `trained` (the adapter in
`trained_adapter`), `value` (the value-model baseline in `value_adapter`, value_model.py), `generative` (the generative
baseline in `generative_adapter`, generative_model.py: MiniGrid and household; web has no observation reader). The proposer is the noisy expert, seeded by the episode, so every arm plays the
same episodes with the same random numbers. The suite serves its own world model (it has no roles):
the arm is an option, not a model, and a claim check's runs differ only in it.

Scores per episode: success, irreversible_failure (an unrequired irreversible change happened),
steps, wm_calls, world_model_tokens (prompt + completion of the world model's calls),
proposer_tokens (the registered `tokens` protocol's charge for the proposer: the prompt the embedded
proposer would be sent per step, and a nominal reply; proposer_tokens.py) and, where the episode
succeeded, tokens_per_success = proposer_tokens + world_model_tokens. Records written before session
28 lack proposer_tokens (read as None) and their tokens_per_success is the world model's alone:
claims.py refuses to judge `cdwm.tokens` on them.

Worlds: planner_worlds.PLANNER_WORLDS (minigrid, household, web; the web world since session 29,
through a replay twin of its server and browser). Household offers no `heldout_rule` (its rules are ALFWorld's PDDL domain, shared by
every task) and no `heldout_website`; asking only worlds that lack a setting is an error naming it.

May import: `harness`, `agents`, `environments.cdwm`.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, Field, JsonValue

from agents.trained_world_model import TrainedWorldModel
from environments.cdwm.collect import WORLDS, load_world, split_types
from environments.cdwm.generative_model import GenerativeModel
from environments.cdwm.planner_check import ArmResult, CheckConfig, model_generate, play
from environments.cdwm.planner_worlds import refuse_world
from environments.cdwm.value_model import ValueModel
from harness.claims.model import cell_id
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.records import Metric, MetricSpec, SampleRecord
from harness.stats import mean_metric
from harness.suite import FunctionScorer, Sample, SampleContext, Score, Scorer, Suite, SuiteOptions, Transcript

Arm = Literal["none", "oracle", "prompted", "trained", "value", "generative"]
ADAPTER_ARMS = ("trained", "value", "generative")  # served as local/smollm2-135m@DIR#all-token from the option ARM_adapter
SETTINGS = ("validation", "heldout_task_type", "heldout_rule", "heldout_website")
WEB = "web"  # the world whose task types are websites


class PlannerOptions(SuiteOptions):
    world_model: Arm = Field("none", description="the arm: none (ReAct), oracle (the ledger), prompted, trained, "
                             "value, generative")
    trained_adapter: str = Field("", description="DIR of a `harness cdwm train` adapter (arm trained)")
    value_adapter: str = Field("", description="DIR of a `harness cdwm train --target value` adapter (arm value)")
    generative_adapter: str = Field("", description="DIR of a `harness cdwm train --target generative` adapter "
                                    "(arm generative)")
    prompted_model: str = Field("local/smollm2-135m", description="the model spec the prompted arm asks")
    worlds: str = Field("minigrid", description="comma list of minigrid, household, web; episode i "
                        "plays worlds[i % n] of those offering its setting (household offers no heldout_rule)")
    settings: str = Field("validation", description="comma list of " + ", ".join(SETTINGS))
    seeds: int = Field(5, ge=1, description="episodes per setting")
    first_seed: int = Field(0, ge=0, description="the first episode index (a claim check's later looks)")
    seed: int = Field(0, ge=0, description="the check's seed: which tasks the episodes are")
    off_plan: float = Field(0.2, ge=0.0, le=1.0)
    irreversible: float = Field(0.3, ge=0.0, le=1.0)
    candidates: int = Field(2, ge=1)
    max_steps: int = Field(20, ge=1)
    confidence_threshold: float = Field(0.5, ge=0.0, le=1.0)
    horizon: int = Field(2, ge=0)


class PlannerEpisode(BaseModel):
    setting: str
    world: str
    spec: dict[str, JsonValue]  # the world's episode spec (`episode_spec`)


class PlannerTranscript(BaseModel):
    success: bool
    unrequired_irreversible: list[str]
    steps: int
    wm_calls: int
    world_model_tokens: int
    abstained: bool
    proposals: list[str]
    proposer_tokens: int | None = None  # None: written before session 28, when the charge was not computed


class PlannerScores(BaseModel):
    success: float
    irreversible_failure: float
    tokens_per_success: float | None
    steps: float
    wm_calls: float
    world_model_tokens: float
    proposer_tokens: float | None = None  # None: written before session 28 (tokens_per_success = world model's only)


def _names(option: str, raw: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(x.strip() for x in raw.split(",") if x.strip()))
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise HarnessError(f"--suite-option {option}={raw!r}: {', '.join(bad) or '(none)'} is not one of "
                           f"{', '.join(allowed)}")
    return names


def episode_spec(world_name: str, setting: str, seed: int, episode: int) -> dict[str, JsonValue]:
    """The episode's task: the world's split `setting` (heldout_website: the web world's held-out
    task type), drawn from the check's seed and the episode's index alone."""
    world = load_world(world_name)
    split = "heldout_task_type" if setting == "heldout_website" else setting
    pairs = split_types(world, split, tuple(world.default_heldout))
    if not pairs:
        raise HarnessError(f"world {world_name} offers no {setting} episodes; leave it out of --suite-option worlds")
    rng = random.Random(f"cdwm-planner:{seed}:{setting}:{episode}")
    task_type, perturbation = rng.choice(pairs)
    index = 2 * rng.randrange(1 << 29) + 1  # odd: the collector's validation indices, never trained on
    return dict(world.spec(task_type, index, seed, perturbation))


def worlds_for(setting: str, worlds: tuple[str, ...]) -> list[str]:
    """The worlds that offer a setting (the web world's held-out task type is heldout_website)."""
    if setting == "heldout_website":
        return [w for w in worlds if w == WEB]
    if setting == "heldout_task_type":
        worlds = tuple(w for w in worlds if w != WEB)
    return [w for w in worlds if split_types(load_world(w), setting, tuple(load_world(w).default_heldout))]


class CdwmPlannerSuite(Suite[PlannerEpisode, PlannerTranscript, PlannerScores]):
    name: ClassVar[str] = "cdwm-planner"
    version: ClassVar[str] = "2"  # 2: tokens_per_success charges the proposer (session 28): runs of 1 are not reused
    headline_metric: ClassVar[str] = "success"
    description: ClassVar[str] = ("The CDWM planner with a noisy-expert proposer, one arm (world model) per run; "
                                  "samples are SETTING/seedNNN episodes (environments/cdwm/planner_suite.py)")
    Options: ClassVar[type[SuiteOptions]] = PlannerOptions
    transcript_type: ClassVar[type[Any] | None] = PlannerTranscript
    scores_type: ClassVar[type[Any] | None] = PlannerScores
    label_options: ClassVar[tuple[str, ...]] = ("world_model",)
    metric_specs: ClassVar[dict[str, MetricSpec]] = {
        "success": MetricSpec(unit="fraction", description="episodes the world's evaluation calls won"),
        "irreversible_failure": MetricSpec(direction="lower", unit="fraction",
                                           description="episodes with an irreversible change the task did not require"),
        "tokens_per_success": MetricSpec(direction="lower", unit="tokens",
                                         description="proposer charge + world-model tokens of a successful episode"),
        "world_model_tokens": MetricSpec(direction="lower", unit="tokens"),
        "proposer_tokens": MetricSpec(direction="lower", unit="tokens", description="the prompt (and a nominal "
                                      "reply) the embedded proposer would be sent, per step"),
        "steps": MetricSpec(direction="lower"),
        "wm_calls": MetricSpec(direction="lower"),
    }

    def __init__(self, options: SuiteOptions | None = None) -> None:
        super().__init__(options)
        self._generate: Any = None  # the arm's model, served on first use
        self._readers: dict[str, TrainedWorldModel | ValueModel | GenerativeModel] = {}  # world -> the adapter's reader

    @property
    def opts(self) -> PlannerOptions:
        assert isinstance(self.options, PlannerOptions)
        return self.options

    @property
    def solver_roles(self) -> tuple[str, ...]:
        return ()  # the arm serves its own world model (an option), so a check's runs differ only in it

    def load_samples(self, corpus: str | None) -> list[Sample]:
        o = self.opts
        worlds = _names("worlds", o.worlds, tuple(WORLDS))
        for w in worlds:
            refuse_world(w, "--suite-option worlds")
        samples: list[Sample] = []
        for setting in _names("settings", o.settings, SETTINGS):
            offering = worlds_for(setting, worlds)
            if not offering:
                raise HarnessError(f"--suite-option settings: no world of {','.join(worlds)} offers {setting}"
                                   + ("; household has no rule perturbation (its rules are ALFWorld's PDDL domain): "
                                      "add minigrid or web to --suite-option worlds" if setting == "heldout_rule" else ""))
            for e in range(o.first_seed, o.first_seed + o.seeds):
                world = offering[e % len(offering)]
                samples.append(Sample(cell_id(setting, e), PlannerEpisode(setting=setting, world=world,
                                                                      spec=episode_spec(world, setting, o.seed, e))))
        return samples

    def check_ready(self) -> None:
        arm = self.opts.world_model
        if arm in ADAPTER_ARMS and not getattr(self.opts, f"{arm}_adapter"):
            raise HarnessError(f"--suite-option world_model={arm} needs --suite-option {arm}_adapter=DIR "
                               f"(OUT/adapter of `harness cdwm train{'' if arm == 'trained' else ' --target ' + arm}`)")

    def _serve(self, world: str) -> tuple[Any, TrainedWorldModel | ValueModel | GenerativeModel | None]:
        """(generate, the adapter's reader for this world): the model is loaded once per run, the
        reader once per world (an adapter is refused for a world it was not trained on)."""
        o = self.opts
        if o.world_model not in ADAPTER_ARMS and o.world_model != "prompted":
            return None, None
        directory = getattr(o, f"{o.world_model}_adapter", "")
        if self._generate is None:
            spec = f"local/smollm2-135m@{directory}#all-token" if directory else o.prompted_model
            self._generate = model_generate(spec)[0]
        if o.world_model in ADAPTER_ARMS and world not in self._readers:
            arm = o.world_model
            self._readers[world] = (TrainedWorldModel.load(directory, world) if arm == "trained"
                                    else ValueModel.load(directory, world) if arm == "value"
                                    else GenerativeModel.load(directory, world))
        return self._generate, self._readers.get(world)

    async def solve(self, sample: Sample, ctx: SampleContext) -> Transcript:
        o, data = self.opts, sample.data
        assert isinstance(data, PlannerEpisode)
        inner, trained = self._serve(data.world)

        async def generate(role: str, messages: list[ChatMessage], config: Any) -> Any:
            if inner is None:
                raise HarnessError(f"arm {o.world_model}: nothing may ask a model here (role {role!r})")
            return await inner(role, messages, config)

        cfg = CheckConfig(world=data.world, seed=o.seed, off_plan=o.off_plan, irreversible=o.irreversible,
                          candidates=o.candidates, max_steps=o.max_steps,
                          confidence_threshold=o.confidence_threshold, horizon=o.horizon)
        result = ArmResult(o.world_model)
        await play(cfg, o.world_model, data.spec, generate, trained, result)
        episode = result.per_episode[0]
        return Transcript(PlannerTranscript(
            success=bool(episode["success"]), unrequired_irreversible=list(episode["unrequired_irreversible"]),
            steps=int(episode["steps"]), wm_calls=result.wm_calls, world_model_tokens=episode["world_model_tokens"],
            abstained=bool(result.abstained), proposals=list(episode["proposals"]),
            proposer_tokens=episode["proposer_tokens"]))

    def scorers(self) -> dict[str, Scorer[PlannerTranscript]]:
        return {"episode": FunctionScorer("episode", self._score, description="success, irreversible failure, "
                                          "tokens per success, steps, world-model calls")}

    async def _score(self, sample: Sample[Any], t: PlannerTranscript, ctx: SampleContext) -> Score:
        # The registered `tokens` protocol: the proposer's charge + the world model's tokens. A
        # transcript from before the charge existed keeps its world-model-only count, marked by
        # proposer_tokens None (claims.py refuses to judge cdwm.tokens on it).
        tokens = t.world_model_tokens + (t.proposer_tokens or 0)
        return Score(PlannerScores(
            success=float(t.success), irreversible_failure=float(bool(t.unrequired_irreversible)),
            tokens_per_success=float(tokens) if t.success else None, steps=float(t.steps),
            wm_calls=float(t.wm_calls), world_model_tokens=float(t.world_model_tokens),
            proposer_tokens=None if t.proposer_tokens is None else float(t.proposer_tokens)))

    def metrics(self, records: list[SampleRecord], seed: int = 0) -> dict[str, Metric]:
        scored = [self.read_scores(r.scores) for r in records if r.status == "ok" and r.scores]
        out: dict[str, Metric] = {}
        for name in PlannerScores.model_fields:
            values = [v for s in scored if (v := getattr(s, name)) is not None]
            out[name] = mean_metric(np.array(values, dtype=float))
        return out
