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

import json

from pydantic import JsonValue

# The prompt, the schema and the class keys are the agent's too (agents/trained_world_model.py):
# one definition, so training, evaluation and the CDWM agent ask in the same text.
from agents.trained_world_model import (
    LISTS,
    MAX_ITEMS,
    MAX_STRING,
    ORDER,
    PROMPT_FORMAT,
    SYSTEM,
    class_key,
    prediction_schema,
    trained_messages,
)
from environments.cdwm.collect import TransitionRow
from environments.cdwm.deltas import Delta
from harness.messages import ChatMessage

__all__ = [
    "LISTS",
    "MAX_ITEMS",
    "MAX_STRING",
    "ORDER",
    "PROMPT_FORMAT",
    "SYSTEM",
    "class_key",
    "fits",
    "messages",
    "prediction_schema",
    "target_parts",
]


def messages(row: TransitionRow, obs_chars: int = 700) -> list[ChatMessage]:
    """The chat messages that ask for one transition's delta (a dataset row of `harness cdwm collect`)."""
    return trained_messages(
        str(row["world"]),
        str(row["intent"]),
        str(row["observation"]),
        str(row["action"]),
        str(row["action_class"]),
        obs_chars,
    )


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def target_parts(delta: Delta) -> tuple[str, str]:
    """The reply for a ground-truth delta, split where the confidence's value starts: (everything
    before it, the rest). SFT trains on the first part and on the closing brace, not on the
    confidence value (SFT has no signal for it: every collected delta is right by definition;
    calibrating it is post-training's job, issue 40 item 4)."""
    body: dict[str, JsonValue] = {
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
