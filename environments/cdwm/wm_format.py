"""The trained delta world model's text format: what it reads (a short chat prompt per transition)
and what it writes (one `DeltaPrediction` JSON object, one line), and the JSON schema its decoding
is held to -- with the dimensions a (learned) mask forbids removed, so that under constrained
decoding a masked field cannot be emitted at all.

Training (`wm_train.py`) and evaluation (`wm_eval.py`) both build their text here, so the model is
asked at inference exactly what it was trained on. The target is written the way the engine's
grammar writes JSON (`any_whitespace=False`: `", "` and `": "` separators, properties in schema
order), so a trained reply is also a reply the grammar allows.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from environments.cdwm.deltas import PREDICTION_SCHEMA, Delta
from harness.environment import DIMENSIONS
from harness.structured import bounded

PROMPT_FORMAT = "harness-cdwm-wm/1"  # enters checkpoints: an adapter is only asked in the format it was trained on
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


def messages(row: dict[str, Any], obs_chars: int = 700) -> list[dict[str, str]]:
    """The chat messages that ask for one transition's delta (a dataset row of `harness cdwm collect`)."""
    obs = str(row["observation"])
    if len(obs) > obs_chars:
        obs = obs[:obs_chars] + " ..."
    user = (
        f"World: {row['world']}\nTask: {row['intent']}\nObservation:\n{obs}\n"
        f"Action: {row['action']}\nAction class: {row['action_class']}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def target_parts(delta: Delta) -> tuple[str, str]:
    """The reply for a ground-truth delta, split where the confidence's value starts: (everything
    before it, the rest). SFT trains on the first part and on the closing brace, not on the
    confidence value (SFT has no signal for it: every collected delta is right by definition;
    calibrating it is post-training's job, issue 40 item 4)."""
    body: dict[str, Any] = {
        "created": list(delta.created),
        "deleted": list(delta.deleted),
        "attributes": [
            {"entity": a.entity, "attribute": a.attribute, "before": a.before, "after": a.after}
            for a in delta.attributes
        ],
        "relations_added": [
            {"subject": r.subject, "relation": r.relation, "object": r.object} for r in delta.relations_added
        ],
        "relations_removed": [
            {"subject": r.subject, "relation": r.relation, "object": r.object} for r in delta.relations_removed
        ],
        "reversible": bool(delta.reversible),
        "irreversible_cost": _number(delta.irreversible_cost),
    }
    text = json.dumps(body, ensure_ascii=False)
    return text[:-1] + ', "confidence": ', "1}"


def fits(delta: Delta) -> bool:
    """Whether the decoding schema can hold this delta (lists of at most MAX_ITEMS)."""
    return all(len(getattr(delta, d)) <= MAX_ITEMS for d in LISTS)


def prediction_schema(allowed: Iterable[str] | None = None) -> dict[str, Any]:
    """The schema a prediction is decoded under: every property required, in `ORDER`; lists of at
    most MAX_ITEMS, strings of at most MAX_STRING. A dimension not in `allowed` cannot be written:
    its list must be empty (`maxItems: 0`), and without `irreversible` the prediction is reversible
    with cost 0. `allowed=None`: nothing is masked."""
    schema = bounded(copy.deepcopy(PREDICTION_SCHEMA), max_length=MAX_STRING, max_items=MAX_ITEMS)
    props = schema["properties"]
    schema["properties"] = {k: props[k] for k in ORDER}
    schema["required"] = list(ORDER)
    schema["additionalProperties"] = False
    if allowed is None:
        return schema
    dims = set(allowed)
    for dim in LISTS:
        if dim not in dims:
            schema["properties"][dim] = {"type": "array", "maxItems": 0}
    if "irreversible" not in dims:
        schema["properties"]["reversible"] = {"type": "boolean", "enum": [True]}
        schema["properties"]["irreversible_cost"] = {"type": "integer", "enum": [0]}
    return schema


def class_key(world: str, action_class: str) -> str:
    """The mask's key for an action class: classes are per world (`toggle` in MiniGrid is not the
    household's)."""
    return f"{world}/{action_class.lower()}"
