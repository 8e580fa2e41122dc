"""The CDWM agent (Causal Delta World Models) as a LangGraph graph.

    START -> propose -> predict -> lookahead -> select -> act -> (propose | END)

- propose: the policy lists K candidate actions, best first (one generation).
- predict: per candidate, the world model predicts its typed delta; the per-action-class mask
  removes what the class cannot change, and a class that can change nothing gets the empty delta
  without a model call (`source = "mask"`, confidence 1).
- lookahead (horizon 2): for a candidate predicted to change something, the policy picks its next
  action in the imagined state (observation + predicted delta), and the world model predicts that
  one too; its value (relevance / 2 - lambda * risk) counts, discounted, towards the candidate.
- select: prune a candidate predicted irreversible with cost >= `cost_threshold` unless the task
  justifies it (`world_model.justified`); score = progress - lambda * risk, where
  progress = (policy rank prior + task relevance) / 2 and risk = 1 if predicted irreversible and
  not justified by the task, 0.5 when unknown (no valid prediction), else 0; then abstain (`stop [ABSTAIN]`) when the best
  candidate's confidence is below `confidence_threshold` or every candidate was pruned.
- act: execute, and record the chosen prediction beside the ground-truth delta for the metrics.

`CdwmGraph` holds one episode's model access, environment and config; each node is one of its
methods (callable on a hand-made state), and `graph()` wires them into the StateGraph.
`CdwmAgent` is the `cdwm` entry of the `harness.agents` registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

from agents.episode import (
    ABSTAIN_ACTION,
    AgentConfig,
    AgentState,
    Generate,
    Graph,
    PolicyReply,
    ask_policy,
    run_episode,
    take_step,
)
from agents.trained_world_model import TrainedWorldModel
from agents.world_model import (
    Prediction,
    completes_task,
    delta_text,
    element_text,
    imagined_observation,
    justified,
    page_head,
    relevance,
)
from agents.world_model import predict as predict_delta  # `predict` is also a node's name here
from harness.agents_registry import StepRecord
from harness.environment import STOP, WORLD_MODEL_HELP, AsyncEnvironment, Delta, Observation

NODES_PER_STEP = 5
UNKNOWN_RISK = 0.5


# A world model as the planner asks it: (intent, observation, its text, action, action class) ->
# the prediction. None in `CdwmGraph`: the prompted model of the run's `world_model` role under
# the suite's hand-written mask (`agents/world_model.py`).
WorldModel = Callable[[str, Observation, str, str, str], Awaitable[Prediction]]


class Proposer(Protocol):
    """Where candidate actions come from: the policy model (`PolicyProposer`), or anything else
    that ranks actions -- e.g. a noisy expert (`environments/cdwm/planner_check.py`), so that a
    world model's value can be measured apart from a proposer's skill."""

    async def propose(self, intent: str, obs: Observation, steps: list[StepRecord], k: int) -> PolicyReply: ...

    async def follow_up(self, intent: str, imagined: Observation, steps: list[StepRecord], action: str) -> str | None:
        """The action it would take after `action`, in the imagined state (None: none)."""
        ...


class PolicyProposer:
    """The run's policy model (the embedded LLM or any model the `assistant` role names)."""

    def __init__(self, generate: Generate, cfg: AgentConfig):
        self.generate, self.cfg = generate, cfg

    async def propose(self, intent: str, obs: Observation, steps: list[StepRecord], k: int) -> PolicyReply:
        return await ask_policy(self.generate, intent, obs, steps, self.cfg, candidates=k)

    async def follow_up(self, intent: str, imagined: Observation, steps: list[StepRecord], action: str) -> str | None:
        nxt = await ask_policy(self.generate, intent, imagined, steps, self.cfg)
        return nxt.actions[0] if nxt.actions else None


