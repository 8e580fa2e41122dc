"""Leaderboard tables from a run dir's `index.sqlite`: one row per run, each metric with its
95% CI as `<metric>`, `<metric>_ci_low`, `<metric>_ci_high` columns."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.errors import HarnessError
from harness.records import RunIndex

BASE_COLUMNS = ["run_id", "date", "suite", "suite_version", "model", "judge", "status", "n", "errors"]


def leaderboard(run_dir: Path, suite: str) -> pd.DataFrame:
    if not (run_dir / "index.sqlite").exists():
        raise HarnessError(f"no runs in {run_dir}: run `harness eval --suite {suite}` first or pass --run-dir DIR")
    index = RunIndex(run_dir)
    try:
        rows = []
        for run in index.runs(suite):
            row = {
                "run_id": run["run_id"], "date": (run["ended"] or run["started"] or "")[:10],
                "suite": run["suite"], "suite_version": run["suite_version"], "model": run["model"],
                "judge": run["judge"], "status": run["status"], "n": run["samples"], "errors": run["errors"],
            }
            for name, m in index.metrics(run["run_id"]).items():
                row[name] = m.value
                row[f"{name}_ci_low"] = m.ci_low
                row[f"{name}_ci_high"] = m.ci_high
            rows.append(row)
    finally:
        index.close()
    if not rows:
        raise HarnessError(f"no runs of suite {suite!r} in {run_dir}: check --suite or --run-dir (see `harness runs`)")
    frame = pd.DataFrame(rows)
    return frame[BASE_COLUMNS + [c for c in frame.columns if c not in BASE_COLUMNS]]


def export(frame: pd.DataFrame, fmt: str, out: Path | None) -> str | None:
    if fmt != "csv":
        raise HarnessError(f"--format {fmt!r} is not supported yet: use --format csv")
    text = frame.to_csv(index=False, float_format="%.6g")
    if out is None:
        return text
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return None
