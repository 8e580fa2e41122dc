"""The ReAct baseline as a LangGraph graph: each step the policy writes a thought and one action,
the environment executes it, until the environment says done, the policy stops, or the step limit.

    START -> policy -> act -> (policy | END)

`ReactGraph` holds one episode's model access, environment and config; each node is one of its
methods (callable on a hand-made state), and `graph()` wires them into the StateGraph. A reply
that names no usable action is re-asked (bounded, `AgentConfig.parse_attempts`) and then replaced
by `stop [N/A]`; both are counted on the step. The graph never sees a ground-truth delta before
acting; it records each one on its step for the metrics.
"""

from __future__ import annotations


from langgraph.graph import END, START, StateGraph

from agents.episode import (
    AgentConfig,
    AgentState,
    Generate,
    Graph,
    ask_policy,
    recursion_limit,
    run_episode,
    take_step,
)
from harness.environment import AsyncEnvironment, Observation

EpisodeState = AgentState  # the name this module had for its state
__all__ = ["EpisodeState", "ReactAgent", "ReactGraph", "build", "recursion_limit", "run", "run_episode", "take_step"]


class ReactGraph:
    """The ReAct graph of one episode: nodes `policy` and `act`, edge `after_act`."""

    nodes_per_step = 2

    def __init__(self, generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None):
        self.generate, self.env, self.cfg = generate, env, cfg or AgentConfig()

    async def policy(self, state: AgentState) -> AgentState:
        """Ask the policy for this step's thought and action."""
        reply = await ask_policy(self.generate, state["intent"], state["obs"], state["steps"], self.cfg)
        return {"reply": reply}

    async def act(self, state: AgentState) -> AgentState:
        """Execute the reply's action (or the fallback) and record the step."""
        return await take_step(self.env, state, self.cfg, state["reply"])

    def after_act(self, state: AgentState) -> str:
        return END if state["done"] else "policy"

    def graph(self) -> Graph[AgentState]:
        """The compiled graph."""
        graph = StateGraph(AgentState)
        graph.add_node("policy", self.policy)
        graph.add_node("act", self.act)
        graph.add_edge(START, "policy")
        graph.add_edge("policy", "act")
        graph.add_conditional_edges("act", self.after_act, ["policy", END])
        return graph.compile()


class ReactAgent:
    """The `react` agent of the `harness.agents` registry."""

    name = "react"
    roles = ("assistant",)

    async def run_episode(self, generate: Generate, env: AsyncEnvironment, intent: str, first_obs: Observation,
                          config: AgentConfig) -> AgentState:
        graph = ReactGraph(generate, env, config).graph()
        return await run_episode(graph, intent, first_obs, config, nodes_per_step=ReactGraph.nodes_per_step)


def build(generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None) -> Graph[AgentState]:
    """The compiled ReAct graph (kept for callers of the module-level API; see `ReactAgent`)."""
    return ReactGraph(generate, env, cfg).graph()


async def run(graph: Graph[AgentState], intent: str, obs: Observation, cfg: AgentConfig) -> AgentState:
    return await run_episode(graph, intent, obs, cfg, nodes_per_step=ReactGraph.nodes_per_step)
