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
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.graph import END, START, StateGraph

from agents.episode import ABSTAIN_ACTION, AgentConfig, Generate, PolicyReply, ThreadedEnv, ask_policy
from agents.react import EpisodeState, run_episode, take_step
from agents.world_model import (
    Prediction,
    delta_text,
    element_text,
    imagined_observation,
    justified,
    page_head,
    predict,
    relevance,
)
from environments.cdwm.deltas import Delta
from environments.cdwm.env import STOP, Observation

NODES_PER_STEP = 5
UNKNOWN_RISK = 0.5


class CdwmState(EpisodeState, total=False):
    candidates: list[dict[str, Any]]
    abstain: str | None  # why select chose to abstain this step (None: it chose a candidate)
    abstain_reason: str


def build(generate: Generate, env: ThreadedEnv, cfg: AgentConfig | None = None):
    cfg = cfg or AgentConfig()
    mask = cfg.mask

    async def predict_one(intent: str, obs: Observation, obs_text: str, action: str) -> tuple[str, Prediction]:
        cls = await env.action_class(action)  # the environment's own classification is the mask's key
        if mask is not None and mask.determined(cls):
            return cls, Prediction(Delta(confidence=1.0), "mask")
        allowed = mask.allowed(cls) if mask is not None else None
        pred = await predict(generate, intent, obs_text, action, cls, allowed, cfg,
                             cfg.world_model_help or obs.info.get("world_model_help"))
        if pred.delta is not None and mask is not None:
            pred.delta = mask.apply(cls, pred.delta)
        return cls, pred

    async def propose(state: CdwmState) -> dict[str, Any]:
        reply = await ask_policy(generate, state["intent"], state["obs"], state["steps"], cfg, candidates=cfg.candidates)
        return {"reply": reply}

    async def predict_node(state: CdwmState) -> dict[str, Any]:
        reply, obs = state["reply"], state["obs"]
        if reply.error or not reply.actions:
            return {"candidates": []}
        results = await asyncio.gather(*(predict_one(state["intent"], obs, obs.text, a) for a in reply.actions))
        candidates = []
        for rank, (action, (cls, pred)) in enumerate(zip(reply.actions, results)):
            candidates.append({"action": action, "rank": rank, "action_class": cls, "_pred": pred,
                               "prediction": pred.delta.model_dump() if pred.delta else None,
                               "source": pred.source, "confidence": pred.confidence,
                               "invalid_outputs": pred.invalid_outputs, "error": pred.error})
        return {"candidates": candidates}

    async def lookahead(state: CdwmState) -> dict[str, Any]:
        if cfg.horizon < 2:
            return {}
        obs, intent = state["obs"], state["intent"]
        candidates = [dict(c) for c in state["candidates"]]

        async def imagine(c: dict[str, Any]) -> None:
            pred: Prediction = c["_pred"]
            if pred.delta is None or pred.delta.is_empty() or c["action_class"] == STOP:
                return  # nothing imagined changes: the next state is this one
            imagined = Observation(text=imagined_observation(obs.text, c["action"], pred.delta),
                                   action_classes=obs.action_classes, admissible=obs.admissible, info=obs.info)
            nxt = await ask_policy(generate, intent, imagined, state["steps"], cfg)
            if not nxt.actions:
                return
            action = nxt.actions[0]
            cls, p2 = await predict_one(intent, imagined, imagined.text, action)
            # The imagined step's value has no rank prior (no ranking there): its task relevance
            # less its risk, so a candidate with no imagined step (value 0) is not handicapped.
            text = _candidate_text(imagined.text, action, p2)
            value = 0.5 * relevance(intent, text) - cfg.risk_lambda * _risk(p2, justified(intent, text))
            c["lookahead"] = {"action": action, "action_class": cls, "source": p2.source, "value": value,
                              "prediction": p2.delta.model_dump() if p2.delta else None}

        await asyncio.gather(*(imagine(c) for c in candidates))
        return {"candidates": candidates}

    async def select(state: CdwmState) -> dict[str, Any]:
        reply, obs, intent = state["reply"], state["obs"], state["intent"]
        if reply.error or not reply.actions:
            return {"abstain": None}  # take_step records the error or the fallback
        candidates = [dict(c) for c in state["candidates"]]
        k = len(candidates)
        for c in candidates:
            pred: Prediction = c["_pred"]
            text = _candidate_text(obs.text, c["action"], pred)
            ok = justified(intent, text)
            if pred.delta is not None and not pred.delta.reversible and pred.delta.irreversible_cost >= cfg.cost_threshold and not ok:
                c["pruned"] = "predicted irreversible and the task does not ask for it"
            c["progress"] = _progress(intent, obs.text, c["action"], pred, c["rank"], k)
            c["risk"] = _risk(pred, ok)
            c["score"] = c["progress"] - cfg.risk_lambda * c["risk"] + cfg.lookahead_discount * c.get("lookahead", {}).get("value", 0.0)
        alive = [c for c in candidates if "pruned" not in c]
        best = max(alive, key=lambda c: (c["score"], -c["rank"])) if alive else None
        if best is None or best["confidence"] < cfg.confidence_threshold:
            reason = "every candidate pruned" if best is None else f"best candidate's confidence {best['confidence']:.2f} < {cfg.confidence_threshold:g}"
            return {"candidates": candidates, "reply": PolicyReply([ABSTAIN_ACTION], reply.thought, reply.invalid_outputs),
                    "abstain": reason}
        best["chosen"] = True
        return {"candidates": candidates,
                "reply": PolicyReply([best["action"]], reply.thought, reply.invalid_outputs), "abstain": None}

    async def act(state: CdwmState) -> dict[str, Any]:
        reply, candidates = state["reply"], state.get("candidates", [])
        chosen = next((c for c in candidates if c.get("chosen")), None)
        public = [{k: v for k, v in c.items() if k != "_pred"} for c in candidates]
        fields: dict[str, Any] = {"candidates": public}
        abstain = state.get("abstain")
        if abstain:
            if STOP not in {c.lower() for c in state["obs"].action_classes}:
                return {"done": True, "ended_by": "abstain", "errors": state.get("errors", []), "abstain_reason": abstain}
            fields |= {"abstained": True, "info": {"abstain_reason": abstain}}
        elif chosen is not None:
            fields |= {"prediction": chosen["prediction"], "prediction_source": chosen["source"],
                       "prediction_valid": chosen["prediction"] is not None}
        return await take_step(env, state, cfg, reply, **fields)

    graph = StateGraph(CdwmState)
    for name, fn in (("propose", propose), ("predict", predict_node), ("lookahead", lookahead), ("select", select), ("act", act)):
        graph.add_node(name, fn)
    graph.add_edge(START, "propose")
    graph.add_edge("propose", "predict")
    graph.add_edge("predict", "lookahead")
    graph.add_edge("lookahead", "select")
    graph.add_edge("select", "act")
    graph.add_conditional_edges("act", lambda s: END if s["done"] else "propose", ["propose", END])
    return graph.compile()


def _candidate_text(obs_text: str, action: str, pred: Prediction) -> str:
    """What a candidate is about: its action, the element it targets, its predicted facts, the page."""
    return f"{action} {element_text(obs_text, action)} {delta_text(pred.delta)} {page_head(obs_text)}"


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


async def run(graph, intent: str, obs: Observation, cfg: AgentConfig) -> CdwmState:
    return await run_episode(graph, intent, obs, cfg, nodes_per_step=NODES_PER_STEP)
