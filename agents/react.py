"""The ReAct baseline as a LangGraph graph: each step the policy writes a thought and one action,
the environment executes it, until the environment says done, the policy stops, or the step limit.

    START -> policy -> act -> (policy | END)

A reply that names no usable action is re-asked (bounded, `AgentConfig.parse_attempts`) and then
replaced by `stop [N/A]`; both are counted on the step. The graph never sees a ground-truth delta
before acting; it records each one on its step for the metrics.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from agents.episode import (
    AgentConfig,
    Generate,
    PolicyReply,
    StepRecord,
    ThreadedEnv,
    ask_policy,
    execute,
    fallback_action,
)
from agents.action_parsing import truncate_observation
from environments.cdwm.env import Observation


class EpisodeState(TypedDict, total=False):
    intent: str
    obs: Observation
    steps: list[StepRecord]
    done: bool
    ended_by: str  # done | step_limit | no_action | error | abstain
    errors: list[str]
    reply: PolicyReply


def recursion_limit(cfg: AgentConfig, nodes_per_step: int) -> int:
    """LangGraph counts node runs; one step is `nodes_per_step` of them."""
    return nodes_per_step * (cfg.max_steps + 1) + 10


def build(generate: Generate, env: ThreadedEnv, cfg: AgentConfig | None = None):
    """The compiled ReAct graph. `generate(role, messages, config)` is the run's model access
    (a suite passes `SampleContext.generate`); `env` the environment behind the CDWM protocol."""
    cfg = cfg or AgentConfig()

    async def policy(state: EpisodeState) -> dict[str, Any]:
        reply = await ask_policy(generate, state["intent"], state["obs"], state["steps"], cfg)
        return {"reply": reply}

    async def act(state: EpisodeState) -> dict[str, Any]:
        return await take_step(env, state, cfg, state["reply"])

    graph = StateGraph(EpisodeState)
    graph.add_node("policy", policy)
    graph.add_node("act", act)
    graph.add_edge(START, "policy")
    graph.add_edge("policy", "act")
    graph.add_conditional_edges("act", lambda s: END if s["done"] else "policy", ["policy", END])
    return graph.compile()


async def take_step(env: ThreadedEnv, state: EpisodeState, cfg: AgentConfig, reply: PolicyReply,
                    **record_fields: Any) -> dict[str, Any]:
    """Execute the policy's first action (or the fallback) and decide whether the episode ends."""
    steps, errors = list(state["steps"]), list(state.get("errors", []))
    obs = state["obs"]
    if reply.error:
        return {"done": True, "ended_by": "error", "errors": errors + [reply.error]}
    action, fallback = (reply.actions[0], False) if reply.actions else (fallback_action(obs), True)
    if action is None:  # no action and no stop in this world: end without stepping
        return {"done": True, "ended_by": "no_action", "errors": errors}
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


async def run_episode(graph, intent: str, obs: Observation, cfg: AgentConfig, nodes_per_step: int = 2) -> EpisodeState:
    """Run a compiled agent graph from the first observation to the end of the episode."""
    state: EpisodeState = {"intent": intent, "obs": obs, "steps": [], "done": False, "errors": []}
    return await graph.ainvoke(state, {"recursion_limit": recursion_limit(cfg, nodes_per_step)})


async def run(graph, intent: str, obs: Observation, cfg: AgentConfig) -> EpisodeState:
    return await run_episode(graph, intent, obs, cfg, nodes_per_step=2)
