"""Scenario blueprints for the live ProactBench loop (`proact-live`): schema and loader.

A blueprint is what the Planner works from -- persona, hidden goal, explicit request, the 3-5
implicit anchors the user will disclose one at a time, the ideal trajectory and the done signal.
The project's own set is `corpora/proact/blueprints.jsonl`; a folder of `*blueprints.jsonl`
files works too. Every row is validated against
BLUEPRINT_SCHEMA; the first bad row stops loading with one line naming file:line and field,
in the same style as `corpora.proactbench`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, TypedDict, cast

import jsonschema
from pydantic import JsonValue

from corpora.validation import check_schema, parse_jsonl, read_text
from harness.errors import HarnessError

HERE = Path(__file__).resolve().parent / "proact"
DEFAULT_BLUEPRINTS = HERE / "blueprints.jsonl"
BLUEPRINT_GLOB = "*blueprints.jsonl"
CATEGORIES = ("professional_persona", "sports_persona", "arts_persona", "travel_persona", "culinary_persona")

_TEXT: dict[str, JsonValue] = {"type": "string", "minLength": 1, "pattern": r"\S"}

BLUEPRINT_SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "required": ["blueprint_id", "scenario_id", "category_key", "persona", "hidden_goal", "explicit_request",
                 "implicit_anchors", "ideal_trajectory", "done_signal"],
    "properties": {
        # No double underscore: the id is joined with `__style{i}__{uuid}` into unique_id_eval.
        "blueprint_id": {"type": "string", "pattern": r"^[A-Za-z0-9]+(_[A-Za-z0-9]+)*$"},
        "scenario_id": {"type": "string", "pattern": r"^[A-Za-z0-9]+(_[A-Za-z0-9]+)*$"},
        "category_key": {"enum": [*CATEGORIES]},
        "persona": {
            "type": "object",
            "required": ["name", "background", "situation"],
            "properties": {"name": _TEXT, "background": _TEXT, "situation": _TEXT},
        },
        "hidden_goal": _TEXT,
        "explicit_request": _TEXT,
        "implicit_anchors": {
            "type": "array",
            "minItems": 3,
            "maxItems": 5,
            "items": {
                "type": "object",
                "required": ["id", "detail", "implies"],
                "properties": {"id": {"type": "string", "pattern": r"^A[1-9]$"}, "detail": _TEXT, "implies": _TEXT},
            },
        },
        "ideal_trajectory": {"type": "array", "minItems": 1, "items": _TEXT},
        "done_signal": _TEXT,
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(BLUEPRINT_SCHEMA)


# The row as its file holds it, once BLUEPRINT_SCHEMA has passed it. TypedDicts, not models: the
# loop reads the blueprint's fields and writes nothing back, and a row keeps any other key.
class Persona(TypedDict):
    name: str
    background: str
    situation: str


class Anchor(TypedDict):
    """One implicit anchor: a detail the user discloses in passing, and the need it implies."""
    id: str  # A1 .. A9
    detail: str
    implies: str


class Blueprint(TypedDict):
    blueprint_id: str
    scenario_id: str
    category_key: str
    persona: Persona
    hidden_goal: str
    explicit_request: str
    implicit_anchors: list[Anchor]
    ideal_trajectory: list[str]
    done_signal: str


def validate_blueprint(row: Any, where: str) -> Blueprint:
    """Schema plus the cross-field facts the loop relies on (anchor ids unique). `where` is file:line."""
    check_schema(_VALIDATOR, row, where, "blueprint")
    seen: set[str] = set()
    for i, anchor in enumerate(row["implicit_anchors"]):
        if anchor["id"] in seen:
            raise HarnessError(f"{where}: field `implicit_anchors[{i}].id` repeats {anchor['id']!r}; anchor ids must be unique")
        seen.add(anchor["id"])
    return cast(Blueprint, row)  # parsed JSON, held by the schema to this shape


def blueprint_files(source: str | Path | None) -> list[Path]:
    """The files a source names: a file, a folder of `*blueprints.jsonl` files, or (None) the
    project's own `corpora/proact/blueprints.jsonl`."""
    path = Path(source) if source is not None else DEFAULT_BLUEPRINTS
    if path.is_dir():
        files = sorted(path.glob(BLUEPRINT_GLOB))
        if not files:
            raise HarnessError(f"blueprint folder {path} has no {BLUEPRINT_GLOB} files: pass --corpus PATH to a blueprints.jsonl file")
        return files
    if not path.exists():
        raise HarnessError(f"blueprint file {path} not found: pass --corpus PATH to a blueprints.jsonl file")
    return [path]


def load_blueprints(source: str | Path | None = None) -> tuple[list[Blueprint], dict[str, JsonValue]]:
    """Blueprints (in file order) and the corpus identity for the manifest (path, sha256 over
    every file read)."""
    files = blueprint_files(source)
    rows: list[Blueprint] = []
    seen: dict[str, str] = {}
    digest = hashlib.sha256()
    for path in files:
        text = read_text(path, "blueprint file", "pass --corpus PATH to a blueprints.jsonl file")
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
        rows += parse_jsonl(text, path, validate_blueprint, "blueprint_id", seen)
    if not rows:
        raise HarnessError(f"blueprint source {files[0] if len(files) == 1 else files[0].parent} has no rows: "
                           f"pass --corpus PATH to a non-empty blueprints.jsonl")
    path_text = str(files[0].resolve()) if len(files) == 1 else f"{files[0].parent.resolve()}/{BLUEPRINT_GLOB}"
    return rows, {"path": path_text, "files": [str(p.resolve()) for p in files], "sha256": digest.hexdigest()}
