"""Loader for corpora in the official ProactBench release format (`final_dialogues.jsonl`).

Accepts a JSONL path, a folder of dialogue JSONL files, or, where the network allows, a Hugging
Face dataset id (its `final_dialogues.jsonl` is fetched and read as a file). Every row is
validated against ROW_SCHEMA and then read into the typed `CorpusRow` (`corpora.proact_types`);
the first bad row stops loading with one line naming the file, the line and the field.
Unreadable input (a folder without dialogue files, a binary or non-UTF-8 file, a source that
holds no rows) is one line too, naming the input and the fix.

Two layouts of a row are accepted (`row_layout`): `labelled`, where every trigger carries a
curation-time `evaluation_result` (the project's own corpus, copies of the release from before
its labels were removed, `harness corpus build` output), and `rubrics`, the release's current
layout, where a trigger is only `{turn, evaluation_rubric}` and the row has no `trigger_stats`.
A row in between (some triggers labelled, counts without labels) or a row of another file kind
(a per-model results row) is one error naming the file, the line and what is missing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pydantic
from pydantic import JsonValue

from corpora.proact_types import TRIGGER_TYPES, CorpusRow
from corpora.validation import check_schema, parse_jsonl, read_text
from harness.errors import HarnessError, invalid

DEFAULT_CORPUS = Path(__file__).resolve().parent / "proact" / "dialogues.jsonl"
_FIX = "pass --corpus PATH to a final_dialogues.jsonl file (or a folder of them)"

# The Hugging Face dataset ids the release names: the evaluation code, its docs and smoke test
# load `bosonai/proactbench`; the release's staging script uploads to `boson-ai/proactbench-data`
# (that repository also holds eval/ and human_eval/, so only the corpus file is fetched).
RELEASE_DATASET_IDS = ("bosonai/proactbench", "boson-ai/proactbench-data")
HUB_CORPUS_FILE = "final_dialogues.jsonl"

Layout = Literal["labelled", "rubrics"]
LAYOUT_NAMES: dict[str, str] = {
    "labelled": "labelled (every trigger carries a curation-time evaluation_result)",
    "rubrics": "rubrics only (the release's current layout: trigger_points[] = {turn, evaluation_rubric})",
}
_LAYOUTS_HELP = ("a corpus row is either in the release's current layout (trigger_points[] = {turn, "
                 "evaluation_rubric}, no trigger_stats) or labelled (an evaluation_result on every trigger)")

_RUBRIC: dict[str, JsonValue] = {
    "type": "object",
    "required": ["type", "pass_criteria", "partial_criteria", "fail_criteria"],
    "properties": {
        "type": {"enum": [*TRIGGER_TYPES]},
        "pass_criteria": {"type": "string", "minLength": 1},
        "partial_criteria": {"type": "string", "minLength": 1},
        "fail_criteria": {"type": "string", "minLength": 1},
    },
}
_USAGE: dict[str, JsonValue] = {
    "type": "object",
    "properties": {k: {"type": "integer", "minimum": 0} for k in ("prompt_tokens", "completion_tokens", "calls")},
}

ROW_SCHEMA: dict[str, JsonValue] = {
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


def _not_a_corpus_row(row: Any, where: str) -> None:
    """A row of another kind of file, said as such before the schema names one field of it: a
    per-model results row keeps only the trigger turns, each beside the curated reply."""
    if not isinstance(row, dict):
        return
    records = row.get("turn_records")
    if isinstance(records, list) and any(isinstance(t, dict) and "original_assistant_response" in t for t in records):
        raise HarnessError(f"{where}: a per-model results row (turn_records carry original_assistant_response), "
                           f"in neither corpus layout: {_LAYOUTS_HELP}, with every turn up to the last trigger; "
                           f"read a results file with `harness proact metrics FILE`")
    triggers = row.get("trigger_points")
    if isinstance(triggers, list):
        for i, tp in enumerate(triggers):
            if isinstance(tp, dict) and "evaluation_rubric" not in tp:
                raise HarnessError(f"{where}: field `trigger_points[{i}].evaluation_rubric` is missing, so the row is "
                                   f"in neither corpus layout: {_LAYOUTS_HELP}; both need the rubric on every trigger")


def row_layout(row: CorpusRow, where: str) -> Layout:
    """Which layout a row is in; a row in neither is one error saying what is missing."""
    labelled = [i for i, tp in enumerate(row.trigger_points) if tp.evaluation_result is not None]
    if not labelled:
        if row.trigger_stats is not None:
            raise HarnessError(f"{where}: field `trigger_stats` is set but no trigger carries an evaluation_result, "
                               f"so the row is in neither corpus layout: {_LAYOUTS_HELP}; drop trigger_stats, "
                               f"or add the labels it counts")
        return "rubrics"
    unlabelled = [i for i in range(len(row.trigger_points)) if i not in labelled]
    if unlabelled:
        raise HarnessError(f"{where}: field `trigger_points[{unlabelled[0]}].evaluation_result` is missing while "
                           f"trigger_points[{labelled[0]}] has one, so the row is in neither corpus layout: "
                           f"{_LAYOUTS_HELP}; label every trigger or none")
    return "labelled"


def validate_row(row: Any, where: str) -> CorpusRow:
    """Schema, the typed model, the layout (`row_layout`) and the cross-field facts the protocol
    relies on. `where` is `file:line`. Returns the typed row."""
    _not_a_corpus_row(row, where)
    check_schema(_VALIDATOR, row, where, "row")
    try:
        typed = CorpusRow.model_validate(row)
    except pydantic.ValidationError as exc:
        raise HarnessError(invalid(exc, where, "fix the row or remove it")) from exc
    row_layout(typed, where)
    turns = {t.turn for t in typed.turn_records}
    for i, tp in enumerate(typed.trigger_points):
        if tp.turn not in turns:
            raise HarnessError(
                f"{where}: field `trigger_points[{i}].turn` is {tp.turn} but turn_records has no such turn; fix the row"
            )
        missing = [t for t in range(1, tp.turn) if t not in turns]
        if missing:
            raise HarnessError(
                f"{where}: field `turn_records` lacks turn(s) {missing} before trigger turn {tp.turn}; fix the row"
            )
    return typed


def _read_row(raw: Any, where: str) -> tuple[dict[str, JsonValue], CorpusRow]:
    """A line's row as the file holds it, beside its typed form (`validate_row`)."""
    return raw, validate_row(raw, where)


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
                           f"a folder of them, or a Hugging Face dataset id ({' or '.join(RELEASE_DATASET_IDS)})")
    return [path]


