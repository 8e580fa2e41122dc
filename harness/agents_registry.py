"""The agent contract and registry (entry-point group `harness.agents`).

An agent acts in an environment behind the protocol of `harness.environment`. It is an object
(or a class with a no-argument constructor) with

    name: str                       e.g. "react"
    roles: tuple[str, ...]          the model roles it asks, e.g. ("assistant", "world_model")
    async run_episode(generate, env, intent, first_obs, config) -> EpisodeState

`generate(role, messages, config)` is the run's model access (`SampleContext.generate`: caching,
retries and accounting are the runner's), `env` an `AsyncEnvironment` (a `ThreadedEnv`), `config`
an `AgentConfig` -- which also carries what the environment family tells its agents about its
action space (`mask`, `action_help`, `world_model_help`). The episode's outcome is an
`EpisodeState` whose `steps` are `StepRecord`s.

The core knows no specific agent: packages register theirs in pyproject.toml, e.g.
    [project.entry-points."harness.agents"]
    react = "agents.react:ReactAgent"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Protocol, TypedDict, runtime_checkable

from pydantic import JsonValue

from harness.environment import ActionMask, AsyncEnvironment, Observation
from harness.errors import HarnessError
from harness.structured import Generate  # generate(role, messages, config) -> ModelOutput

GROUP = "harness.agents"
__all__ = ["GROUP", "Agent", "AgentConfig", "EpisodeState", "Generate", "StepRecord", "available_agents", "load_agent"]


@dataclass
class AgentConfig:
    """Knobs of the agents; the suite fills them from its options and its environment family.
    Defaults fit SmolLM2-135M's 8192-token context: an observation of 6000 characters is about
    1700 tokens."""

    max_steps: int = 10
    obs_chars: int = 6000
    history_steps: int = 5  # previous actions shown to the policy
    policy_role: str = "assistant"
    policy_max_tokens: int = 96
    parse_attempts: int = 2  # asks per step before the fallback action
    temperature: float = 0.0
    # Agents that plan with a world model (cdwm)
    world_model_role: str = "world_model"
    candidates: int = 3  # K
    wm_max_tokens: int = 160
    wm_attempts: int = 2
    wm_obs_chars: int = 3000
    confidence_threshold: float = 0.5
    cost_threshold: float = 0.0  # irreversible cost above which a candidate is pruned (unless the intent justifies it)
    risk_lambda: float = 1.0
    horizon: int = 2  # imagined steps per candidate: 1 = its own delta, 2 = plus the policy's next action there
    lookahead_discount: float = 0.5
    # What the environment family says about its action space (an observation's info may say it too)
    mask: ActionMask | None = None  # None = no mask (every dimension allowed)
    action_help: str | None = None  # how to write the actions; Observation.info["action_help"] wins
    # How the policy and the world model are asked for their replies (`harness.structured.Form`):
    # constrained, tools or free. `action_pattern`: the family's action syntax as a regex, for
    # constrained actions where an observation lists no admissible ones.
    action_format: str = "free"
    action_pattern: str | None = None
    world_model_help: str | None = None  # the family's naming of entities and relations, for the world model


@dataclass
class StepRecord:
    """One executed step, as the metrics and the transitions export read it. Its dicts hold JSON:
    a suite records the step as it is (`dataclasses.asdict`)."""

    index: int
    observation: str  # what the policy saw (truncated), the transition's input
    action: str
    action_class: str
    valid: bool
    delta: dict[str, JsonValue]  # ground truth from the environment (`Delta.model_dump()`)
    thought: str = ""
    invalid_outputs: int = 0  # policy replies without a usable action before this one
    fallback: bool = False
    abstained: bool = False
    prediction: dict[str, JsonValue] | None = None  # CDWM: the chosen candidate's (masked) predicted delta
    prediction_valid: bool | None = None
    prediction_source: str | None = None  # world_model | mask (the class can change nothing) | invalid
    candidates: list[dict[str, JsonValue]] = field(default_factory=list)  # each one's JSON dump
    info: dict[str, JsonValue] = field(default_factory=dict)  # the step's info, as JSON


class EpisodeState(TypedDict, total=False):
    """What an episode leaves behind (an agent's graph state may hold more)."""

    intent: str
    obs: Observation
    steps: list[StepRecord]
    done: bool
    ended_by: str  # done | step_limit | no_action | error | abstain
    errors: list[str]
    abstain_reason: str
    # Bad replies of the last turn when the episode ended on it without a step (no usable action and
    # no stop action in the world): no step record carries them, so they are counted here.
    unstepped_invalid: int


@runtime_checkable
class Agent(Protocol):
    name: str
    roles: tuple[str, ...]

    async def run_episode(self, generate: Generate, env: AsyncEnvironment, intent: str, first_obs: Observation,
                          config: AgentConfig) -> EpisodeState: ...


def available_agents() -> dict[str, EntryPoint]:
    """The installed agents by name, sorted."""
    return {ep.name: ep for ep in sorted(entry_points(group=GROUP), key=lambda ep: ep.name)}


def load_agent(name: str) -> Agent:
    """The installed agent `name` (a class is instantiated without arguments)."""
    eps = available_agents()
    if name not in eps:
        known = ", ".join(eps) or "none installed (run `pip install -e .`)"
        raise HarnessError(f"--agent {name}: unknown agent; choose one of {known}")
    try:
        obj = eps[name].load()
        agent = obj() if isinstance(obj, type) else obj
    except Exception as exc:  # one broken agent must not hide the others
        raise HarnessError(f"--agent {name}: {eps[name].value} failed to load: {type(exc).__name__}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise HarnessError(f"--agent {name}: {eps[name].value} is not an agent (it needs name, roles and "
                           "async run_episode(generate, env, intent, first_obs, config))")
    return agent
