"""A trained delta world model (`harness cdwm train`'s adapter) as the CDWM agent's world model:
asked in the exact text it was trained on and decoded under its learned mask's grammar.

The format lives here, in `agents/`, because the agent asks it and agents may not import
`environments`; `environments/cdwm/wm_format.py` (training and evaluation) builds its text from
these same functions, so an adapter is asked at inference what it was trained on. The adapter
folder holds `cdwm_train.json` (the prompt format, the base model, the classes it was trained on)
and `cdwm_mask.json` (the learned gates per `world/class` and dimension); both are read without
torch. The weights are served by the model spec of the run's `world_model` role
(`local/smollm2-135m@DIR#all-token`), never loaded here.

What the agent gets from it is a `Prediction` like the prompted world model's: the delta, its
reversibility and irreversible cost, and the confidence the model wrote (SFT does not train the
confidence -- docs/cdwm.md -- so abstention on it measures an untrained output until post-training).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from agents.episode import AgentConfig, Generate, policy_form
from agents.world_model import Prediction
from harness.environment import DIMENSIONS, PREDICTION_SCHEMA, Delta, DeltaPrediction
from harness.errors import HarnessError
from harness.messages import ChatMessage
from harness.providers.base import GenerateConfig
from harness.structured import ask_structured, bounded

PROMPT_FORMAT = "harness-cdwm-wm/1"  # enters checkpoints: an adapter is only asked in the format it was trained on
TRAIN_FILE = "cdwm_train.json"
MASK_FILE = "cdwm_mask.json"
MASK_THRESHOLD = 0.5  # a gate at or above it allows its dimension
SYSTEM = (
    "You are a world model. Predict what the action changes in the world's stored state, as one JSON "
    "object: created, deleted, attributes, relations_added, relations_removed, reversible, "
    "irreversible_cost, confidence."
)
ORDER = (
    "created",
    "deleted",
    "attributes",
    "relations_added",
    "relations_removed",
    "reversible",
    "irreversible_cost",
    "confidence",
)
LISTS = DIMENSIONS[:5]  # the list-valued dimensions; the sixth, `irreversible`, is reversible + cost
MAX_ITEMS = 8  # facts per list under decoding (a collected delta longer than this is skipped in training)
MAX_STRING = 60
OBS_CHARS = 700  # the observation characters the training prompt keeps


def trained_messages(
    world: str, intent: str, observation: str, action: str, action_class: str, obs_chars: int = OBS_CHARS
) -> list[ChatMessage]:
    """The chat messages that ask a trained world model for one transition's delta."""
    obs = observation if len(observation) <= obs_chars else observation[:obs_chars] + " ..."
    user = f"World: {world}\nTask: {intent}\nObservation:\n{obs}\nAction: {action}\nAction class: {action_class}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def prediction_schema(allowed: frozenset[str] | set[str] | None = None) -> dict[str, JsonValue]:
    """The schema a prediction is decoded under: every property required, in `ORDER`; lists of at
    most MAX_ITEMS, strings of at most MAX_STRING. A dimension not in `allowed` cannot be written:
    its list must be empty (`maxItems: 0`), and without `irreversible` the prediction is reversible
    with cost 0. `allowed=None`: nothing is masked."""
    base = bounded(copy.deepcopy(PREDICTION_SCHEMA), max_length=MAX_STRING, max_items=MAX_ITEMS)
    props: dict[str, JsonValue] = {k: base["properties"][k] for k in ORDER}
    if allowed is not None:
        for dim in LISTS:
            if dim not in allowed:
                props[dim] = {"type": "array", "maxItems": 0}
        if "irreversible" not in allowed:
            props["reversible"] = {"type": "boolean", "enum": [True]}
            props["irreversible_cost"] = {"type": "integer", "enum": [0]}
    # Keys the base schema has keep their place (the schema is part of a request's cache key).
    return {**base, "properties": props, "required": list(ORDER), "additionalProperties": False}


def class_key(world: str, action_class: str) -> str:
    """The mask's key for an action class: classes are per world (`toggle` in MiniGrid is not the
    household's)."""
    return f"{world}/{action_class.lower()}"


