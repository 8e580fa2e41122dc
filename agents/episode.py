"""What the ReAct and CDWM agents share: the policy prompt and its bounded re-asking, executing
one step (`take_step`), running a compiled graph to the end of an episode (`run_episode`), and
the names of the agent contract (`harness.agents_registry`: `AgentConfig`, `StepRecord`,
`EpisodeState`) and of the environment protocol (`harness.environment`: `ThreadedEnv`).

Both agents see only the protocol: an observation's text, its action classes and (where the
world lists them) admissible actions, the action help the environment gives (its observation's
`info["action_help"]` or the config's `action_help`), and after each step the ground-truth delta
-- which they record for the metrics but never put into a prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, cast

from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field, JsonValue

from agents.action_parsing import action_help, parse_actions, truncate_observation
from harness.agents_registry import AgentConfig, EpisodeState, Generate, StepRecord
from harness.environment import STOP, AsyncEnvironment, Observation, StepResult, ThreadedEnv
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig
from harness.structured import FORMS, Form, ReplyProblem, ask_structured, parse_json_reply

__all__ = ["ABSTAIN_ACTION", "FALLBACK_ACTION", "POLICY_STOPS", "AgentConfig", "AgentState", "EpisodeState",
           "Generate", "Graph", "PolicyReply", "StepRecord", "ThreadedEnv", "ask_policy", "execute", "fallback_action",
           "policy_messages", "recursion_limit", "run_episode", "take_step"]

# A reply that runs on into an invented next turn is cut there: small models echo the prompt's
# tail ("Your next action?") until max_tokens, which costs decode time and no information.
POLICY_STOPS = ["Your next action?", "\nObservation:", "\nTask:"]
FALLBACK_ACTION = f"{STOP} [N/A]"  # what an agent sends when the policy never names a valid action
ABSTAIN_ACTION = f"{STOP} [ABSTAIN]"


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
                    candidates: int = 1) -> list[ChatMessage]:
    if cfg.action_format != "free":
        n = "exactly one action" if candidates == 1 else f"up to {candidates} different candidate actions, best first"
        form = (f'Reply with one JSON object: {{"thought": "<one short sentence>", "actions": [...]}} holding {n}'
                + (", as the arguments of the act tool." if cfg.action_format == "tools" else "."))
    elif candidates == 1:
        form = "Reply with one short thought, then exactly one action:\nThought: <why>\nAction: <action>"
    else:
        form = (f"Reply with one short thought, then {candidates} different candidate actions, best first, "
                "one per line:\nThought: <why>\n" + "\n".join(f"{i}. <action>" for i in range(1, candidates + 1)))
    system = (
        "You are an agent completing a task step by step. You see the task, your previous actions and the "
        "current observation.\nActions you can use:\n" + action_help(obs.action_classes, obs.info, cfg.action_help)
        + "\n" + form
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


class PolicyActions(BaseModel):
    """A policy reply read as data: the actions it names (at least one) and its thought."""

    actions: list[str] = Field(min_length=1)
    thought: str = ""


def action_schema(obs: Observation, cfg: AgentConfig) -> dict[str, JsonValue]:
    """One action's JSON schema: one of the admissible actions where the world lists them, else the
    family's action syntax (`cfg.action_pattern`), else an action class with bracketed arguments."""
    if obs.admissible:
        return {"enum": list(dict.fromkeys(obs.admissible))}
    if cfg.action_pattern:
        return {"type": "string", "pattern": cfg.action_pattern}
    classes = "|".join(re.escape(c) for c in sorted(obs.action_classes, key=len, reverse=True))
    return {"type": "string", "pattern": rf"^({classes})( \[[^\[\]\n]{{0,100}}\])*$"}


def policy_schema(obs: Observation, cfg: AgentConfig, candidates: int) -> dict[str, JsonValue]:
    """What a constrained policy reply is held to: a short thought, then 1..candidates actions."""
    return {"type": "object", "required": ["thought", "actions"], "additionalProperties": False,
            "properties": {"thought": {"type": "string", "maxLength": 100},
                           "actions": {"type": "array", "items": action_schema(obs, cfg),
                                       "minItems": 1, "maxItems": candidates}}}


async def ask_policy(generate: Generate, intent: str, obs: Observation, steps: list[StepRecord],
                     cfg: AgentConfig, candidates: int = 1) -> PolicyReply:
    """Ask the policy for up to `candidates` actions; a reply naming none is answered with a
    correction (a different prompt, so a cached or greedy model can answer differently), at most
    `parse_attempts` asks in all (`harness.structured.ask_structured`)."""
    messages = policy_messages(intent, obs, steps, cfg, candidates)
    config = GenerateConfig(temperature=cfg.temperature, max_tokens=cfg.policy_max_tokens, stop=POLICY_STOPS)
    example = reask_example(obs, cfg)

    def parse(text: str) -> PolicyActions:
        named, thought = text, thought_of(text)
        if cfg.action_format != "free":  # a JSON object; each action still checked like a free one
            try:
                reply = parse_json_reply(text, PolicyActions)
                named, thought = "\n".join(reply.actions), reply.thought[:300]
            except ReplyProblem:
                pass  # a provider that ignored the form: the reply is read as free text
        actions = parse_actions(named, obs.action_classes, obs.admissible, limit=candidates)
        if not actions:
            raise ReplyProblem("invalid", "names no valid action")
        return PolicyActions(actions=actions, thought=thought)

    def reask(text: str, problem: ReplyProblem) -> list[ChatMessage]:
        how = (f'Reply with {{"thought": "...", "actions": ["{example}"]}} using the actions listed'
               if cfg.action_format != "free" else
               f"Write a line `Action: <action>` using one of the actions listed, e.g. `Action: {example}`")
        return [{"role": "assistant", "content": text[:500]},
                {"role": "user", "content": f"That reply names no valid action ({problem}). {how}."}]

    reply = await ask_structured(generate, cfg.policy_role, messages, PolicyActions, config, cfg.parse_attempts,
                                 parse=parse, reask=reask, form=policy_form(cfg),
                                 schema=policy_schema(obs, cfg, candidates), tool="act")
    if reply.error is not None:
        return PolicyReply([], "", reply.invalid, error=f"{cfg.policy_role}: {reply.error}")
    if reply.value is None:
        return PolicyReply([], "", reply.invalid)
    return PolicyReply(reply.value.actions, reply.value.thought, reply.invalid)


