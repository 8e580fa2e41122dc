"""Mind2Web's official task format (Deng et al., 2023) and its loader.

A task: `annotation_id`, `website`, `domain`, `subdomain`, `confirmed_task`, `action_reprs` (one
human-readable line per step) and `actions`, each step with `action_uid`, `raw_html`,
`cleaned_html` (every element carrying a `backend_node_id` attribute), `operation` (`op` one of
CLICK / TYPE / SELECT, `original_op`, `value`) and the candidate elements `pos_candidates` (the
target) and `neg_candidates`, each with `tag`, `attributes` (a JSON string), `backend_node_id`.
The release ships JSON files, each a list of tasks, in the split folders `train/`, `test_task/`
(cross-task), `test_website/` (cross-website) and `test_domain/` (cross-domain); the Hugging Face
copy has candidates either as objects or as JSON strings. Both are read here. Fields this project
adds (its own corpus) live under a `cdwm` key on a task or a step and never displace official ones.

`load_tasks(...)` returns `Task` models (with the split each was read from); `Task.model_dump()` is
the release's record again, as the environment protocol takes it.

`load_tasks(source, split)`: `source` is a JSON file, a folder (split subfolders, or JSON files
directly), a Hugging Face dataset id (only where the network allows), or None for the project's
own corpus in this folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.environment import Delta
from harness.errors import HarnessError, invalid

OWN_CORPUS = Path(__file__).parent
# Our split names (Mind2Web's test sets) -> the release's folder names.
SPLIT_FOLDERS = {"train": "train", "cross_task": "test_task", "cross_website": "test_website",
                 "cross_domain": "test_domain"}
TEST_SPLITS = ("cross_task", "cross_website", "cross_domain")
SPLITS = ("test", "all", *SPLIT_FOLDERS)  # test = the three test splits; all = every task found
OPS = ("CLICK", "TYPE", "SELECT")
_NEEDS = ("a Mind2Web task needs annotation_id, website, domain, confirmed_task, action_reprs and actions with "
          "cleaned_html, operation and pos_candidates")
_FIX = ("pass --corpus PATH to a Mind2Web JSON file or a folder of them (the release's data/ folder with "
        "train/ test_task/ test_website/ test_domain/), or a Hugging Face dataset id such as osunlp/Mind2Web")


class Operation(BaseModel):
    model_config = ConfigDict(extra="allow")
    op: Literal["CLICK", "TYPE", "SELECT"]
    original_op: str = ""
    value: str = ""

    @field_validator("op", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class Candidate(BaseModel):
    """One candidate element. `attributes` stays the release's JSON string."""

    model_config = ConfigDict(extra="allow")
    tag: str = ""
    attributes: str = "{}"
    backend_node_id: str
    is_original_target: bool | None = None
    is_top_level_target: bool | None = None

    @field_validator("backend_node_id", mode="before")
    @classmethod
    def _text_id(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    def attribute_map(self) -> dict[str, Any]:  # the release's JSON string, decoded
        try:
            parsed = json.loads(self.attributes)
        except (TypeError, ValueError):
            return {}
        return parsed if isinstance(parsed, dict) else {}


class StepExtra(BaseModel):
    """What the project's own corpus records of a step (`environments.mind2web.build`)."""

    url: str
    delta: Delta  # what the gold action changed
    irreversible: bool
    candidate_deltas: dict[str, Delta] = Field(default_factory=dict)  # backend_node_id -> what pressing it changes


class TaskExtra(BaseModel):
    """What the project's own corpus records of a task: its script's key and start page."""

    key: str
    start_url: str


class Step(BaseModel):
    model_config = ConfigDict(extra="allow")
    action_uid: str
    raw_html: str = ""
    cleaned_html: str
    operation: Operation
    pos_candidates: list[Candidate]
    neg_candidates: list[Candidate] = Field(default_factory=list)
    cdwm: StepExtra | None = None  # the own corpus only

    @field_validator("pos_candidates", "neg_candidates", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        """The Hugging Face copy stores each candidate as a JSON string."""
        if isinstance(value, list):
            return [json.loads(v) if isinstance(v, str) else v for v in value]
        return value


class Task(BaseModel):
    model_config = ConfigDict(extra="allow")
    annotation_id: str
    website: str
    domain: str
    subdomain: str = ""
    confirmed_task: str
    action_reprs: list[str]
    actions: list[Step] = Field(min_length=1)
    cdwm: TaskExtra | None = None  # the own corpus only
    split: str = ""  # our split name of the folder it was read from (`unsplit` for a bare file), set by `load_tasks`


def load_tasks(source: str | Path | None = None, split: str = "test") -> tuple[list[Task], dict[str, str | None]]:
    """Validated tasks (in the release's field names, plus `split`) and the corpus identity (path
    and sha256 of every file read, or the hub id) for the manifest."""
    if split not in SPLITS:
        raise HarnessError(f"Mind2Web split {split!r}: use one of {', '.join(SPLITS)}")
    text = str(source) if source is not None else ""
    path = Path(source) if source is not None else OWN_CORPUS
    looks_like_hub_id = (source is not None and text.count("/") == 1 and not text.endswith(".json")
                         and not text.startswith((".", "/")))
    if source is not None and not path.exists():
        if looks_like_hub_id:
            return _load_hub(text, split), {"path": f"hf:{text}", "sha256": None}
        raise HarnessError(f"Mind2Web corpus {text} not found: {_FIX}")
    files = _split_files(path, split)
    tasks: list[Task] = []
    seen: set[str] = set()
    digest = hashlib.sha256()
    for file, file_split in files:
        raw = file.read_bytes()
        digest.update(str(file.relative_to(path) if path.is_dir() else file.name).encode() + b"\0" + raw)
        for i, row in enumerate(_json_rows(file, raw)):
            task = validate_task(row, f"{file}[{i}]")
            if task.annotation_id in seen:
                raise HarnessError(f"{file}[{i}]: annotation_id {task.annotation_id!r} appears twice; ids must be unique")
            seen.add(task.annotation_id)
            task.split = file_split
            tasks.append(task)
    if not tasks:
        raise HarnessError(f"Mind2Web corpus {path} holds no tasks for split {split!r}: {_FIX}")
    return tasks, {"path": str(path.resolve()), "split": split, "sha256": digest.hexdigest()}


def validate_task(row: Any, where: str) -> Task:
    """One task checked against the release's format; a bad one is one line naming the field."""
    try:
        return Task.model_validate(row)
    except ValidationError as exc:
        raise HarnessError(invalid(exc, where, _NEEDS)) from None


def _split_files(path: Path, split: str) -> list[tuple[Path, str]]:
    """(file, split name) pairs to read, in a fixed order."""
    if path.is_file():
        if split not in ("all", "test"):
            raise HarnessError(f"Mind2Web corpus {path} is one file, not split folders: use split=all")
        return [(path, "unsplit")]
    folders = {name: path / folder for name, folder in SPLIT_FOLDERS.items() if (path / folder).is_dir()}
    if not folders:  # JSON files directly in the folder: no split information
        files = sorted(p for p in path.glob("*.json") if p.is_file())
        if not files:
            raise HarnessError(f"Mind2Web corpus folder {path} holds no .json files and no split folders: {_FIX}")
        if split not in ("all", "test"):
            raise HarnessError(f"Mind2Web corpus folder {path} has no split folders ({', '.join(SPLIT_FOLDERS.values())}): "
                               f"use split=all")
        return [(f, "unsplit") for f in files]
    wanted = list(folders) if split == "all" else [s for s in TEST_SPLITS if s in folders] if split == "test" else [split]
    if split not in ("all", "test") and split not in folders:
        raise HarnessError(f"Mind2Web corpus folder {path} has no {SPLIT_FOLDERS[split]}/ folder for split {split!r}")
    return [(f, name) for name in wanted for f in sorted(folders[name].glob("*.json")) if f.is_file()]


def _json_rows(file: Path, raw: bytes) -> list[Any]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HarnessError(f"{file}: not a JSON file ({exc}): {_FIX}") from None
    return data if isinstance(data, list) else [data]


def _load_hub(dataset_id: str, split: str) -> list[Task]:
    """The hub copy (its `train` split; the test splits are distributed as a protected archive)."""
    fix = ("download the release's JSON files and pass --corpus PATH, or run where huggingface.co is reachable "
           "(HF_HUB_OFFLINE unset)")
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or os.environ.get("HF_DATASETS_OFFLINE", "") not in ("", "0"):
        raise HarnessError(f"Hugging Face dataset {dataset_id!r} cannot be loaded: offline mode is on; {fix}")
    hub_split = "train" if split in ("train", "all") else SPLIT_FOLDERS.get(split, split)
    try:
        import datasets

        ds = datasets.load_dataset(dataset_id, split=hub_split)
    except Exception as exc:  # noqa: BLE001 - any hub failure is one line for the user
        raise HarnessError(f"Hugging Face dataset {dataset_id!r} (split {hub_split}) could not be loaded "
                           f"({type(exc).__name__}: {str(exc)[:120]}); {fix}") from None
    name = "train" if hub_split == "train" else split
    tasks = [validate_task(row, f"hf:{dataset_id}[{i}]") for i, row in enumerate(ds)]
    for task in tasks:
        task.split = name
    return tasks
