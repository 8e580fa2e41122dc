"""CDWM's world model: ask a model what one action would change, as a typed delta (a JSON
`DeltaPrediction`, whose schema is `PREDICTION_SCHEMA`), and the pieces of the risk-aware planner that read predictions
(task relevance, whether the intent justifies an irreversible change, the imagined next state).

The world model is whichever model the run names for the role `world_model` (by default the model
under test). Its reply is read as a `DeltaPrediction` (`harness.structured.ask_structured`); one
that is not a valid object is re-asked with the validation error, at most `AgentConfig.wm_attempts`
times, then counted as an invalid prediction (confidence 0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agents.action_parsing import truncate_observation
from agents.episode import AgentConfig, Generate, policy_form
from harness.environment import PREDICTION_SCHEMA, Delta, DeltaPrediction
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig
from harness.structured import ReplyProblem, ask_structured, bounded, parse_json_reply

# Neutral on purpose (a reversible cart change): a small model that copies the example must not be
# steered towards predicting purchases everywhere.
EXAMPLE = {"created": [], "deleted": [], "attributes": [{"entity": "cart:1", "attribute": "item_count", "before": 0, "after": 1}],
           "relations_added": [{"subject": "cart:1", "relation": "contains", "object": "product:3"}],
           "relations_removed": [], "reversible": True, "irreversible_cost": 0, "confidence": 0.6}
# What a constrained world model's decoding is held to: the prediction's schema with short names
# and at most 4 facts per list (a small model otherwise lists until max_tokens).
DECODE_SCHEMA = bounded(PREDICTION_SCHEMA, max_length=60, max_items=4)
DIMENSION_WORDS = {"created": "create entities", "deleted": "delete entities", "attributes": "change attributes",
                   "relations_added": "add relations", "relations_removed": "remove relations",
                   "irreversible": "be irreversible"}


@dataclass
class Prediction:
    delta: Delta | None  # None when the model never produced a valid prediction
    source: str  # world_model | mask | invalid
    invalid_outputs: int = 0
    error: str | None = None

    @property
    def confidence(self) -> float:
        if self.delta is None:
            return 0.0
        return float(self.delta.confidence if self.delta.confidence is not None else 0.0)


def wm_messages(intent: str, obs_text: str, action: str, action_class: str, allowed: frozenset[str] | None,
                cfg: AgentConfig, extra_help: str | None = None) -> list[ChatMessage]:
    can = "any kind of change" if allowed is None else ", ".join(DIMENSION_WORDS[d] for d in sorted(allowed))
    system = (
        "You are a world model. Given a task, the current observation and one proposed action, predict what the "
        "action would change in the world's stored state (not the page view). Reply with one JSON object only, "
        "with these keys: created, deleted (lists of entity names like type:id), attributes (list of "
        "{entity, attribute, before, after}), relations_added and relations_removed (lists of "
        "{subject, relation, object}), reversible (false if it cannot be undone, like a purchase or a sent "
        "message), irreversible_cost (number, what is lost; 0 if reversible), confidence (0 to 1, how sure "
        "you are). If nothing stored changes, use empty lists.\nExample: " + json.dumps(EXAMPLE)
        + (f"\n{extra_help}" if extra_help else "")
    )
    user = (f"Task: {intent}\nObservation:\n{truncate_observation(obs_text, cfg.wm_obs_chars)}\n\n"
            f"Proposed action: {action}\nA `{action_class}` action can: {can}.\nJSON prediction:")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def validate_prediction(text: str) -> tuple[Delta | None, str | None]:
    """The prediction in a reply, or the reason it is not one (for the re-ask)."""
    try:
        return parse_json_reply(text, DeltaPrediction).to_delta(), None
    except ReplyProblem as problem:
        return None, str(problem)


def reask_prediction(text: str, problem: ReplyProblem) -> list[ChatMessage]:
    return [{"role": "assistant", "content": text[:600]},
            {"role": "user", "content": f"Invalid prediction ({problem}). Reply with the JSON object only."}]


async def predict(generate: Generate, intent: str, obs_text: str, action: str, action_class: str,
                  allowed: frozenset[str] | None, cfg: AgentConfig, extra_help: str | None = None) -> Prediction:
    messages = wm_messages(intent, obs_text, action, action_class, allowed, cfg, extra_help)
    config = GenerateConfig(temperature=cfg.temperature, max_tokens=cfg.wm_max_tokens, stop=["\nProposed action:", "\nTask:"])
    reply = await ask_structured(generate, cfg.world_model_role, messages, DeltaPrediction, config, cfg.wm_attempts,
                                 reask=reask_prediction, form=policy_form(cfg), schema=DECODE_SCHEMA, tool="predict")
    if reply.error is not None:
        return Prediction(None, "invalid", reply.invalid, error=f"{cfg.world_model_role}: {reply.error}")
    if reply.value is None:
        return Prediction(None, "invalid", reply.invalid)
    return Prediction(reply.value.to_delta(), "world_model", reply.invalid)


# ---------------------------------------------------------------- reading predictions
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the and for with from into that this what which your you are was were has have had how many much "
                  "its our all any can will would should could about there their them then than when where who whom "
                  "please find show tell get give make let not".split())
# Verbs by which a task asks for an irreversible change: only a task phrased with one may justify
# a candidate predicted irreversible (and only when the candidate concerns what the task names).
COMMIT = frozenset("buy purchase order pay checkout send submit post publish delete remove cancel book reserve "
                   "transfer refund close merge approve reject confirm place".split())


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def element_text(obs_text: str, action: str) -> str:
    """The observation lines of the elements an action points at (`click [12]` -> the `[12]` line),
    so a candidate's words include the button's label."""
    ids = re.findall(r"\[(\d+)\]", action)
    return "\n".join(line for line in obs_text.splitlines() for i in ids if f"[{i}]" in line)


def delta_text(delta: Delta | None) -> str:
    if delta is None:
        return ""
    return " ".join(" ".join(map(str, fact)) for fact in sorted(delta.facts()))


def relevance(intent: str, candidate_text: str) -> float:
    """Share of the task's content words the candidate (its action, element and predicted facts) mentions."""
    goal = words(intent)
    return len(goal & words(candidate_text)) / len(goal) if goal else 0.0


def justified(intent: str, candidate_text: str) -> bool:
    """An irreversible change is justified when the task asks for a commitment (a COMMIT verb) and the
    candidate concerns something the task names: a shared content word other than the verbs, looked
    for in the candidate's action, element label, predicted facts and the page's head (`page_head`),
    since a "Buy now" button rarely names the product it buys."""
    goal = words(intent)
    return bool(goal & COMMIT) and bool((goal - COMMIT) & words(candidate_text))


# Attributes by which a world says its task ended in success (MiniGrid's `level complete`, a game's `won`).
COMPLETION = frozenset({"complete", "completed", "won", "success", "solved"})


def completes_task(delta: Delta) -> bool:
    """Whether a (predicted) delta ends the task in success: an attribute in COMPLETION set true."""
    return any(a.attribute.lower() in COMPLETION and str(a.after).lower() in ("true", "1") for a in delta.attributes)


def page_head(obs_text: str, lines: int = 3) -> str:
    """The first lines of an observation: where the agent is (URL, title, heading)."""
    return "\n".join(obs_text.splitlines()[:lines])


def imagined_observation(obs_text: str, action: str, delta: Delta) -> str:
    """The state the world model imagines after `action`: the observation it was in, plus the
    predicted changes (the text a policy reads for the next imagined step)."""
    facts = delta_text(delta) or "nothing stored changes"
    return f"{obs_text}\n[Imagined after `{action}`: {facts}]"