def trained_world_model(model: TrainedWorldModel, generate: Generate, cfg: AgentConfig) -> WorldModel:
    """A trained adapter (`harness cdwm train`) as the planner's world model: asked in its training
    prompt through the `world_model` role, decoded under its learned mask's grammar."""

    async def predict(intent: str, obs: Observation, obs_text: str, action: str, action_class: str) -> Prediction:
        return await model.predict(generate, intent, obs_text, action, action_class, cfg)

    return predict


class AsSet(BaseModel):
    """A record whose JSON holds the fields that were set and no others: a key the planner never
    set (a candidate not pruned, no lookahead) stays absent, as in the records written before
    these were types, so old and new runs read alike."""

    @model_serializer(mode="wrap")
    def _set_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        kept = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in handler(self).items() if k in kept}


class Lookahead(AsSet):
    """A candidate's imagined next step (horizon 2): the policy's follow-up action, its prediction,
    and its value (task relevance / 2 - lambda * risk)."""

    action: str
    action_class: str = ""
    source: str = ""  # world_model | mask | invalid
    value: float = 0.0
    prediction: Delta | None = None


class Candidate(AsSet):
    """One candidate action of a step and what the planner made of it: the world model's
    (masked) prediction, then in `select` its progress, risk and score, why it was pruned, and
    whether it was chosen. The step records them (`StepRecord.candidates`, as their JSON dump)."""

    action: str
    rank: int = 0  # the policy's order, best first
    action_class: str = ""
    prediction: Delta | None = None  # None: no valid prediction
    source: str = ""  # world_model | mask | invalid
    confidence: float = 0.0
    invalid_outputs: int = 0  # world-model replies that were no valid prediction
    error: str | None = None
    lookahead: Lookahead | None = None
    pruned: str | None = None  # why select pruned it
    progress: float | None = None
    risk: float | None = None
    score: float | None = None
    chosen: bool = False

    def predicted(self) -> Prediction:
        """The world model's answer this candidate holds."""
        return Prediction(self.prediction, self.source, self.invalid_outputs, self.error)


class CdwmState(AgentState, total=False):
    candidates: list[Candidate]
    abstain: str | None  # why select chose to abstain this step (None: it chose a candidate)