def policy_form(cfg: AgentConfig) -> Form:
    if cfg.action_format not in FORMS:
        raise ValueError(f"action_format {cfg.action_format!r}: use one of {', '.join(FORMS)}")
    return cfg.action_format  # narrowed to a Form by the check above


def reask_example(obs: Observation, cfg: AgentConfig) -> str:
    """The action a re-ask shows as an example: the first admissible one, else the first line of
    the action help."""
    if obs.admissible:
        return obs.admissible[0]
    lines = [line.strip() for line in action_help(obs.action_classes, obs.info, cfg.action_help).splitlines()]
    return next((line for line in lines if line), STOP)


def fallback_action(obs: Observation) -> str | None:
    """`stop [N/A]` where the environment has a stop action; otherwise the episode just ends."""
    return FALLBACK_ACTION if STOP in {c.lower() for c in obs.action_classes} else None


async def execute(env: AsyncEnvironment, action: str, obs_text: str, index: int, **fields: Any) -> tuple[StepResult, StepRecord]:
    result = await env.step(action)
    info = _jsonable_info(result) | fields.pop("info", {})
    record = StepRecord(index=index, observation=obs_text, action=action, action_class=await env.action_class(action),
                        valid=result.valid, delta=result.delta.model_dump(), info=info, **fields)
    return result, record


def _jsonable_info(result: StepResult) -> dict[str, JsonValue]:
    """Step info goes into the sample record: keep what JSON can hold, stringify the rest."""
    out: dict[str, JsonValue] = {}
    for k, v in (result.info or {}).items():
        out[str(k)] = v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else str(v)
    return out


class AgentState(EpisodeState, total=False):
    """The graph state of the ReAct and CDWM agents: the episode plus this step's policy reply."""

    reply: PolicyReply


StateT = TypeVar("StateT", bound=EpisodeState)
# A compiled agent graph whose state, input and output are the TypedDict `StateT` (no context).
Graph: TypeAlias = CompiledStateGraph[StateT, None, StateT, StateT]


def recursion_limit(cfg: AgentConfig, nodes_per_step: int) -> int:
    """LangGraph counts node runs; one step is `nodes_per_step` of them."""
    return nodes_per_step * (cfg.max_steps + 1) + 10


async def take_step(env: AsyncEnvironment, state: AgentState, cfg: AgentConfig, reply: PolicyReply,
                    **record_fields: Any) -> AgentState:
    """Execute the policy's first action (or the fallback) and decide whether the episode ends."""
    steps, errors = list(state["steps"]), list(state.get("errors", []))
    obs = state["obs"]
    if reply.error:
        return {"done": True, "ended_by": "error", "errors": errors + [reply.error]}
    action, fallback = (reply.actions[0], False) if reply.actions else (fallback_action(obs), True)
    if action is None:  # no action and no stop in this world: end without stepping
        return {"done": True, "ended_by": "no_action", "errors": errors, "unstepped_invalid": reply.invalid_outputs}
    result, record = await execute(env, action, truncate_observation(obs.text, cfg.obs_chars), len(steps),
                                   thought=reply.thought, invalid_outputs=reply.invalid_outputs, fallback=fallback,
                                   **record_fields)
    steps.append(record)
    ended_by = "no_action" if fallback else "abstain" if record.abstained else "done"
    if result.done or fallback or record.abstained:
        return {"steps": steps, "obs": result.observation, "done": True, "ended_by": ended_by, "errors": errors}
    if len(steps) >= cfg.max_steps:
        return {"steps": steps, "obs": result.observation, "done": True, "ended_by": "step_limit", "errors": errors}
    return {"steps": steps, "obs": result.observation, "done": False, "errors": errors}


async def run_episode(graph: CompiledStateGraph[StateT, Any, Any, Any], intent: str, obs: Observation,
                      cfg: AgentConfig, nodes_per_step: int = 2) -> StateT:
    """Run a compiled agent graph from the first observation to the end of the episode."""
    state: AgentState = {"intent": intent, "obs": obs, "steps": [], "done": False, "errors": []}
    final = await graph.ainvoke(state, {"recursion_limit": recursion_limit(cfg, nodes_per_step)})
    # LangGraph types ainvoke's result as a dict of Any or Any; in its default stream mode ("values")
    # it is the graph's final state, a `StateT`.
    return cast(StateT, final)
