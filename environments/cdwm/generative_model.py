"""The generative world-model baseline (issue 40 item 6): the same base model, LoRA, transitions and
SFT budget as the delta world model, trained (`harness cdwm train --target generative`) to write the
observation that follows an action; its delta is the diff of the world's facts read from the
current observation and from the predicted one.

The target is the next observation as the world writes it (`collect.NEXT`), cut at the prompt's
`obs_chars` as the prompt's observation is -- no compact form: a MiniGrid observation is at most
~370 characters, and what the baseline is, is a model of the next observation. It learns no mask
and is never shown a delta. Only worlds with an observation -> facts reader can be played
(`READERS`, by string: the world folders import `cdwm`, never the reverse): MiniGrid
(`environments/procgen/facts.py`) and the household world (`environments/household/reader.py`).
A household reply alone is not a state ("You arrive at fridge 1. ..." does not say where the agent
was), so that world keeps a status line beside it (`Observation.info["status"]`: the agent's place
and what it carries; collected as `collect.STATUS` / `NEXT_STATUS`), and the observation this model
reads and writes is `observe(text, status)`: the status line, then the reply. A world that keeps no
status (MiniGrid) is read and written as its text alone.

In the planner (arm `generative`): per candidate the model is asked for the next observation, the
world's reader diffs it with the current one, and the delta is irreversible where the ledger's would
be (the reader builds it with the ledger's own function: MiniGrid's level end), so it is pruned as a
delta arm's prediction is. An unreadable reply is an invalid prediction. The model writes no
confidence; a readable prediction has confidence 1 (as the value arm's). In the lookahead the
imagined observation is the model's own predicted one (kept per imagined text), so its second step
rolls its own prediction forward.

May import: `harness`, `agents`, `environments.cdwm`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from agents.cdwm import WorldModel
from agents.episode import Generate
from agents.trained_world_model import trained_messages
from agents.world_model import Prediction, imagined_observation
from environments.cdwm.baseline_adapter import baseline_obs_chars
from environments.cdwm.collect import NEXT, NEXT_STATUS, STATUS, TransitionRow
from harness.environment import Delta, Observation
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig

GENERATIVE_FORMAT = "cdwm-generative-v1"
NEEDED_COLUMNS = (NEXT,)
GENERATIVE_SYSTEM = ("You are a world model. Given the current observation and one action, write the observation "
                     "the world shows after the action, in the same format.")
# world -> "module:function" (before text, after text) -> Delta | None (None: not readable)
READERS = {"minigrid": "environments.procgen.facts:observation_delta",
           "household": "environments.household.reader:observation_delta"}
# Worlds whose observation is read with the status kept beside it (`observe`): their rows need STATUS.
STATUS_WORLDS = ("household",)
MAX_TOKENS = 384  # a MiniGrid observation is ~150 tokens of the embedded tokenizer; a household step's ~30-60

Reader = Callable[[str, str], Delta | None]


def reader(world: str) -> Reader:
    """The world's observation -> facts diff; refused for a world without one."""
    ref = READERS.get(world)
    if ref is None:
        raise HarnessError(f"world {world!r} has no observation reader, so the generative arm cannot turn a predicted "
                           f"observation into a delta there; it plays {', '.join(READERS)}")
    module, _, name = ref.partition(":")
    found: Reader = getattr(importlib.import_module(module), name)
    return found


def check_columns(folder: Path, split: str, columns: list[str]) -> None:
    """A split without the next observation is from a collection that predates it: refused, naming the fix."""
    if NEXT not in columns:
        raise HarnessError(f"{folder / split}: no {NEXT} column -- collected before `harness cdwm collect` wrote the "
                           f"next observation; collect the data again (the same options, a new --out) to train "
                           f"--target generative")


def observe(text: str, status: str) -> str:
    """The observation the model reads and writes: the world's status line (if it keeps one) first,
    then its text -- first, so that cutting a long observation at `obs_chars` never cuts the state
    (household/reader.py's `view`, the format the reader parses)."""
    return f"{status}\n{text}" if status else text


def _status(row: TransitionRow, column: str) -> str:
    """A row's status (`collect.STATUS` / `NEXT_STATUS`); a household row collected before the status
    was written is refused, naming the fix (its reply alone cannot be read into a delta)."""
    world = str(row["world"])
    if world in STATUS_WORLDS and column not in row:
        raise HarnessError(f"a {world} row ({row['episode']}) has no {column} column -- collected before `harness cdwm "
                           f"collect` wrote the {world} status; collect the data again (the same options, a new --out) "
                           f"to train --target generative")
    return str(row.get(column, ""))


def generative_messages(world: str, intent: str, observation: str, action: str, action_class: str,
                        obs_chars: int = 700) -> list[ChatMessage]:
    """The delta model's question about one transition, under the generative model's system text."""
    user = trained_messages(world, intent, observation, action, action_class, obs_chars)[1]
    return [{"role": "system", "content": GENERATIVE_SYSTEM}, user]


def row_messages(row: TransitionRow, obs_chars: int = 700) -> list[ChatMessage]:
    return generative_messages(str(row["world"]), str(row["intent"]), observe(str(row["observation"]),
                               _status(row, STATUS)), str(row["action"]), str(row["action_class"]), obs_chars)


def target(row: TransitionRow, obs_chars: int = 700) -> str:
    """The reply it is trained to write: the next observation, cut as the prompt's observation is."""
    text = observe(str(row.get(NEXT, "")), _status(row, NEXT_STATUS))
    return text if len(text) <= obs_chars else text[:obs_chars] + " ..."


def as_prediction(current: str, predicted: str, read: Reader) -> Prediction:
    """A predicted observation in the planner's terms: the diff of its facts with the current one's."""
    delta = read(current, predicted)
    if delta is None:
        return Prediction(None, "invalid", invalid_outputs=1, error="the predicted observation is not readable")
    return Prediction(delta.model_copy(update={"confidence": 1.0}), "world_model")


class GenerativeModel:
    """A `harness cdwm train --target generative` adapter, asked through `generate` (served as
    local/smollm2-135m@DIR#all-token, as a delta adapter is)."""

    def __init__(self, world: str, obs_chars: int):
        self.world = world
        self.obs_chars = obs_chars
        self.read = reader(world)

    @classmethod
    def load(cls, directory: str | Path, world: str) -> GenerativeModel:
        return cls(world, baseline_obs_chars(directory, world, GENERATIVE_FORMAT, "generative"))

    def world_model(self, generate: Generate) -> WorldModel:
        """The planner's world-model callable (agents/cdwm.py's WorldModel) for this generative model."""
        imagined: dict[str, str] = {}  # the planner's imagined text -> the observation the model predicted

        async def predict(intent: str, obs: Observation, obs_text: str, action: str, action_class: str) -> Prediction:
            # the model's own prediction in the lookahead, else the world's observation (with its status)
            current = imagined.get(obs_text) or observe(obs_text, str(obs.info.get("status", "")))
            messages = generative_messages(self.world, intent, current, action, action_class, self.obs_chars)
            out = await generate("world_model", messages, GenerateConfig(temperature=0.0, max_tokens=MAX_TOKENS))
            predicted = str(out.text or "")
            pred = as_prediction(current, predicted, self.read)
            if pred.delta is not None:  # the lookahead's imagined state is this predicted observation
                imagined[imagined_observation(obs_text, action, pred.delta)] = predicted
            return pred

        return predict