class CdwmGraph:
    """The CDWM graph of one episode: nodes `propose`, `predict`, `lookahead`, `select`, `act`."""

    nodes_per_step = NODES_PER_STEP

    def __init__(self, generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None, *,
                 world_model: WorldModel | None = None, proposer: Proposer | None = None):
        self.generate, self.env, self.cfg = generate, env, cfg or AgentConfig()
        self.world_model = world_model
        self.proposer: Proposer = proposer or PolicyProposer(generate, self.cfg)

    async def predict_one(self, intent: str, obs: Observation, obs_text: str, action: str) -> tuple[str, Prediction]:
        """One action's class and masked prediction (no model call when the mask settles it)."""
        cfg, mask = self.cfg, self.cfg.mask
        cls = await self.env.action_class(action)  # the environment's own classification is the mask's key
        if self.world_model is not None:  # its own mask (a trained model's is in its grammar)
            return cls, await self.world_model(intent, obs, obs_text, action, cls)
        if mask is not None and mask.determined(cls):
            return cls, Prediction(Delta(confidence=1.0), "mask")
        allowed = mask.allowed(cls) if mask is not None else None
        pred = await predict_delta(self.generate, intent, obs_text, action, cls, allowed, cfg,
                                   cfg.world_model_help or obs.info.get(WORLD_MODEL_HELP))
        if pred.delta is not None and mask is not None:
            pred.delta = mask.apply(cls, pred.delta)
        return cls, pred

    async def propose(self, state: CdwmState) -> CdwmState:
        """K candidate actions from one policy reply."""
        reply = await self.proposer.propose(state["intent"], state["obs"], state["steps"], self.cfg.candidates)
        return {"reply": reply}

    async def predict(self, state: CdwmState) -> CdwmState:
        """Each candidate's class and predicted delta."""
        reply, obs = state["reply"], state["obs"]
        if reply.error or not reply.actions:
            return {"candidates": []}
        results = await asyncio.gather(*(self.predict_one(state["intent"], obs, obs.text, a) for a in reply.actions))
        candidates = [Candidate(action=action, rank=rank, action_class=cls, prediction=pred.delta, source=pred.source,
                                confidence=pred.confidence, invalid_outputs=pred.invalid_outputs, error=pred.error)
                      for rank, (action, (cls, pred)) in enumerate(zip(reply.actions, results))]
        return {"candidates": candidates}

    async def imagine(self, state: CdwmState, candidate: Candidate) -> Lookahead | None:
        """The imagined second step after a candidate (its `lookahead` entry), or None when the
        candidate is predicted to change nothing or the policy names no action there."""
        delta = candidate.prediction
        if delta is None or delta.is_empty() or candidate.action_class == STOP:
            return None  # nothing imagined changes: the next state is this one
        obs, intent, cfg = state["obs"], state["intent"], self.cfg
        imagined = Observation(text=imagined_observation(obs.text, candidate.action, delta),
                               action_classes=obs.action_classes, admissible=obs.admissible, info=obs.info)
        action = await self.proposer.follow_up(intent, imagined, state["steps"], candidate.action)
        if action is None:
            return None
        cls, p2 = await self.predict_one(intent, imagined, imagined.text, action)
        # The imagined step's value has no rank prior (no ranking there): its task relevance
        # less its risk, so a candidate with no imagined step (value 0) is not handicapped.
        text = _candidate_text(imagined.text, action, p2)
        value = 0.5 * relevance(intent, text) - cfg.risk_lambda * _risk(p2, _justified(intent, text, p2))
        return Lookahead(action=action, action_class=cls, source=p2.source, value=value, prediction=p2.delta)

    async def lookahead(self, state: CdwmState) -> CdwmState:
        """Horizon 2: each candidate's imagined next step."""
        if self.cfg.horizon < 2:
            return {}
        candidates = [c.model_copy() for c in state["candidates"]]
        found = await asyncio.gather(*(self.imagine(state, c) for c in candidates))
        for c, ahead in zip(candidates, found):
            if ahead is not None:
                c.lookahead = ahead
        return {"candidates": candidates}

    async def select(self, state: CdwmState) -> CdwmState:
        """Prune, score, and choose a candidate -- or abstain."""
        cfg = self.cfg
        reply, obs, intent = state["reply"], state["obs"], state["intent"]
        if reply.error or not reply.actions:
            return {"abstain": None}  # take_step records the error or the fallback
        candidates = [c.model_copy() for c in state["candidates"]]
        k = len(candidates)
        for c in candidates:
            pred = c.predicted()
            text = _candidate_text(obs.text, c.action, pred)
            ok = _justified(intent, text, pred)
            if pred.delta is not None and not pred.delta.reversible and pred.delta.irreversible_cost >= cfg.cost_threshold and not ok:
                c.pruned = "predicted irreversible and the task does not ask for it"
            c.progress = progress = _progress(intent, obs.text, c.action, pred, c.rank, k)
            c.risk = risk = _risk(pred, ok)
            c.score = progress - cfg.risk_lambda * risk + cfg.lookahead_discount * (c.lookahead.value if c.lookahead else 0.0)
        alive = [c for c in candidates if c.pruned is None]
        best = max(alive, key=lambda c: (c.score or 0.0, -c.rank)) if alive else None
        if best is None or best.confidence < cfg.confidence_threshold:
            reason = "every candidate pruned" if best is None else f"best candidate's confidence {best.confidence:.2f} < {cfg.confidence_threshold:g}"
            return {"candidates": candidates, "reply": PolicyReply([ABSTAIN_ACTION], reply.thought, reply.invalid_outputs),
                    "abstain": reason}
        best.chosen = True
        return {"candidates": candidates,
                "reply": PolicyReply([best.action], reply.thought, reply.invalid_outputs), "abstain": None}

    async def act(self, state: CdwmState) -> AgentState:
        """Execute the choice (or abstain) and record the chosen prediction beside the ground truth."""
        reply, candidates = state["reply"], state.get("candidates", [])
        chosen = next((c for c in candidates if c.chosen), None)
        public = [c.model_dump(mode="json") for c in candidates]  # the step record holds JSON
        abstain = state.get("abstain")
        if abstain:
            if STOP not in {c.lower() for c in state["obs"].action_classes}:
                return {"done": True, "ended_by": "abstain", "errors": state.get("errors", []), "abstain_reason": abstain}
            return await take_step(self.env, state, self.cfg, reply, candidates=public, abstained=True,
                                   info={"abstain_reason": abstain})
        if chosen is not None:
            prediction = chosen.prediction.model_dump() if chosen.prediction is not None else None
            return await take_step(self.env, state, self.cfg, reply, candidates=public, prediction=prediction,
                                   prediction_source=chosen.source, prediction_valid=prediction is not None)
        return await take_step(self.env, state, self.cfg, reply, candidates=public)

    def after_act(self, state: CdwmState) -> str:
        return END if state["done"] else "propose"

    def graph(self) -> Graph[CdwmState]:
        """The compiled graph."""
        graph = StateGraph(CdwmState)
        for name in ("propose", "predict", "lookahead", "select", "act"):
            graph.add_node(name, getattr(self, name))
        graph.add_edge(START, "propose")
        graph.add_edge("propose", "predict")
        graph.add_edge("predict", "lookahead")
        graph.add_edge("lookahead", "select")
        graph.add_edge("select", "act")
        graph.add_conditional_edges("act", self.after_act, ["propose", END])
        return graph.compile()


