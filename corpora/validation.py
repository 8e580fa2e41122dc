"""One way to turn a JSON-schema failure into the one-line error users get: file:line, field, fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import jsonschema

from harness.errors import HarnessError


def field_path(error: jsonschema.ValidationError) -> str:
    """`trigger_points[0].evaluation_rubric.type`; for a missing field, the field itself."""
    path = ""
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        path = f"{path}.{missing}" if path else missing
    return path or "(row)"


def check_schema(validator: jsonschema.protocols.Validator, row: Any, where: str, noun: str) -> None:
    """Raise HarnessError for the most relevant schema violation of `row`, if any."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(row))
    if error is not None:
        what = "is missing" if error.validator == "required" else f"is invalid: {error.message}"
        raise HarnessError(f"{where}: field `{field_path(error)}` {what}; fix the {noun} or remove it")


def parse_jsonl(text: str, source: Any, validate: Callable[[Any, str], Any], id_field: str,
                seen: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Rows of one JSONL text, each validated; the first bad line or repeated id raises one line
    naming `source:line`. Pass the same `seen` over several files to keep ids unique across them."""
    seen = {} if seen is None else seen
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix the line") from exc
        validate(row, where)
        key = row[id_field]
        if key in seen:
            raise HarnessError(f"{where}: field `{id_field}` {key!r} repeats {seen[key]}; ids must be unique")
        seen[key] = where
        rows.append(row)
    return rows