def is_hub_id(source: str | Path | None) -> bool:
    """`owner/name` that is no existing path and no file name: a Hugging Face dataset id."""
    if source is None or Path(source).exists():
        return False
    text = str(source)
    return text.count("/") == 1 and not text.endswith((".jsonl", ".json")) and not text.startswith((".", "/"))


def hub_corpus_file(dataset_id: str) -> Path:
    """The dataset's `final_dialogues.jsonl`, fetched into the Hugging Face cache (reused offline
    once fetched). Only that file: the release's dataset repository holds other JSONL files too."""
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo_id=dataset_id, filename=HUB_CORPUS_FILE, repo_type="dataset"))
    except Exception as exc:  # noqa: BLE001 - any hub failure is one line for the user
        raise HarnessError(
            f"could not fetch {HUB_CORPUS_FILE} of Hugging Face dataset {dataset_id!r} ({type(exc).__name__}); "
            f"the release's ids are {' and '.join(RELEASE_DATASET_IDS)}; without network, download "
            f"{HUB_CORPUS_FILE} and pass --corpus PATH"
        ) from exc


def corpus_layout(rows: list[CorpusRow]) -> str:
    """`labelled`, `rubrics`, or `mixed` for a corpus whose rows differ (each row is in one)."""
    found = {row_layout(row, "") for row in rows}
    return found.pop() if len(found) == 1 else "mixed"


def load_rows(source: str | Path | None) -> tuple[list[dict[str, JsonValue]], dict[str, JsonValue]]:
    """Rows as the files hold them (checked by `validate_row`) and the corpus identity (path,
    sha256, layout) for the manifest. A folder is read file by file in name order, ids unique
    across its files; its sha256 covers every file read. A dataset id is read from its fetched
    file, so it is hashed like any file."""
    rows, identity = _load(source)
    return [raw for raw, _ in rows], identity


def load_typed_rows(source: str | Path | None) -> tuple[list[CorpusRow], dict[str, JsonValue]]:
    """`load_rows`, each row as its typed `CorpusRow`."""
    rows, identity = _load(source)
    return [typed for _, typed in rows], identity


def _load(source: str | Path | None) -> tuple[list[tuple[dict[str, JsonValue], CorpusRow]], dict[str, JsonValue]]:
    if is_hub_id(source):
        dataset_id = str(source)
        file = hub_corpus_file(dataset_id)
        rows, identity = _load_path(file)
        return rows, identity | {"path": f"hf:{dataset_id}", "file": str(file)}
    return _load_path(Path(source) if source is not None else DEFAULT_CORPUS)


def _load_path(path: Path) -> tuple[list[tuple[dict[str, JsonValue], CorpusRow]], dict[str, JsonValue]]:
    files = corpus_files(path)
    rows: list[tuple[dict[str, JsonValue], CorpusRow]] = []
    seen: dict[str, str] = {}
    digest = hashlib.sha256()
    for file in files:
        rows += parse_jsonl(read_text(file, "corpus file", _FIX), file, _read_row, "unique_id_eval", seen)
        if path.is_dir():
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
    if not rows:
        where = f"corpus folder {path} holds no rows in its {len(files)} .jsonl file(s)" if path.is_dir() \
            else f"corpus file {path} has no rows"
        raise HarnessError(f"{where}: pass --corpus PATH to a non-empty final_dialogues.jsonl")
    layout = corpus_layout([typed for _, typed in rows])
    if path.is_dir():
        return rows, {"path": str(path.resolve()), "files": [str(f.resolve()) for f in files],
                      "sha256": digest.hexdigest(), "layout": layout}
    return rows, {"path": str(path.resolve()), "sha256": _sha256(path), "layout": layout}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
