"""One way to turn a JSON-schema failure into the one-line error users get: file:line, field, fix."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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


def read_text(path: Path, what: str, fix: str) -> str:
    """A JSONL file's text, or one HarnessError line naming the file, what is wrong and `fix`
    (for a folder, a binary or compressed file, or bytes that are not UTF-8). A UTF-8 byte
    order mark is dropped."""
    if path.is_dir():
        raise HarnessError(f"{what} {path} is a folder, not a file: {fix}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"{what} {path} cannot be read ({exc.strerror or type(exc).__name__}): {fix}") from exc
    if data.startswith(b"\x1f\x8b"):
        raise HarnessError(f"{what} {path} is gzip-compressed, not JSONL text: decompress it (gunzip) and pass the .jsonl")
    if b"\0" in data:
        raise HarnessError(f"{what} {path} is a binary file (it holds NUL bytes), not JSONL text: {fix}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise HarnessError(f"{what} {path}:{line}: byte 0x{data[exc.start]:02x} is not UTF-8 text; "
                           f"re-save the file as UTF-8 (e.g. iconv -t UTF-8) or {fix}") from exc


Row = TypeVar("Row")


def parse_jsonl(text: str, source: Any, validate: Callable[[Any, str], Row], id_field: str,
                seen: dict[str, str] | None = None) -> list[Row]:
    """Rows of one JSONL text, each as `validate` returns it; the first bad line or repeated id
    raises one line naming `source:line`. Pass the same `seen` over several files to keep ids
    unique across them."""
    seen = {} if seen is None else seen
    rows = []
    for _, where, raw in json_lines(text, source):
        row = validate(raw, where)
        key = raw[id_field]
        if key in seen:
            raise HarnessError(f"{where}: field `{id_field}` {key!r} repeats {seen[key]}; ids must be unique")
        seen[key] = where
        rows.append(row)
    return rows


def json_lines(text: str, source: str) -> Iterator[tuple[int, str, Any]]:
    """(line number, `source:line`, parsed JSON) per non-blank line; a line that is not JSON is one
    error naming `source:line`. Split on newlines only: str.splitlines() would also cut inside a
    JSON string holding a raw U+2028 or U+0085, which `json.dumps(..., ensure_ascii=False)` writes."""
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            yield lineno, where, json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix the line") from exc
