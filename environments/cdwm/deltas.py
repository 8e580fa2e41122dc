"""CDWM's typed deltas: what one action changed, over an entity / attribute / relation graph.

The one schema shared by every CDWM environment (web ledger, household, science) as ground truth,
by the CDWM agent's world model as its prediction (`PREDICTION_SCHEMA`, validated with jsonschema),
and by the metrics (delta F1 over facts). Facts are compared as normalised tuples, so a prediction
and a ledger entry agree when they name the same entity, attribute and new value (or relation).

    ("create", entity)                         an entity came into existence (e.g. "order:17")
    ("delete", entity)                         it ceased to exist
    ("attr", entity, attribute, value)         the attribute now has this value
    ("rel+", subject, relation, object)        a relation was added
    ("rel-", subject, relation, object)        a relation was removed
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import BaseModel, Field


class AttributeChange(BaseModel):
    entity: str
    attribute: str
    before: Any = None
    after: Any = None


class Relation(BaseModel):
    subject: str
    relation: str
    object: str


class Delta(BaseModel):
    """The change one action made (ground truth) or is predicted to make."""

    created: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    attributes: list[AttributeChange] = Field(default_factory=list)
    relations_added: list[Relation] = Field(default_factory=list)
    relations_removed: list[Relation] = Field(default_factory=list)
    reversible: bool = True
    irreversible_cost: float = 0.0  # in the environment's own unit (e.g. money lost); 0 when reversible
    confidence: float | None = None  # predictions only: P(this delta is right), in [0, 1]

    def facts(self) -> set[tuple]:
        out: set[tuple] = {("create", _norm(e)) for e in self.created} | {("delete", _norm(e)) for e in self.deleted}
        out |= {("attr", _norm(a.entity), _norm(a.attribute), _norm(a.after)) for a in self.attributes}
        out |= {("rel+", _norm(r.subject), _norm(r.relation), _norm(r.object)) for r in self.relations_added}
        out |= {("rel-", _norm(r.subject), _norm(r.relation), _norm(r.object)) for r in self.relations_removed}
        return out

    def is_empty(self) -> bool:
        return not self.facts()


def merge(deltas: list[Delta]) -> Delta:
    """Several ledger entries of one action as one delta (irreversible if any part is)."""
    out = Delta()
    for d in deltas:
        out.created += d.created
        out.deleted += d.deleted
        out.attributes += d.attributes
        out.relations_added += d.relations_added
        out.relations_removed += d.relations_removed
        out.reversible = out.reversible and d.reversible
        out.irreversible_cost += d.irreversible_cost
    return out


def _norm(value: Any) -> str:
    """Facts compare case- and whitespace-insensitively; numbers by value (2 == 2.0 == "2")."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"{float(value):g}"
    text = " ".join(str(value).split()).lower()
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def delta_f1(predicted: Delta, actual: Delta) -> dict[str, float]:
    """Precision, recall and F1 of the predicted facts against the actual ones. Two empty deltas
    agree perfectly (predicting "nothing changes" for a no-op is right)."""
    p, a = predicted.facts(), actual.facts()
    if not p and not a:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    hit = len(p & a)
    precision = hit / len(p) if p else 0.0
    recall = hit / len(a) if a else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def glob_match(pattern: Any, value: Any) -> bool:
    """A case- and whitespace-insensitive shell glob (task files name entities like `order:*`)."""
    return fnmatch.fnmatchcase(" ".join(str(value).split()).lower(), " ".join(str(pattern).split()).lower())


def fact_matches(predicate: dict[str, Any], fact: tuple) -> bool:
    """Whether a fact (see `Delta.facts`) meets a predicate such as {"kind": "attr", "entity":
    "order:*", "attribute": "status", "value": "cancelled"}; keys the fact lacks never match."""
    kind = fact[0]
    if "kind" in predicate and predicate["kind"] != kind:
        return False
    fields = {"entity": fact[1]} if kind in ("create", "delete") else (
        {"entity": fact[1], "attribute": fact[2], "value": fact[3]} if kind == "attr"
        else {"entity": fact[1], "relation": fact[2], "object": fact[3]})
    for key in ("entity", "attribute", "value", "relation", "object"):
        if key in predicate and (key not in fields or not glob_match(predicate[key], fields[key])):
            return False
    return True


# The JSON schema a world model's prediction must satisfy (validated with jsonschema; invalid
# output is retried a bounded number of times by the caller and then counted as a failed prediction).
_REL = {"type": "object", "required": ["subject", "relation", "object"],
        "properties": {"subject": {"type": "string"}, "relation": {"type": "string"}, "object": {"type": "string"}}}
PREDICTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["reversible", "confidence"],
    "properties": {
        "created": {"type": "array", "items": {"type": "string"}},
        "deleted": {"type": "array", "items": {"type": "string"}},
        "attributes": {"type": "array", "items": {
            "type": "object", "required": ["entity", "attribute", "after"],
            "properties": {"entity": {"type": "string"}, "attribute": {"type": "string"}}}},
        "relations_added": {"type": "array", "items": _REL},
        "relations_removed": {"type": "array", "items": _REL},
        "reversible": {"type": "boolean"},
        "irreversible_cost": {"type": "number", "minimum": 0},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
}
