"""Scenario blueprints for the live ProactBench loop (`proact-live`): schema and loader.

A blueprint is what the Planner works from -- persona, hidden goal, explicit request, the 3-5
implicit anchors the user will disclose one at a time, the ideal trajectory and the done signal.
Blueprints are written in parts (`corpora/proact/parts/*.blueprints.jsonl`) and merged into
`corpora/proact/blueprints.jsonl`; until the merged file exists the loader reads the parts, so
the suite works while the corpus is still being written. Every row is validated against
BLUEPRINT_SCHEMA; the first bad row stops loading with one line naming file:line and field,
in the same style as `corpora.proactbench`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema

from harness.errors import HarnessError

HERE = Path(__file__).resolve().parent / "proact"
DEFAULT_BLUEPRINTS = HERE / "blueprints.jsonl"
PARTS_DIR = HERE / "parts"
PARTS_GLOB = "*.blueprints.jsonl"
CATEGORIES = ("professional_persona", "sports_persona", "arts_persona", "travel_persona", "culinary_persona")

_TEXT = {"type": "string", "minLength": 1, "pattern": r"\S"}

BLUEPRINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["blueprint_id", "scenario_id", "category_key", "persona", "hidden_goal", "explicit_request",
                 "implicit_anchors", "ideal_trajectory", "done_signal"],
    "properties": {
        # No double underscore: the id is joined with `__style{i}__{uuid}` into unique_id_eval.
        "blueprint_id": {"type": "string", "pattern": r"^[A-Za-z0-9]+(_[A-Za-z0-9]+)*$"},
        "scenario_id": {"type": "string", "pattern": r"^[A-Za-z0-9]+(_[A-Za-z0-9]+)*$"},
        "category_key": {"enum": list(CATEGORIES)},
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


def _field_path(error: jsonschema.ValidationError) -> str:
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        path = f"{path}.{missing}" if path else missing
    return path or "(row)"


def validate_blueprint(row: Any, where: str) -> dict[str, Any]:
    """Schema plus the cross-field facts the loop relies on (anchor ids unique). `where` is file:line."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(row))
    if error is not None:
        what = "is missing" if error.validator == "required" else f"is invalid: {error.message}"
        raise HarnessError(f"{where}: field `{_field_path(error)}` {what}; fix the blueprint or remove it")
    seen: set[str] = set()
    for i, anchor in enumerate(row["implicit_anchors"]):
        if anchor["id"] in seen:
            raise HarnessError(f"{where}: field `implicit_anchors[{i}].id` repeats {anchor['id']!r}; anchor ids must be unique")
        seen.add(anchor["id"])
    return row


def blueprint_files(source: str | Path | None) -> list[Path]:
    """The files a source names: a file, a folder of parts, or (None) the merged default with
    the parts as fallback."""
    if source is not None:
        path = Path(source)
        if path.is_dir():
            files = sorted(path.glob(PARTS_GLOB)) or sorted(path.glob("*.jsonl"))
        elif path.exists():
            files = [path]
        else:
            raise HarnessError(f"blueprint file {path} not found: pass --corpus PATH to a blueprints.jsonl file")
        if not files:
            raise HarnessError(f"blueprint folder {path} has no *.jsonl files: pass --corpus PATH to a blueprints.jsonl file")
        return files
    if DEFAULT_BLUEPRINTS.exists():
        return [DEFAULT_BLUEPRINTS]
    files = sorted(PARTS_DIR.glob(PARTS_GLOB))
    if not files:
        raise HarnessError(
            f"no blueprints yet: neither {DEFAULT_BLUEPRINTS} nor {PARTS_DIR}/{PARTS_GLOB} exists; "
            f"pass --corpus PATH to a blueprints.jsonl file"
        )
    return files


def load_blueprints(source: str | Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Blueprints (in file order) and the corpus identity (path, sha256 over every file read)."""
    files = blueprint_files(source)
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        digest.update(path.name.encode() + b"\0" + data)
        for lineno, line in enumerate(data.decode("utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise HarnessError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix the line") from exc
            validate_blueprint(row, where)
            bid = row["blueprint_id"]
            if bid in seen:
                raise HarnessError(f"{where}: field `blueprint_id` {bid!r} repeats {seen[bid]}; ids must be unique")
            seen[bid] = where
            rows.append(row)
    if not rows:
        raise HarnessError(f"blueprint source {files[0] if len(files) == 1 else files[0].parent} has no rows: "
                           f"pass --corpus PATH to a non-empty blueprints.jsonl")
    path_text = str(files[0].resolve()) if len(files) == 1 else f"{files[0].parent.resolve()}/{PARTS_GLOB}"
    return rows, {"path": path_text, "files": [str(p.resolve()) for p in files], "sha256": digest.hexdigest()}
