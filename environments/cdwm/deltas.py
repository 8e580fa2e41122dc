"""CDWM's typed deltas: the one schema shared by every CDWM environment (web ledger, household,
science) as ground truth, by the CDWM agent's world model as its prediction, and by the metrics.

`Delta`, its parts, `DeltaPrediction` and `PREDICTION_SCHEMA` (generated from it) live in the core
(`harness.environment`, with the fact tuples `Delta.facts` compares); this module re-exports them
and adds what environments and metrics do with deltas: merging a step's ledger entries, delta F1,
and matching facts against a task's predicates.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import JsonValue

from harness.environment import (
    PREDICTION_SCHEMA,
    AttributeChange,
    Delta,
    DeltaPrediction,
    Relation,
)

__all__ = ["PREDICTION_SCHEMA", "AttributeChange", "Delta", "DeltaPrediction", "Relation", "delta_f1",
           "fact_matches", "glob_match", "merge"]


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


def fact_matches(predicate: dict[str, JsonValue], fact: tuple[str, ...]) -> bool:
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
