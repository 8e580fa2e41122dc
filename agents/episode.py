"""What the ReAct and CDWM agents share: the environment seen through an async, thread-bound
wrapper, the policy prompt and its bounded re-asking, and the per-step record.

Both agents see only the CDWM protocol (`environments.cdwm.env`): an observation's text, its
action classes and (where the world lists them) admissible actions, and after each step the
ground-truth delta -- which they record for the metrics but never put into a prompt.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from agents.action_parsing import action_help, parse_actions, truncate_observation
from environments.cdwm.env import STOP, CdwmEnvironment, Observation, StepResult
from harness.providers.base import GenerateConfig, ModelError, ModelOutput

Generate = Callable[[str, list[dict[str, str]], GenerateConfig], Awaitable[ModelOutput]]
# A reply that runs on into an invented next turn is cut there: small models echo the prompt's
# tail ("Your next action?") until max_tokens, which costs decode time and no information.
POLICY_STOPS = ["Your next action?", "\nObservation:", "\nTask:"]
# How the web world's actions are written (an environment with help text of its own says it there).
WEB_RULES = (f"Use the ids shown in [brackets] in the observation. When the task is done, or to answer a "
             f"question, use {STOP} [answer].\n")
FALLBACK_ACTION = f"{STOP} [N/A]"  # what an agent sends when the policy never names a valid action
ABSTAIN_ACTION = f"{STOP} [ABSTAIN]"


class ThreadedEnv:
    """A CDWM environment driven from asyncio. Every call runs on one dedicated thread: the web
    world's browser (Playwright's sync API) is bound to the thread that started it and refuses to
    run inside an event loop, and a slow step must not block the other samples' model calls."""

    def __init__(self, env: CdwmEnvironment | None = None):
        self.env = env
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cdwm-env")

    @classmethod
    async def create(cls, factory: Callable[[], CdwmEnvironment]) -> "ThreadedEnv":
        """Build the environment on its own thread (a browser must start on the thread that drives it)."""
        self = cls()
        try:
            self.env = await self.call(factory)
        except BaseException:
            self._pool.shutdown(wait=False)
            self._pool = None
            raise
        return self

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def reset(self, task: dict[str, Any]) -> Observation:
        return await self.call(self.env.reset, task)

    async def step(self, action: str) -> StepResult:
        return await self.call(self.env.step, action)

    async def action_class(self, action: str) -> str:
        return await self.call(self.env.action_class, action)

    async def evaluate(self) -> dict[str, Any]:
        return await self.call(self.env.evaluate)

    async def close(self) -> None:
        """Close the environment on its own thread, then the thread; safe to call twice."""
        if self._pool is None:
            return
        try:
            if self.env is not None:
                await self.call(self.env.close)
        finally:
            self._pool.shutdown(wait=False)
            self._pool = None


@dataclass
class AgentConfig:
    """Knobs of both agents; the suite fills them from its options. Defaults fit SmolLM2-135M's
    8192-token context: an observation of 6000 characters is about 1700 tokens."""

    max_steps: int = 10
    obs_chars: int = 6000
    history_steps: int = 5  # previous actions shown to the policy
    policy_role: str = "assistant"
    policy_max_tokens: int = 96
    parse_attempts: int = 2  # asks per step before the fallback action
    temperature: float = 0.0
    # CDWM only
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
    mask: Any = None  # environments.cdwm.mask.ActionMask; None = no mask (every dimension allowed)
    world_model_help: str | None = None  # the environment's naming of entities and relations, for the world model


@dataclass
class StepRecord:
    """One executed step, as the metrics and the transitions export read it."""

    index: int
    observation: str  # what the policy saw (truncated), the transition's input
    action: str
    action_class: str
    valid: bool
    delta: dict[str, Any]  # ground truth from the environment
    thought: str = ""
    invalid_outputs: int = 0  # policy replies without a usable action before this one
    fallback: bool = False
    abstained: bool = False
    prediction: dict[str, Any] | None = None  # CDWM: the chosen candidate's (masked) predicted delta
    prediction_valid: bool | None = None
    prediction_source: str | None = None  # world_model | mask (the class can change nothing) | invalid
    candidates: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def history_text(steps: list[StepRecord], keep: int) -> str:
    if not steps:
        return "none"
    # A failure goes on its own line: a small model that echoes a history line as its next action
    # must not carry the error text into the action string.
    lines = []
    for s in steps[-keep:]:
        lines.append(f"{s.index + 1}. {s.action}")
        if not s.valid:
            lines.append(f"   result: failed, {str(s.info.get('error', 'invalid'))[:80]}")
    return "\n".join(lines)