class CdwmAgent:
    """The `cdwm` agent of the `harness.agents` registry."""

    name = "cdwm"
    roles = ("assistant", "world_model")

    async def run_episode(self, generate: Generate, env: AsyncEnvironment, intent: str, first_obs: Observation,
                          config: AgentConfig, *, world_model: WorldModel | None = None,
                          proposer: Proposer | None = None) -> CdwmState:
        graph = CdwmGraph(generate, env, config, world_model=world_model, proposer=proposer).graph()
        return await run_episode(graph, intent, first_obs, config, nodes_per_step=NODES_PER_STEP)


def build(generate: Generate, env: AsyncEnvironment, cfg: AgentConfig | None = None) -> Graph[CdwmState]:
    """The compiled CDWM graph (kept for callers of the module-level API; see `CdwmAgent`)."""
    return CdwmGraph(generate, env, cfg).graph()


def _candidate_text(obs_text: str, action: str, pred: Prediction) -> str:
    """What a candidate is about: its action, the element it targets, its predicted facts, the page."""
    return f"{action} {element_text(obs_text, action)} {delta_text(pred.delta)} {page_head(obs_text)}"


def _justified(intent: str, candidate_text: str, pred: Prediction) -> bool:
    """A predicted irreversible change the task asks for: a commitment the intent names
    (`justified`), or the task's own ending -- a level completed, a game won (`completes_task`);
    without the second, a planner that prunes every irreversible step could never finish a world
    whose goal is itself irreversible (MiniGrid's level end)."""
    return justified(intent, candidate_text) or (pred.delta is not None and completes_task(pred.delta))


def _progress(intent: str, obs_text: str, action: str, pred: Prediction, rank: int, k: int) -> float:
    prior = 1.0 - rank / max(1, k)
    text = f"{action} {element_text(obs_text, action)} {delta_text(pred.delta)}"
    return 0.5 * prior + 0.5 * relevance(intent, text)


def _risk(pred: Prediction, justified_by_task: bool = False) -> float:
    """1 for a predicted irreversible change the task does not ask for (a required purchase is no
    risk), UNKNOWN_RISK without a valid prediction, else 0."""
    if pred.delta is None:
        return UNKNOWN_RISK
    return 0.0 if pred.delta.reversible or justified_by_task else 1.0


async def run(graph: Graph[CdwmState], intent: str, obs: Observation, cfg: AgentConfig) -> CdwmState:
    return await run_episode(graph, intent, obs, cfg, nodes_per_step=NODES_PER_STEP)
