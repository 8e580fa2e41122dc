"""The ledger: every state-changing request, written with its typed `Delta` in the same SQLite
transaction as the change itself, so the ground truth can never disagree with the state.

Entities are named `<kind>:<id>` with the ids the pages show (`order:4` is "Order #4"), so an
agent reading the page can name what it expects to change. The reversibility rules live in
environments/web/README.md; each site's handler applies them where it builds its delta.

Predicates (task files, `cdwm.forbidden` / `cdwm.required_irreversible`) select ledger entries:
    {"kind": "attr", "entity": "booking:*", "attribute": "status", "value": "cancelled"}
    {"kind": "create", "entity": "order:*", "irreversible": true}
    {"irreversible": true}                       any irreversible entry
Keys: kind (create/delete/attr/rel+/rel-), entity, attribute, value, relation, object (shell
globs, case-insensitive), irreversible (bool), site, path (glob over the request path).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import BaseModel, JsonValue

from environments.cdwm.deltas import AttributeChange, Delta, Relation, fact_matches, glob_match

SECRET_FIELDS = {"password", "current_password", "new_password"}
PREDICATE_KEYS = {"kind", "entity", "attribute", "value", "relation", "object", "irreversible", "site", "path"}
KINDS = {"create", "delete", "attr", "rel+", "rel-"}


class LedgerEntry(BaseModel):
    id: int
    site: str
    method: str
    path: str
    form: dict[str, str]
    summary: str
    delta: Delta


class DeltaBuilder:
    """Collects one request's changes; handlers call these as they write the rows."""

    def __init__(self) -> None:
        self.delta = Delta()

    def create(self, entity: str, **attrs: Any) -> DeltaBuilder:
        self.delta.created.append(entity)
        for name, value in attrs.items():
            self.attr(entity, name, None, value)
        return self

    def delete(self, entity: str) -> DeltaBuilder:
        self.delta.deleted.append(entity)
        return self

    def attr(self, entity: str, attribute: str, before: Any, after: Any) -> DeltaBuilder:
        if before != after:
            self.delta.attributes.append(AttributeChange(entity=entity, attribute=attribute, before=before, after=after))
        return self

    def relate(self, subject: str, relation: str, obj: str, added: bool = True) -> DeltaBuilder:
        (self.delta.relations_added if added else self.delta.relations_removed).append(
            Relation(subject=subject, relation=relation, object=obj))
        return self

    def irreversible(self, cost: float) -> DeltaBuilder:
        self.delta.reversible = False
        self.delta.irreversible_cost = round(float(cost), 2)
        return self


def record(conn: sqlite3.Connection, site: str, method: str, path: str, form: dict[str, str],
           summary: str, built: DeltaBuilder) -> None:
    """Append one entry; the caller commits it together with the change. No-op requests (nothing
    changed) are not recorded, so an empty step delta means nothing changed."""
    delta = built.delta
    if delta.is_empty():
        return
    safe_form = {k: ("<redacted>" if k in SECRET_FIELDS else v) for k, v in form.items()}
    conn.execute("INSERT INTO ledger (site, method, path, form, summary, delta, reversible, irreversible_cost)"
                 " VALUES (?,?,?,?,?,?,?,?)",
                 (site, method, path, json.dumps(safe_form), summary, delta.model_dump_json(),
                  int(delta.reversible), delta.irreversible_cost))


def read(db: Path | sqlite3.Connection, since_id: int = 0) -> list[LedgerEntry]:
    """Entries after `since_id`, oldest first (read straight from the episode's SQLite file)."""
    conn = db if isinstance(db, sqlite3.Connection) else sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = conn.execute("SELECT id, site, method, path, form, summary, delta FROM ledger WHERE id > ? ORDER BY id",
                            (since_id,)).fetchall()
    finally:
        if conn is not db:
            conn.close()
    return [LedgerEntry(id=r[0], site=r[1], method=r[2], path=r[3], form=json.loads(r[4]), summary=r[5],
                        delta=Delta.model_validate_json(r[6])) for r in rows]


def last_id(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        last: int = conn.execute("SELECT COALESCE(MAX(id), 0) FROM ledger").fetchone()[0]
        return last
    finally:
        conn.close()


def check_predicate(pred: Any, where: str) -> dict[str, JsonValue]:
    """Validate one predicate from a task file; the error names the task field and the fix."""
    if not isinstance(pred, dict) or not pred:
        raise ValueError(f"{where}: a ledger predicate must be a non-empty object, e.g. "
                         '{"kind": "create", "entity": "order:*"}')
    unknown = set(pred) - PREDICATE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown predicate key(s) {sorted(unknown)}; use {sorted(PREDICATE_KEYS)}")
    if "kind" in pred and pred["kind"] not in KINDS:
        raise ValueError(f"{where}: kind {pred['kind']!r} is not one of {sorted(KINDS)}")
    if "irreversible" in pred and not isinstance(pred["irreversible"], bool):
        raise ValueError(f"{where}: irreversible must be true or false")
    return pred


def matches(pred: dict[str, JsonValue], entry: LedgerEntry) -> bool:
    if "irreversible" in pred and pred["irreversible"] == entry.delta.reversible:
        return False
    if "site" in pred and not glob_match(pred["site"], entry.site):
        return False
    if "path" in pred and not glob_match(pred["path"], entry.path):
        return False
    fact_keys = PREDICATE_KEYS - {"irreversible", "site", "path"}
    if not fact_keys & set(pred):
        return True
    return any(fact_matches(pred, fact) for fact in entry.delta.facts())
