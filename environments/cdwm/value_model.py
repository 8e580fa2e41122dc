"""The value-model baseline (issue 40 item 6): the same base model, LoRA, transitions and SFT budget
as the delta world model, trained (`harness cdwm train --target value`) to say how good an action
is -- `good`, `neutral` or `bad` -- and nothing of what it changes.

The label of a collected transition (`goodness`), from the row alone:
- `good`: the step of the world's gold plan (`source` plan), or one that won the task: it advances
  the task as the expert would;
- `bad`: any other step whose ground-truth delta is irreversible: an irreversible change the plan
  did not call for (lava, a slice, a sent message) -- what CDWM's planner exists to avoid;
- `neutral`: any other step (off-plan but reversible: it costs a step, not the task).
Why these three: they are what a value model can know from the data a delta model trains on (the
plan, the ledger's reversibility, the outcome) and what the planner needs to act on -- prune the
bad, prefer the good -- so the comparison isolates predicting *what changes* from predicting *how
good*. The label is read from the delta's reversibility, but the model is never shown a delta.

In the planner (arm `value`), the model's label becomes a prediction with no facts in it: `bad` is
"irreversible, cost 1" (pruned unless the task asks for it), the others reversible; the lookahead
then imagines no change. The prompt is the delta model's user message under its own system text.

May import: `harness`, `agents`, `environments.cdwm`.
"""

from __future__ import annotations

from pathlib import Path

from agents.cdwm import WorldModel
from agents.episode import Generate
from agents.trained_world_model import trained_messages
from agents.world_model import Prediction
from environments.cdwm.baseline_adapter import baseline_obs_chars
from environments.cdwm.collect import TransitionRow
from harness.environment import Delta, Observation
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig

VALUE_FORMAT = "cdwm-value-v1"
LABELS = ("good", "neutral", "bad")
NEEDED_COLUMNS = ("source", "reversible", "won")
VALUE_SYSTEM = ("You judge one action of an agent in a world. Reply with one word: good (it advances the task), "
                "neutral (it does not, but changes nothing that cannot be undone) or bad (it makes an irreversible "
                "change the task did not ask for).")


def goodness(row: TransitionRow) -> str:
    """A collected transition's label (see the module docstring)."""
    missing = [c for c in NEEDED_COLUMNS if c not in row]
    if missing:
        raise HarnessError(f"a transition lacks columns {', '.join(missing)}: collect it again with `harness cdwm collect`")
    if row["source"] == "plan" or bool(row["won"]):
        return "good"
    return "neutral" if bool(row["reversible"]) else "bad"


def value_messages(world: str, intent: str, observation: str, action: str, action_class: str,
                   obs_chars: int = 700) -> list[ChatMessage]:
    """The delta model's question about one transition, under the value model's system text."""
    user = trained_messages(world, intent, observation, action, action_class, obs_chars)[1]
    return [{"role": "system", "content": VALUE_SYSTEM}, user]


def row_messages(row: TransitionRow, obs_chars: int = 700) -> list[ChatMessage]:
    return value_messages(str(row["world"]), str(row["intent"]), str(row["observation"]), str(row["action"]),
                          str(row["action_class"]), obs_chars)


def parse_label(text: str) -> str | None:
    """The first label word of a reply (None: no label in it)."""
    words = text.strip().lower().split()
    first = words[0].strip(".,:;!\"'") if words else ""
    return first if first in LABELS else None


def as_prediction(label: str | None) -> Prediction:
    """A label in the planner's terms, with no facts: `bad` is an irreversible change of cost 1."""
    if label is None:
        return Prediction(None, "invalid", invalid_outputs=1, error="no good / neutral / bad in the reply")
    bad = label == "bad"
    return Prediction(Delta(reversible=not bad, irreversible_cost=1.0 if bad else 0.0, confidence=1.0), "world_model")


class ValueModel:
    """A `harness cdwm train --target value` adapter, asked through `generate` (served as
    local/smollm2-135m@DIR#all-token, as a delta adapter is)."""

    def __init__(self, world: str, obs_chars: int):
        self.world = world
        self.obs_chars = obs_chars

    @classmethod
    def load(cls, directory: str | Path, world: str) -> ValueModel:
        return cls(world, baseline_obs_chars(directory, world, VALUE_FORMAT, "value"))

    def world_model(self, generate: Generate) -> WorldModel:
        """The planner's world-model callable (agents/cdwm.py's WorldModel) for this value model."""

        async def predict(intent: str, obs: Observation, obs_text: str, action: str, action_class: str) -> Prediction:
            messages = value_messages(self.world, intent, obs_text, action, action_class, self.obs_chars)
            # held to the three labels by the engine's `choice` constraint, as a delta is held to its grammar
            out = await generate("world_model", messages, GenerateConfig(max_tokens=4, choice=list(LABELS)))
            return as_prediction(parse_label(str(out.text or "")))

        return predict
