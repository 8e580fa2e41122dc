"""Loader for corpora in the official ProactBench release format (`final_dialogues.jsonl`).

Accepts a JSONL path, a folder of dialogue JSONL files, or, where the network allows, a Hugging
Face datasets id. Every row is validated against ROW_SCHEMA and then read into the typed
`CorpusRow` (`corpora.proact_types`); the first bad row stops loading with one line naming the
file, the line and the field. Unreadable input (a folder without dialogue files, a binary or
non-UTF-8 file, a source that holds no rows) is one line too, naming the input and the fix.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import jsonschema
import pydantic

from corpora.proact_types import TRIGGER_TYPES, CorpusRow
from corpora.validation import check_schema, parse_jsonl, read_text
from harness.errors import HarnessError

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

DEFAULT_CORPUS = Path(__file__).resolve().parent / "proact" / "dialogues.jsonl"
_FIX = "pass --corpus PATH to a final_dialogues.jsonl file (or a folder of them)"

_RUBRIC = {
    "type": "object",
    "required": ["type", "pass_criteria", "partial_criteria", "fail_criteria"],
    "properties": {
        "type": {"enum": list(TRIGGER_TYPES)},
        "pass_criteria": {"type": "string", "minLength": 1},
        "partial_criteria": {"type": "string", "minLength": 1},
        "fail_criteria": {"type": "string", "minLength": 1},
    },
}
_USAGE = {
    "type": "object",
    "properties": {k: {"type": "integer", "minimum": 0} for k in ("prompt_tokens", "completion_tokens", "calls")},
}

ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "blueprint_id", "scenario_id", "unique_id_eval", "category_key", "style_combination_index",
        "evaluated_model", "num_turns_completed", "trigger_points", "turn_records",
    ],
    "properties": {
        "blueprint_id": {"type": "string", "minLength": 1},
        "scenario_id": {"type": "string", "minLength": 1},
        "unique_id_eval": {"type": "string", "pattern": r"^.+__style\d{1,2}__.+$"},
        "uuid": {"type": "string"},
        "category_key": {"type": "string", "minLength": 1},
        "style_combination_index": {"type": "integer", "minimum": 1, "maximum": 24},
        "evaluated_model": {"type": "string"},
        "num_turns_completed": {"type": "integer", "minimum": 1, "maximum": 10},
        "trigger_points": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["turn", "evaluation_rubric"],
                "properties": {"turn": {"type": "integer", "minimum": 1}, "evaluation_rubric": _RUBRIC},
            },
        },
        "turn_records": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["turn", "user_message", "assistant_response"],
                "properties": {
                    "turn": {"type": "integer", "minimum": 1},
                    "user_message": {"type": "string", "minLength": 1},
                    "assistant_response": {"type": "string"},
                    "planner": {"type": ["object", "null"]},
                },
            },
        },
        "token_usage": {"type": "object", "additionalProperties": _USAGE},
        "trigger_stats": {"type": "object"},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(ROW_SCHEMA)


def _pydantic_field(error: ErrorDetails) -> str:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(row)"


def validate_row(row: Any, where: str) -> dict[str, Any]:
    """Schema, the typed model, and the cross-field facts the protocol relies on. `where` is
    `file:line`. Returns the row as it was read (a dict)."""
    check_schema(_VALIDATOR, row, where, "row")
    try:
        CorpusRow.model_validate(row)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise HarnessError(f"{where}: field `{_pydantic_field(first)}` is invalid: {first['msg']}; "
                           f"fix the row or remove it") from exc
    turns = {t["turn"] for t in row["turn_records"]}
    for i, tp in enumerate(row["trigger_points"]):
        if tp["turn"] not in turns:
            raise HarnessError(
                f"{where}: field `trigger_points[{i}].turn` is {tp['turn']} but turn_records has no such turn; fix the row"
            )
        missing = [t for t in range(1, tp["turn"]) if t not in turns]
        if missing:
            raise HarnessError(
                f"{where}: field `turn_records` lacks turn(s) {missing} before trigger turn {tp['turn']}; fix the row"
            )
    return cast(dict[str, Any], row)  # parsed JSON, held by the schema to be an object


def corpus_files(path: Path) -> list[Path]:
    """The dialogue files a path names: the file itself, or a folder's `*.jsonl` files other than
    blueprints (sorted by name)."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.jsonl") if "blueprint" not in p.name and p.is_file())
        if not files:
            raise HarnessError(f"corpus folder {path} holds no dialogue .jsonl files: {_FIX}")
        return files
    if not path.exists():
        raise HarnessError(f"corpus file {path} not found: pass --corpus PATH to a final_dialogues.jsonl file, "
                           f"a folder of them, or a Hugging Face dataset id such as bosonai/proactbench")
    return [path]


def load_rows(source: str | Path | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows and the corpus identity (path, sha256) for the manifest. A folder is read file by
    file in name order, ids unique across its files; its sha256 covers every file read."""
    path = Path(source) if source is not None else DEFAULT_CORPUS
    text = str(source)
    looks_like_hub_id = (source is not None and text.count("/") == 1 and not text.endswith((".jsonl", ".json"))
                         and not text.startswith((".", "/")))
    if not path.exists() and looks_like_hub_id:
        return _load_hub(text), {"path": f"hf:{text}", "sha256": None}
    files = corpus_files(path)
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    digest = hashlib.sha256()
    for file in files:
        rows += parse_jsonl(read_text(file, "corpus file", _FIX), file, validate_row, "unique_id_eval", seen)
        if path.is_dir():
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
    if not rows:
        where = f"corpus folder {path} holds no rows in its {len(files)} .jsonl file(s)" if path.is_dir() \
            else f"corpus file {path} has no rows"
        raise HarnessError(f"{where}: pass --corpus PATH to a non-empty final_dialogues.jsonl")
    if path.is_dir():
        return rows, {"path": str(path.resolve()), "files": [str(f.resolve()) for f in files],
                      "sha256": digest.hexdigest()}
    return rows, {"path": str(path.resolve()), "sha256": _sha256(path)}


def _load_hub(dataset_id: str) -> list[dict[str, Any]]:
    try:
        import datasets

        ds = datasets.load_dataset(dataset_id, split="train")
    except Exception as exc:  # noqa: BLE001 - any hub failure is one line for the user
        raise HarnessError(
            f"could not load Hugging Face dataset {dataset_id!r} ({type(exc).__name__}); "
            f"without network, download final_dialogues.jsonl and pass --corpus PATH"
        ) from exc
    rows = []
    for i, row in enumerate(ds):
        validate_row(row, f"hf:{dataset_id}[{i}]")
        rows.append(row)
    return rows


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