def read_gates(directory: Path) -> tuple[dict[str, dict[str, float]], float]:
    """The learned mask of an adapter folder: (class key -> dimension -> gate, threshold)."""
    path = directory / MASK_FILE
    if not path.is_file():
        raise HarnessError(
            f"{path}: missing; an adapter from `harness cdwm train` holds its learned mask there "
            f"(pass the adapter folder that `harness cdwm train --out` wrote, OUT/adapter)"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        gates = {str(k): {d: float(v[d]) for d in DIMENSIONS} for k, v in data["gates"].items()}
        return gates, float(data.get("threshold", MASK_THRESHOLD))
    except (ValueError, KeyError, TypeError) as exc:
        raise HarnessError(
            f"{path}: not a learned mask ({type(exc).__name__}: {exc}); re-export it with `harness cdwm train`"
        ) from exc


@dataclass
class TrainedWorldModel:
    """One world's view of a trained adapter: its prompt, its learned mask in the grammar."""

    directory: Path
    world: str
    gates: dict[str, dict[str, float]]
    threshold: float = MASK_THRESHOLD
    obs_chars: int = OBS_CHARS

    @classmethod
    def load(cls, directory: str | Path, world: str) -> "TrainedWorldModel":
        """The adapter in `directory` for `world`; one error naming the file when it is not an
        adapter of `harness cdwm train`, was trained in another prompt format, or has no action
        class of `world` (an adapter trained for another world's action classes)."""
        folder = Path(directory).expanduser()
        info = folder / TRAIN_FILE
        if not info.is_file():
            raise HarnessError(
                f"{info}: missing; pass the adapter folder `harness cdwm train --out OUT` wrote (OUT/adapter)"
            )
        try:
            trained = json.loads(info.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise HarnessError(f"{info}: not JSON ({exc}); re-export the adapter with `harness cdwm train`") from exc
        if trained.get("format") != PROMPT_FORMAT:
            raise HarnessError(
                f"{info}: prompt format {trained.get('format')!r}, not {PROMPT_FORMAT!r}; this agent cannot ask it "
                f"as it was trained"
            )
        classes = [str(c) for c in trained.get("classes", [])]
        if not any(c.startswith(f"{world}/") for c in classes):
            worlds = sorted({c.partition("/")[0] for c in classes})
            raise HarnessError(
                f"{info}: trained for the action classes of {', '.join(worlds) or 'no world'}, none of {world!r}; "
                f"train on {world} transitions (`harness cdwm collect --worlds {world}`) or use another adapter"
            )
        gates, threshold = read_gates(folder)
        obs_chars = int(trained.get("settings", {}).get("obs_chars", OBS_CHARS))
        return cls(folder, world, gates, threshold, obs_chars)

    def allowed(self, action_class: str) -> frozenset[str] | None:
        """The dimensions the learned mask lets this class touch; None for a class it never saw."""
        row = self.gates.get(class_key(self.world, action_class))
        return None if row is None else frozenset(d for d, g in row.items() if g >= self.threshold)

    async def predict(
        self, generate: Generate, intent: str, obs_text: str, action: str, action_class: str, cfg: AgentConfig
    ) -> Prediction:
        """The model's prediction, decoded under the class's masked schema; a class whose gates are
        all closed gets the empty delta without a call (`source = "mask"`, as the hand-written
        table's determined classes do)."""
        allowed = self.allowed(action_class)
        if allowed is not None and not allowed:
            return Prediction(Delta(confidence=1.0), "mask")
        messages = trained_messages(self.world, intent, obs_text, action, action_class, self.obs_chars)
        config = GenerateConfig(temperature=0.0, max_tokens=cfg.wm_max_tokens)
        reply = await ask_structured(
            generate,
            cfg.world_model_role,
            messages,
            DeltaPrediction,
            config,
            cfg.wm_attempts,
            form=policy_form(cfg),
            schema=prediction_schema(allowed),
            tool="predict",
        )
        if reply.error is not None:
            return Prediction(None, "invalid", reply.invalid, error=f"{cfg.world_model_role}: {reply.error}")
        if reply.value is None:
            return Prediction(None, "invalid", reply.invalid)
        return Prediction(reply.value.to_delta(), "world_model", reply.invalid)
