"""(observation, action, ground-truth delta) records from CDWM runs, as a Hugging Face dataset for
training a world model.

Each executed step of each recorded episode is one row: what the agent saw before acting (the
observation text as its policy read it), the action, its class, and the delta the environment's
ledger recorded. Deltas are stored as canonical JSON strings (their `before`/`after` values mix
types, which a columnar schema cannot hold), with the flat fact list beside them for filtering.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from environments.cdwm.deltas import Delta
from harness.errors import HarnessError
from harness.run_folder import RunFolder

COLUMNS = ("run_id", "suite", "sample_id", "epoch", "task_id", "intent", "step", "observation", "action",
           "action_class", "valid", "delta", "facts", "reversible", "irreversible_cost", "predicted_delta",
           "prediction_source")


class RunTransition(TypedDict):
    """One executed step of a recorded run (`COLUMNS`): a line of `transitions.jsonl` as written
    and a row of the dataset."""

    run_id: str
    suite: str
    sample_id: str
    epoch: int
    task_id: str
    intent: str
    step: int
    observation: str
    action: str
    action_class: str
    valid: bool
    delta: str  # the ledger's Delta, as JSON
    facts: list[str]
    reversible: bool
    irreversible_cost: float
    predicted_delta: str | None  # the chosen prediction, as canonical JSON
    prediction_source: str | None


def _fact_text(fact: tuple[str, ...]) -> str:
    return " | ".join(str(x) for x in fact)


def transitions_of_run(folder: RunFolder) -> list[RunTransition]:
    manifest = folder.read_manifest()
    rows: list[RunTransition] = []
    for rec in sorted(folder.read_samples(), key=lambda r: (r.sample_id, r.epoch)):
        steps = rec.output.get("steps")
        if not isinstance(steps, list):
            continue
        for s in steps:
            delta = Delta.model_validate(s["delta"])
            pred = s.get("prediction")
            rows.append({
                "run_id": manifest.run_id, "suite": manifest.suite, "sample_id": rec.sample_id, "epoch": rec.epoch,
                "task_id": str(rec.output.get("task_id", rec.sample_id)), "intent": str(rec.output.get("intent", "")),
                "step": int(s["index"]), "observation": str(s["observation"]), "action": str(s["action"]),
                "action_class": str(s.get("action_class", "")), "valid": bool(s.get("valid", True)),
                "delta": delta.model_dump_json(), "facts": sorted(_fact_text(f) for f in delta.facts()),
                "reversible": delta.reversible, "irreversible_cost": float(delta.irreversible_cost),
                "predicted_delta": json.dumps(pred, sort_keys=True) if pred is not None else None,
                "prediction_source": s.get("prediction_source"),
            })
    return rows


def resolve_run(run: str, run_dir: Path) -> RunFolder:
    """`run` is a run id under `run_dir`, or the path of a run folder (one with manifest.json)."""
    path = Path(run)
    if (path / "manifest.json").is_file():
        return RunFolder(path.parent, path.name)
    folder = RunFolder(run_dir, run)
    if not folder.exists():
        raise HarnessError(f"--run {run}: no run with that id in {run_dir} and no run folder at that path; "
                           f"see `harness runs --run-dir {run_dir}` or pass --run-dir")
    return folder


def export_transitions(runs: list[str], run_dir: Path, out: Path) -> tuple[int, dict[str, Path]]:
    """Write `out/dataset` (datasets.save_to_disk) and `out/transitions.jsonl`; returns the row count."""
    import datasets

    rows: list[RunTransition] = []
    for run in runs:
        folder = resolve_run(run, run_dir)
        found = transitions_of_run(folder)
        if not found:
            raise HarnessError(f"--run {run}: no CDWM steps in its samples (is it a cdwm-* suite run with finished samples?)")
        rows += found
    features = datasets.Features({
        **{c: datasets.Value("string") for c in ("run_id", "suite", "sample_id", "task_id", "intent", "observation",
                                                  "action", "action_class", "delta", "predicted_delta", "prediction_source")},
        "epoch": datasets.Value("int64"), "step": datasets.Value("int64"), "valid": datasets.Value("bool"),
        "facts": datasets.Sequence(datasets.Value("string")), "reversible": datasets.Value("bool"),
        "irreversible_cost": datasets.Value("float64"),
    })
    out.mkdir(parents=True, exist_ok=True)
    ds = datasets.Dataset.from_list([dict(r) for r in rows], features=features)
    ds.save_to_disk(str(out / "dataset"))
    jsonl = out / "transitions.jsonl"
    with open(jsonl, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows), {"dataset": out / "dataset", "jsonl": jsonl}