def policy_messages(intent: str, obs: Observation, steps: list[StepRecord], cfg: AgentConfig,
                    candidates: int = 1) -> list[dict[str, str]]:
    if candidates == 1:
        form = "Reply with one short thought, then exactly one action:\nThought: <why>\nAction: <action>"
    else:
        form = (f"Reply with one short thought, then {candidates} different candidate actions, best first, "
                "one per line:\nThought: <why>\n" + "\n".join(f"{i}. <action>" for i in range(1, candidates + 1)))
    system = (
        "You are an agent completing a task step by step. You see the task, your previous actions and the "
        "current observation.\nActions you can use:\n" + action_help(obs.action_classes, obs.info)
        + "\n" + (WEB_RULES if not isinstance(obs.info.get("action_help"), str) else "") + form
    )
    if obs.admissible:
        system += "\nAdmissible actions now: " + "; ".join(obs.admissible[:60])
    user = (f"Task: {intent}\nPrevious actions:\n{history_text(steps, cfg.history_steps)}\n"
            f"Observation:\n{truncate_observation(obs.text, cfg.obs_chars)}\n\nYour next action?")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def thought_of(text: str) -> str:
    for line in text.splitlines():
        if line.strip().lower().startswith("thought"):
            return line.split(":", 1)[-1].strip()[:300]
    return ""


@dataclass
class PolicyReply:
    actions: list[str]
    thought: str
    invalid_outputs: int  # replies that named no usable action
    error: str | None = None  # a model call that failed for good


async def ask_policy(generate: Generate, intent: str, obs: Observation, steps: list[StepRecord],
                     cfg: AgentConfig, candidates: int = 1) -> PolicyReply:
    """Ask the policy for up to `candidates` actions; a reply naming none is answered with a
    correction (a different prompt, so a cached or greedy model can answer differently), at most
    `parse_attempts` asks in all."""
    messages = policy_messages(intent, obs, steps, cfg, candidates)
    config = GenerateConfig(temperature=cfg.temperature, max_tokens=cfg.policy_max_tokens, stop=POLICY_STOPS)
    invalid = 0
    for _ in range(max(1, cfg.parse_attempts)):
        try:
            out = await generate(cfg.policy_role, messages, config)
        except ModelError as exc:
            return PolicyReply([], "", invalid, error=f"{cfg.policy_role}: {exc}")
        actions = parse_actions(out.text, obs.action_classes, obs.admissible, limit=candidates)
        if actions:
            return PolicyReply(actions, thought_of(out.text), invalid)
        invalid += 1
        if obs.admissible:
            example = obs.admissible[0]
        else:
            example = action_help(obs.action_classes, None).splitlines()[0].strip() if obs.action_classes else STOP
        messages = messages + [
            {"role": "assistant", "content": out.text[:500]},
            {"role": "user", "content": f"That reply names no valid action. Write a line `Action: <action>` using one of "
                                        f"the actions listed, e.g. `Action: {example}`."},
        ]
    return PolicyReply([], "", invalid)


def fallback_action(obs: Observation) -> str | None:
    """`stop [N/A]` where the environment has a stop action; otherwise the episode just ends."""
    return FALLBACK_ACTION if STOP in {c.lower() for c in obs.action_classes} else None


async def execute(env: ThreadedEnv, action: str, obs_text: str, index: int, **fields: Any) -> tuple[StepResult, StepRecord]:
    result = await env.step(action)
    info = _jsonable(result.info) | fields.pop("info", {})
    record = StepRecord(index=index, observation=obs_text, action=action, action_class=await env.action_class(action),
                        valid=result.valid, delta=result.delta.model_dump(), info=info, **fields)
    return result, record


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """Step info goes into the sample record: keep what JSON can hold, stringify the rest."""
    out = {}
    for k, v in (info or {}).items():
        out[str(k)] = v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
    return out
